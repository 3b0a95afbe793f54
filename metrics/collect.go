package metrics

import (
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The slots' state, read from the published View on every scrape.
var (
	slotsDesc = prometheus.NewDesc("nomad_device_zfs_slots",
		"Configured slots by lifecycle state: ready, held, releasing, missing (not created yet, or someone else's dataset at its name), unknown.",
		[]string{labelPool, labelClass, labelState}, nil)
	freeDesc = prometheus.NewDesc("nomad_device_zfs_slots_free",
		"Slots a new allocation of the class can get now: ready and healthy.",
		[]string{labelPool, labelClass}, nil)
	unhealthyDesc = prometheus.NewDesc("nomad_device_zfs_slots_unhealthy",
		"Configured slots Nomad may not place on (its node status shows why): a pool not ONLINE, something foreign below, not created yet.",
		[]string{labelPool, labelClass}, nil)
	retainedDesc = prometheus.NewDesc("nomad_device_zfs_retained_datasets",
		"Former slots kept aside by the snapshot policy until they expire.",
		[]string{labelPool, labelClass}, nil)
	retainedBytesDesc = prometheus.NewDesc("nomad_device_zfs_retained_bytes",
		"Space used by the retained datasets.",
		[]string{labelPool, labelClass}, nil)
	parkedDesc = prometheus.NewDesc("nomad_device_zfs_parked_datasets",
		"Sticky data parked for its allocation's replacement.",
		[]string{labelPool, labelClass}, nil)
	parkedBytesDesc = prometheus.NewDesc("nomad_device_zfs_parked_bytes",
		"Space used by the parked datasets.",
		[]string{labelPool, labelClass}, nil)
	replicaDesc = prometheus.NewDesc("nomad_device_zfs_replica_datasets",
		"Copies this node keeps of other nodes' held slots, for a replacement if their node is lost.",
		[]string{labelPool, labelClass}, nil)
	replicaBytesDesc = prometheus.NewDesc("nomad_device_zfs_replica_bytes",
		"Space the replicas use.",
		[]string{labelPool, labelClass}, nil)
	poolHealthDesc = prometheus.NewDesc("nomad_device_zfs_pool_health",
		"1 for the pool's health as zpool reports it, 0 for the others; UNKNOWN when the pool is not found or zpool failed.",
		[]string{labelPool, labelHealth}, nil)
	poolSizeDesc = prometheus.NewDesc("nomad_device_zfs_pool_size_bytes",
		"The pool's size.", []string{labelPool}, nil)
	poolFreeDesc = prometheus.NewDesc("nomad_device_zfs_pool_free_bytes",
		"The pool's free space.", []string{labelPool}, nil)
	scannedDesc = prometheus.NewDesc("nomad_device_zfs_last_scan_timestamp_seconds",
		"When the last full scan read the datasets (Unix time): the age of the slots' sizes and of the pool's health.",
		[]string{labelPool}, nil)
)

// The state label's values, as indexes of slotStates.
const (
	stateReady = iota
	stateHeld
	stateReleasing
	stateMissing
	stateUnknown
)

// slotStates are the state label's values, each emitted for every class.
var slotStates = []string{string(model.StateReady), string(model.StateHeld), string(model.StateReleasing), "missing", "unknown"}

// poolHealths are the health label's values: zpool's, and UNKNOWN.
var poolHealths = []string{zfs.PoolOnline, zfs.PoolDegraded, zfs.PoolFaulted, "OFFLINE", "UNAVAIL", "REMOVED", "SUSPENDED", "UNKNOWN"}

// stateCollector reads the slots' state when Prometheus asks.
type stateCollector struct {
	views ViewSource
	snaps func() *model.Snapshot
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{slotsDesc, freeDesc, unhealthyDesc, retainedDesc, retainedBytesDesc, parkedDesc, parkedBytesDesc,
		replicaDesc, replicaBytesDesc, poolHealthDesc, poolSizeDesc, poolFreeDesc, scannedDesc} {
		ch <- d
	}
}

// Collect emits the View as it is now. Before the first scan there is
// nothing to say, and nothing is emitted.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	v, _ := c.views.View()
	if v == nil {
		return
	}
	for i := range v.Classes {
		c.class(ch, &v.Classes[i], true)
	}
	for i := range v.Removed {
		c.class(ch, &v.Removed[i], false)
	}
	c.pools(ch, v)
}

// snapshot is the watcher's latest snapshot, nil before the first.
func (c *stateCollector) snapshot() *model.Snapshot {
	if c.snaps == nil {
		return nil
	}
	return c.snaps()
}

// class emits one class: its configured slots by state (not for a class
// the configuration no longer has), and its retained and parked data. The
// slots holding data are slots.go's.
func (c *stateCollector) class(ch chan<- prometheus.Metric, cv *model.ClassView, configured bool) {
	pool, name := zfs.PoolOf(cv.Dataset), cv.Class.Name
	if configured {
		counts := make([]int, len(slotStates))
		free, unhealthy := 0, 0
		for i := range cv.Slots {
			s := &cv.Slots[i]
			state := stateIndex(s)
			counts[state]++
			switch {
			case !s.Healthy:
				unhealthy++
			case state == stateReady:
				free++
			}
		}
		for i, st := range slotStates {
			ch <- prometheus.MustNewConstMetric(slotsDesc, prometheus.GaugeValue, float64(counts[i]), pool, name, st)
		}
		ch <- prometheus.MustNewConstMetric(freeDesc, prometheus.GaugeValue, float64(free), pool, name)
		ch <- prometheus.MustNewConstMetric(unhealthyDesc, prometheus.GaugeValue, float64(unhealthy), pool, name)
	}
	var retained, parked uint64
	for _, r := range cv.Retained {
		retained += r.Info.Used
	}
	for _, r := range cv.Parked {
		parked += r.Info.Used
	}
	ch <- prometheus.MustNewConstMetric(retainedDesc, prometheus.GaugeValue, float64(len(cv.Retained)), pool, name)
	ch <- prometheus.MustNewConstMetric(retainedBytesDesc, prometheus.GaugeValue, float64(retained), pool, name)
	ch <- prometheus.MustNewConstMetric(parkedDesc, prometheus.GaugeValue, float64(len(cv.Parked)), pool, name)
	ch <- prometheus.MustNewConstMetric(parkedBytesDesc, prometheus.GaugeValue, float64(parked), pool, name)
	var replicas uint64
	for _, r := range cv.Replicas {
		replicas += r.Info.Used
	}
	ch <- prometheus.MustNewConstMetric(replicaDesc, prometheus.GaugeValue, float64(len(cv.Replicas)), pool, name)
	ch <- prometheus.MustNewConstMetric(replicaBytesDesc, prometheus.GaugeValue, float64(replicas), pool, name)
}

// stateIndex places a slot in slotStates. A parked dataset at a slot's
// own name is a claim a crash interrupted: held by its new holder.
func stateIndex(s *model.Slot) int {
	switch {
	case !s.Exists:
		return stateMissing
	case s.State == model.StateReady:
		return stateReady
	case s.State == model.StateHeld || s.State == model.StateParked:
		return stateHeld
	case s.State == model.StateReleasing:
		return stateReleasing
	}
	return stateUnknown
}

// holdsData reports whether a slot holds an allocation's data: its sizes
// are then emitted with its holder's labels, until it is ready again.
func holdsData(s *model.Slot) bool {
	i := stateIndex(s)
	return (i == stateHeld || i == stateReleasing) && s.Holder != ""
}

// holderOf finds allocation id in snap (sorted by ID): its namespace, job
// and task group, "" when the snapshot does not have it (no answer from
// Nomad yet, or a namespace the token cannot read).
func holderOf(snap *model.Snapshot, id string) (namespace, job, group string) {
	if snap == nil {
		return "", "", ""
	}
	as := snap.Allocs
	i := sort.Search(len(as), func(i int) bool { return as[i].ID >= id })
	if i == len(as) || as[i].ID != id {
		return "", "", ""
	}
	return as[i].Namespace, as[i].JobID, as[i].TaskGroup
}

// pools emits each parent's pool's health and size, and the time of the
// last scan, once a pool whatever the number of parents in it.
func (c *stateCollector) pools(ch chan<- prometheus.Metric, v *model.View) {
	parents := v.Parents
	if len(parents) == 0 && len(v.Classes) > 0 {
		// A view built by hand: its one parent's pool.
		parents = []model.ParentView{{Dataset: zfs.PoolOf(v.Classes[0].Dataset), Pool: v.Pool}}
	}
	seen := map[string]bool{}
	for _, p := range parents {
		name := zfs.PoolOf(p.Dataset)
		if seen[name] {
			continue
		}
		seen[name] = true
		c.pool(ch, name, p.Pool, v.ScannedAt)
	}
}

// pool emits one pool's health (UNKNOWN when the scan did not find it),
// its size and the time of the last scan.
func (c *stateCollector) pool(ch chan<- prometheus.Metric, name string, p *zfs.Pool, scanned time.Time) {
	health := "UNKNOWN"
	if p != nil {
		health = p.Health
	}
	known := false
	for _, h := range poolHealths {
		val := 0.0
		if h == health {
			val, known = 1, true
		}
		ch <- prometheus.MustNewConstMetric(poolHealthDesc, prometheus.GaugeValue, val, name, h)
	}
	if !known {
		// A state this list does not have (a newer OpenZFS): said as it is.
		ch <- prometheus.MustNewConstMetric(poolHealthDesc, prometheus.GaugeValue, 1, name, health)
	}
	if p != nil {
		ch <- prometheus.MustNewConstMetric(poolSizeDesc, prometheus.GaugeValue, float64(p.Size), name)
		ch <- prometheus.MustNewConstMetric(poolFreeDesc, prometheus.GaugeValue, float64(p.Free), name)
	}
	ch <- prometheus.MustNewConstMetric(scannedDesc, prometheus.GaugeValue, float64(scanned.UnixNano())/1e9, name)
}
