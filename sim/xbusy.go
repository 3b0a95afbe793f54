package sim

import (
	"context"
	"sort"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Parked data held busy after its last send (XBusy). On real agents a
// destroy of parked data right after its final copy was sent was refused
// as busy (make e2e-cluster, TestMigrateSenderKilled): the release had
// dropped the data's snapshots, @migrated with them, before its destroy.
// Here, for some minutes after an XBusy event, a process (an agent that
// looks at each dataset the plugin is done sending) holds the mount of
// each parked dataset its node answers is copied whole, for a while
// (xholds.each): a destroy of it fails as on real OpenZFS ("cannot unmount
// '<mountpoint>': pool or dataset is busy",
// zfs/testdata/openzfs-2.1.11/err-destroy-busy), while its snapshots go as
// usual, so a release that drops them first is cut in two. The process is
// not the plugin's fault and leaves in its own time, the settle included:
// most copies complete there, once the transport's faults have ended.

// xholds is the XBusy process: it holds what is copied whole until till,
// each for each.
type xholds struct {
	till time.Time
	each time.Duration
}

// holdCopied holds dataset ds, which node from has just answered is copied
// whole, while the process runs and ds is parked data there, mounted.
func (from *xnode) holdCopied(ds string) {
	w := from.w
	if !w.now.Before(w.holds.till) || !from.parkedMounted(ds) {
		return
	}
	if err := from.fake.SetBusy(ds, true); err != nil {
		w.violate("harness", "holding %s on %s: %v", ds, from.name, err)
		return
	}
	from.busyTill[ds] = w.now.Add(w.holds.each)
	w.counts.Busy++
	w.logf("  link: a process holds %s on %s, copied whole, until +%s", ds, from.name, from.busyTill[ds].Sub(epoch).Truncate(time.Second))
}

// parkedMounted reports whether ds is parked data on n, mounted.
func (n *xnode) parkedMounted(ds string) bool {
	sets, err := zfs.NewClient(n.fake).List(context.Background(), ds, []string{model.PropState})
	return err == nil && len(sets) > 0 && sets[0].Name == ds && sets[0].Mounted &&
		model.State(sets[0].User.Get(model.PropState)) == model.StateParked
}

// letGo ends the holds on n that are due. A held dataset is still there
// under its name: nothing destroys or renames it while it is busy.
func (n *xnode) letGo() {
	var due []string
	for ds, till := range n.busyTill {
		if !n.w.now.Before(till) {
			due = append(due, ds)
		}
	}
	sort.Strings(due)
	for _, ds := range due {
		if err := n.fake.SetBusy(ds, false); err != nil {
			n.w.violate("harness", "letting go of %s on %s: %v", ds, n.name, err)
		}
		delete(n.busyTill, ds)
		n.w.logf("%s: the process holding %s is gone", n.name, ds)
	}
}
