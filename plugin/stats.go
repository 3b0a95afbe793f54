package plugin

import (
	"context"
	"time"

	"github.com/hashicorp/nomad/plugins/device"
	"github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/pause"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// Stats streams per-slot usage: used, available, referenced and
// compressratio. The numbers come from the manager's latest scan, so they
// cost no zfs process and are as fresh as scan_interval; a response is sent
// when a newer view is published, at most once per interval (the client's,
// 1 s by default), and the client keeps the last one meanwhile. A view
// whose numbers are those already sent (a periodic scan of an idle node)
// sends nothing. At 10,000 slots, rebuilding and sending every instance's
// statistics on every tick was the plugin's main garbage; one response is
// still 8 MB here and more in Nomad's conversion to protobuf.
func (p *Plugin) Stats(ctx context.Context, interval time.Duration) (<-chan *device.StatsResponse, error) {
	mgr, _, err := p.manager()
	if err != nil {
		return nil, err
	}
	if interval <= 0 {
		interval = time.Second
	}
	out := make(chan *device.StatsResponse)
	go func() {
		defer close(out)
		var sent *model.View
		for {
			v, updated := mgr.View()
			if v != nil && v != sent && sent != nil && sameStats(v, sent) {
				sent = v
			}
			if v != nil && v != sent {
				select {
				case out <- &device.StatsResponse{Groups: statsGroups(v)}:
					sent = v
				case <-ctx.Done():
					return
				}
				if err := pause.For(ctx, interval); err != nil {
					return
				}
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-updated:
			}
		}
	}()
	return out, nil
}

// sameStats reports whether a and b give every instance the same numbers:
// the same slots exist, with the same sizes.
func sameStats(a, b *model.View) bool {
	if len(a.Classes) != len(b.Classes) {
		return false
	}
	for ci := range a.Classes {
		as, bs := a.Classes[ci].Slots, b.Classes[ci].Slots
		if len(as) != len(bs) {
			return false
		}
		for si := range as {
			x, y := &as[si], &bs[si]
			if x.ID != y.ID || x.Exists != y.Exists || x.Info.Used != y.Info.Used || x.Info.Available != y.Info.Available ||
				x.Info.Referenced != y.Info.Referenced || x.Info.CompressRatio != y.Info.CompressRatio {
				return false
			}
		}
	}
	return true
}

// statsGroups is one response: the numbers of every slot that exists, by
// class. Instances with the same numbers share one DeviceStats (Nomad only
// reads them): ready slots are empty datasets, alike, and at 10,000 slots
// building one each was 8 MB of the plugin's peak, live while the response
// is converted and sent.
func statsGroups(v *model.View) []*device.DeviceGroupStats {
	groups := make([]*device.DeviceGroupStats, 0, len(v.Classes))
	shared := map[statsKey]*device.DeviceStats{}
	var block []instanceStats
	for i := range v.Classes {
		cv := &v.Classes[i]
		n := 0
		for si := range cv.Slots {
			if cv.Slots[si].Exists {
				n++
			}
		}
		g := &device.DeviceGroupStats{
			Vendor:        Vendor,
			Type:          DeviceType,
			Name:          cv.Class.Name,
			InstanceStats: make(map[string]*device.DeviceStats, n),
		}
		for si := range cv.Slots {
			s := &cv.Slots[si]
			if !s.Exists {
				continue
			}
			k := statsKey{s.Info.Used, s.Info.Available, s.Info.Referenced, s.Info.CompressRatio}
			ds, ok := shared[k]
			if !ok {
				// Allocated in blocks, not fifteen objects an instance: at
				// 10,000 slots that was 150,000 small objects.
				if len(block) == 0 {
					block = make([]instanceStats, min(n, 64))
				}
				ds = block[0].fill(&s.Info, v.ScannedAt)
				block = block[1:]
				shared[k] = ds
			}
			g.InstanceStats[s.ID] = ds
		}
		groups = append(groups, g)
	}
	return groups
}

// statsKey are the numbers an instance's statistics show.
type statsKey struct {
	used, available, referenced uint64
	ratio                       float64
}

// instanceStats is one instance's statistics with the numbers their
// pointers point to, allocated together.
type instanceStats struct {
	stats                                   device.DeviceStats
	obj                                     structs.StatObject
	summary, used, avail, referenced, ratio structs.StatValue
	usedN, totalN, availN, referencedN      int64
	ratioF                                  float64
}

// fill sets is from a slot's last reading and returns its DeviceStats.
func (is *instanceStats) fill(d *model.Info, at time.Time) *device.DeviceStats {
	is.usedN, is.totalN = int64(d.Used), int64(d.Used+d.Available)
	is.availN, is.referencedN, is.ratioF = int64(d.Available), int64(d.Referenced), d.CompressRatio
	is.summary = structs.StatValue{IntNumeratorVal: &is.usedN, IntDenominatorVal: &is.totalN, Unit: "bytes", Desc: "used"}
	is.used = structs.StatValue{IntNumeratorVal: &is.usedN, Unit: "bytes", Desc: "space used by the dataset and its snapshots"}
	is.avail = structs.StatValue{IntNumeratorVal: &is.availN, Unit: "bytes", Desc: "space available to the dataset"}
	is.referenced = structs.StatValue{IntNumeratorVal: &is.referencedN, Unit: "bytes", Desc: "data the dataset refers to"}
	is.ratio = structs.StatValue{FloatNumeratorVal: &is.ratioF, Unit: "x", Desc: "compression ratio"}
	is.obj.Attributes = map[string]*structs.StatValue{
		"used": &is.used, "available": &is.avail, "referenced": &is.referenced, "compressratio": &is.ratio,
	}
	is.stats = device.DeviceStats{Summary: &is.summary, Stats: &is.obj, Timestamp: at}
	return &is.stats
}
