package sim

import (
	"github.com/hashicorp/nomad/nomad/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/scheduler"
)

// Cluster resets: Nomad's indexes are not forever. The servers' state
// starts over, rebuilt from scratch or restored from an older snapshot,
// and its indexes with it: allocations placed from then on have a
// CreateIndex at or below what the plugin recorded from the old history
// (holder_index, the watcher's wait index). A client that joins another
// cluster sees the same. The plugin must notice nothing wrong, recover by
// itself, share nothing and wipe nothing early.

// savedState is a snapshot of the servers' state the operator saved, and
// the jobs as the operator had submitted them then.
type savedState struct {
	cluster *scheduler.Cluster
	jobs    map[string]*jobSpec
}

// backup is the operator's `nomad operator snapshot save`.
func (w *World) backup() {
	c, err := w.cluster.Snapshot()
	if err != nil {
		w.violate("harness", "snapshot: %v", err)
		return
	}
	w.saved = &savedState{cluster: c, jobs: cloneJobs(w.jobs)}
	w.logf("the operator saves the servers' state (index %d)", c.Index())
}

func cloneJobs(jobs map[string]*jobSpec) map[string]*jobSpec {
	out := make(map[string]*jobSpec, len(jobs))
	for id, js := range jobs {
		cp := *js
		cp.job.Groups = append([]scheduler.Group(nil), js.job.Groups...)
		for i := range cp.job.Groups {
			cp.job.Groups[i].Tasks = append([]scheduler.Task(nil), js.job.Groups[i].Tasks...)
		}
		out[id] = &cp
	}
	return out
}

// clusterReset starts the servers' state over: restored from the last
// saved snapshot (when there is one, half the time), or rebuilt from
// scratch, after which the operator registers the live jobs again. The
// node registers again (at once, or when it reconnects); its client then
// stops what the servers no longer know, reports again what they know
// otherwise (a restored allocation it has seen end), and pulls what they
// give it, a restored one it had dropped included (it runs again).
func (w *World) clusterReset() {
	w.resetAt = w.now
	if w.saved != nil && w.rng.IntN(2) == 0 {
		w.restore()
	} else {
		w.rebuild()
	}
}

// restore restores the servers' state from the saved snapshot.
func (w *World) restore() {
	before := w.cluster.Index()
	c, err := w.saved.cluster.Snapshot() // the saved one stays restorable
	if err != nil {
		w.violate("harness", "snapshot: %v", err)
		return
	}
	w.cluster, w.jobs = c, cloneJobs(w.saved.jobs)
	w.logf("the servers' state is restored from the saved snapshot: index %d, was %d", c.Index(), before)
	if w.connected {
		w.registerNode()
		w.setNodeStatus(nodeID, structs.NodeStatusReady)
	}
	w.remoteAfterReset()
	w.resync()
}

// rebuild starts the servers' state from scratch; the operator registers
// the live jobs again.
func (w *World) rebuild() {
	before := w.cluster.Index()
	c, err := scheduler.New(scheduler.Options{Preemption: true, Pick: w.pick, AllocID: w.nextAllocID})
	if err != nil {
		w.violate("harness", "new cluster: %v", err)
		return
	}
	w.cluster = c
	w.logf("the servers' state is rebuilt from scratch: index %d, was %d", c.Index(), before)
	if w.connected {
		w.registerNode()
	}
	w.remoteAfterReset()
	for _, js := range w.liveJobs() {
		w.logf("the operator registers %s again", js.job.ID)
		w.eval(w.cluster.Register(js.job))
	}
	w.resync()
}

// resync is the client reporting its allocations to servers whose state
// started over.
func (w *World) resync() {
	for _, a := range w.sortedLocal() {
		a.reported = "" // the client syncs its allocations with the servers it now has
		w.report(a)
	}
}

// registerNode registers the node with the servers, with the devices it
// last fingerprinted.
func (w *World) registerNode() {
	if err := w.cluster.UpsertNode(w.node); err != nil {
		w.violate("harness", "UpsertNode: %v", err)
	}
}

// remoteAfterReset puts the other node (partition.go) in the new servers'
// state as it is: up, with its devices, while the node here is cut off
// with replacements going there; else down, should a restored snapshot
// still have it ready (nothing runs its allocations).
func (w *World) remoteAfterReset() {
	if w.remoteUp {
		w.remoteUp = false
		w.remoteUp = w.upRemote()
		return
	}
	evs, _ := w.cluster.SetNodeStatus(remoteID, structs.NodeStatusDown) // not found: never registered there
	for _, ev := range evs {
		w.eval(ev, nil)
	}
}
