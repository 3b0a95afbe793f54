package sim

import (
	"context"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/nomad/nomad/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The replicas' invariants (docs/lifecycle.md, XR1-XR6), from data: what
// each replica's snapshots hold is known by guid from the snapshot the
// holder took (snapContent, snapAt), and each token by the allocation that
// wrote it.

// xreplicaState is what the replica checks remember between events.
type xreplicaState struct {
	// held are the complete replicas each node held at the last check,
	// by dataset, each with its source allocation (XR5).
	held map[string]map[string]string
	// calmSince: no transport, plugin, pool or node fault since then
	// (XR6 measures the replicas' age only over a calm stretch).
	calmSince time.Time
	// chosen is since when each node has been chosen for each
	// allocation's replica, while it runs (node + "/" + alloc).
	chosen map[string]time.Time
	// arrived is when each replica snapshot was first seen on a node
	// (node + "/" + guid): its transfer took from its snapAt to then.
	arrived map[string]time.Time
	// lostAt is when a check first saw each replicated allocation lost
	// (XR5's clock: the servers' later updates of the allocation, a
	// replacement's, move its modify time but not its loss).
	lostAt map[string]time.Time
}

// xReplicaTransfer is one transfer's time, at most, in XR6's bound (a
// stream here takes no simulated time but a stall, which is a fault; the
// loop's round pauses at least a second).
const xReplicaTransfer = 2 * time.Second

// calmBreaker reports whether events of kind k are faults XR6 waits out.
func calmBreaker(k XKind) bool {
	switch k {
	case XPass, XSettle, XPulls, XClientStep, XWrite, XTick, XSubmit, XMove, XUpdate, XStopJob, XTaskFail, XGC:
		return false
	}
	return true
}

// armed reports whether a transport fault waits for the next streams
// (a fault drawn earlier strikes at a later event).
func (f xfaults) armed() bool {
	return f.cuts > 0 || f.killSender || f.lie != lieNone || f.stalls > 0 || !f.downTill.IsZero()
}

// replicaRows lists n's replicas of pg (and what is below them) as zfs
// does, past the plugin's runner.
func (n *xnode) replicaRows() ([]zfs.Dataset, []model.Replica, error) {
	ds := n.w.cfg.ClassDataset("pg")
	rows, err := zfs.NewClient(n.fake).List(context.Background(), ds, model.UserProps)
	if err != nil {
		return nil, nil, err
	}
	return rows, model.ReplicasIn(ds, rows), nil
}

// lineage is every token allocation id's slot held or came to hold, and
// its predecessors' (the sticky chain it inherits from in place before
// its task starts): the data a replica of it may hold.
func (w *XWorld) lineage(id string) map[string]bool {
	out := map[string]bool{}
	for hops := 0; id != "" && hops < 64; hops++ {
		d := w.data[id]
		if d == nil {
			if sa := w.cluster.Alloc(id); sa != nil {
				id = sa.PreviousAllocation
				continue
			}
			break
		}
		for _, t := range d.inherited {
			out[t] = true
		}
		for _, t := range d.wrote {
			out[t] = true
		}
		id = d.prev
	}
	return out
}

// checkReplicas is XR1-XR3 and XR5 after every event, and XR6 after the
// pulls' turns (pulled).
//
// XR1, lineage: every snapshot of a replica (or of the whole copy beside
// it, once its swap began: marked for the replica) is one a plugin took
// (by guid), and holds only tokens of its source allocation's lineage
// (what it and its predecessors inherited and wrote: a replacement not
// started yet holds its predecessor's data): never another lineage's
// data, nor data no allocation wrote. A copy beside marked for itself is
// a receive not yet verified, which no reader takes for the replica: the
// round that finds it complete and unchecked discards it
// (model.DecideReplicaPullMove).
//
// XR2: a replica is never mounted, nor offered as a slot (the node
// fingerprints pg-1 and pg-2 alone).
//
// XR3: a slot keeps at most two replica snapshots (the one last sent, and
// the one a pull now takes) and ReplicaBookmarksKept bookmarks and one;
// parked data keeps none (the park drops them).
//
// XR5: a complete replica is not dropped while its source allocation has
// not ended (or is unknown: a cut-off holder may still run), nor within
// sticky_wait of its loss (the replica is what a replacement would
// claim): a failed lookup is no answer, and a replica node's loop drops
// only what DecideReplica drops.
func (w *XWorld) checkReplicas(pulled []*xnode) {
	if !w.replicas {
		return
	}
	if w.rx.held == nil {
		w.rx.held, w.rx.chosen, w.rx.arrived = map[string]map[string]string{}, map[string]time.Time{}, map[string]time.Time{}
		w.rx.lostAt = map[string]time.Time{}
	}
	for _, n := range w.nodes {
		rows, reps, err := n.replicaRows()
		if err != nil {
			w.violate("harness", "zfs list on %s: %v", n.name, err)
			return
		}
		now := map[string]string{}
		for _, d := range rows {
			ds, _, _ := strings.Cut(d.Name, "@")
			if main, beside := strings.CutSuffix(ds, ".whole"); beside && !swapBegun(rows, main) {
				continue // not yet verified: it may be discarded, and come again (seed 9740356)
			}
			if k := arrivalKey(n, ds, d.GUID); d.IsSnapshot() && strings.HasPrefix(path.Base(d.Name), "replica-") && w.rx.arrived[k].IsZero() {
				w.rx.arrived[k] = w.now
			}
		}
		for _, r := range reps {
			w.checkLineage(n, r, rows)
			if r.Newest > 0 {
				now[r.Dataset] = r.Source
			}
		}
		for _, d := range rows {
			name := strings.TrimSuffix(d.Name, ".whole")
			if !d.IsSnapshot() && !d.IsBookmark() && strings.HasPrefix(path.Base(name), "replica-") && d.Mounted {
				w.violate("XR2", "%s: replica %s is mounted at %s", n.name, d.Name, d.Mountpoint)
			}
		}
		for _, g := range n.registered.Devices {
			for _, in := range g.Instances {
				if in.ID != "pg-1" && in.ID != "pg-2" {
					w.violate("XR2", "%s offers %s as a slot of %s", n.name, in.ID, g.Class)
				}
			}
		}
		w.checkBases(n, rows)
		for ds, src := range w.rx.held[n.id] {
			sa := w.cluster.Alloc(src)
			if sa != nil && sa.ClientStatus == structs.AllocClientStatusLost && w.rx.lostAt[src].IsZero() {
				w.rx.lostAt[src] = w.now
			}
			if _, ok := now[ds]; ok || w.takenOver(n, ds) {
				continue
			}
			switch {
			case sa == nil:
			case !sa.ClientTerminalStatus():
				w.violate("XR5", "%s dropped its replica %s of %s, which is %s (desired %s)", n.name, ds, shortID(src), sa.ClientStatus, sa.DesiredStatus)
			case sa.ClientStatus == structs.AllocClientStatusLost && w.now.Sub(w.rx.lostAt[src]) < w.cfg.Class("pg").StickyWait:
				w.violate("XR5", "%s dropped its replica %s of %s, lost %s ago: within sticky_wait", n.name, ds, shortID(src),
					w.now.Sub(w.rx.lostAt[src]).Round(time.Second))
			}
		}
		w.rx.held[n.id] = now
	}
	if len(pulled) > 0 {
		w.checkAge(pulled)
	}
}

// checkLineage is XR1 for replica r on n.
func (w *XWorld) checkLineage(n *xnode, r model.Replica, rows []zfs.Dataset) {
	allowed := w.lineage(r.Source)
	swapping := swapBegun(rows, r.Dataset)
	for _, d := range rows {
		if !d.IsSnapshot() || !(strings.HasPrefix(d.Name, r.Dataset+"@") || swapping && strings.HasPrefix(d.Name, r.Dataset+".whole@")) {
			continue
		}
		content, ok := w.snapContent[d.GUID]
		if !ok {
			w.violate("XR1", "%s: replica snapshot %s (guid %s) is no snapshot a plugin took", n.name, d.Name, d.GUID)
			continue
		}
		for _, t := range strings.Split(content, ",") {
			if t != "" && !allowed[t] {
				w.violate("XR1", "%s: replica snapshot %s holds %s, which %s's slot never held", n.name, d.Name, t, shortID(r.Source))
			}
		}
	}
}

// swapBegun reports whether the copy beside replica (in rows) is marked
// for it: its swap began, which only a verified copy's does
// (model.PlanSwapReplica). Until then it is a receive no check has
// passed, which nothing reads as the replica, and which a round may
// discard.
func swapBegun(rows []zfs.Dataset, replica string) bool {
	return slices.ContainsFunc(rows, func(d zfs.Dataset) bool {
		return d.Name == replica+".whole" && d.User.Get(model.PropOwner) == replica
	})
}

// checkBases is XR3 on n.
func (w *XWorld) checkBases(n *xnode, rows []zfs.Dataset) {
	snaps, marks := map[string]int{}, map[string]int{}
	for _, d := range rows {
		ds, short, ok := strings.Cut(d.Name, "@")
		if !ok {
			ds, short, ok = strings.Cut(d.Name, "#")
		}
		if _, num := model.ReplicaNumber(short); !ok || !num || strings.HasPrefix(path.Base(ds), "replica-") {
			continue
		}
		if d.IsBookmark() {
			marks[ds]++
		} else {
			snaps[ds]++
		}
	}
	parked := map[string]bool{}
	for _, d := range rows {
		if model.State(d.User.Get(model.PropState)) == model.StateParked && !d.IsSnapshot() && !d.IsBookmark() {
			parked[d.Name] = true
		}
	}
	for ds, c := range snaps {
		if c > 2 || parked[ds] {
			w.violate("XR3", "%s: %s keeps %d replica snapshots (parked %v)", n.name, ds, c, parked[ds])
		}
	}
	for ds, c := range marks {
		if c > model.ReplicaBookmarksKept+1 || parked[ds] {
			w.violate("XR3", "%s: %s keeps %d replica bookmarks (parked %v)", n.name, ds, c, parked[ds])
		}
	}
}

// arrivalKey names snapshot guid's arrival on n in replica ds (or the
// whole copy beside it once its swap began, which becomes it:
// ReplicaBeside; not before: an unverified copy beside may be discarded
// and the same snapshot pulled again, seed 9740356). Per replica,
// not per node: the holder sends a snapshot it took for another pull
// again (model.DecideReplicaSend), and a node may hold the same guid in
// another allocation's replica long before this one's receive brings it
// (seed 9730078: 0003's @replica-1, pulled for 0003's replica at +36s,
// sent again at +67s as the first snapshot of its successor 0004's on
// the same slot).
func arrivalKey(n *xnode, ds, guid string) string {
	return n.id + "/" + strings.TrimSuffix(ds, ".whole") + "@" + guid
}

// checkAge is XR6, the RPO, right after the replica loops of the nodes
// pulled took their turns:
// while an allocation runs on its holder, both plugins run, the network
// is whole and no fault came (nor lasted: a stream stalled before the
// settle goes on pausing after it) for longer than `every` plus one transfer,
// each node chosen for its replica (for that long) holds one whose newest
// snapshot the holder took no longer ago than `every` and the time that
// snapshot's own transfer took (from when the holder took it to when it
// was first seen here: a stream cut before the calm began, resumed since,
// brings an older snapshot), give or take a round.
func (w *XWorld) checkAge(pulled []*xnode) {
	if w.stalling > 0 {
		return // a stall in progress is a fault: the calm begins when it ends (seed 9500005)
	}
	every := w.cfg.Class("pg").Replicate.Every
	bound := every + xReplicaTransfer
	seen := map[string]bool{}
	for _, h := range w.nodes {
		if h.p == nil || !h.connected {
			continue
		}
		for _, a := range h.sortedLocal() {
			sa := w.cluster.Alloc(a.id)
			// A stopping allocation's replicas are kept as they are, not
			// pulled (model.DecideReplica; seed 9720795).
			if a.phase != running || sa == nil || sa.ClientStatus != structs.AllocClientStatusRunning || a.slot == "" ||
				sa.DesiredStatus != structs.AllocDesiredStatusRun {
				continue
			}
			stubs, _ := xnomad{h}.Nodes(context.Background())
			chosen, _ := h.p.mgr.ReplicaNodes(transfer.Alloc{ID: sa.ID, NodeID: sa.NodeID, Namespace: sa.Namespace,
				JobID: sa.JobID, TaskGroup: sa.TaskGroup}, a.slot, stubs)
			for _, id := range chosen {
				key := id + "/" + a.id
				seen[key] = true
				since, ok := w.rx.chosen[key]
				if !ok {
					since = w.now
					w.rx.chosen[key] = since
				}
				r := w.node(id)
				if r == nil || r.p == nil || !r.connected || !r.metHostile.Before(r.launched) || !slices.Contains(pulled, r) {
					continue
				}
				from := latest(since, w.rx.calmSince, w.hostileTill, h.fullTill, r.fullTill, w.data[a.id].startedAt, h.launched, r.launched)
				if w.now.Sub(from) <= bound {
					continue
				}
				w.checkNewest(r, a, every)
			}
		}
	}
	for k := range w.rx.chosen {
		if !seen[k] {
			delete(w.rx.chosen, k)
		}
	}
}

func (w *XWorld) checkNewest(r *xnode, a *xalloc, every time.Duration) {
	rows, _, err := r.replicaRows()
	if err != nil {
		w.violate("harness", "zfs list on %s: %v", r.name, err)
		return
	}
	name := w.cfg.ReplicaName("pg", a.id, a.slot)
	if slices.ContainsFunc(rows, func(d zfs.Dataset) bool {
		return strings.HasPrefix(d.Name, name+"/") || strings.HasPrefix(d.Name, name+".whole/")
	}) {
		// A hostile stream brought a dataset below it (or below the copy
		// beside it, where a first snapshot comes): refused, left for the
		// operator (XR4), and pulled no more (seed 9720780).
		return
	}
	var newest, arrived time.Time
	swapping := swapBegun(rows, name)
	for _, d := range rows {
		if d.IsSnapshot() && (strings.HasPrefix(d.Name, name+"@") || swapping && strings.HasPrefix(d.Name, name+".whole@")) {
			if at, ok := w.snapAt[d.GUID]; ok && at.After(newest) {
				newest, arrived = at, w.rx.arrived[arrivalKey(r, name, d.GUID)]
			}
		}
	}
	transfer := max(arrived.Sub(newest), 0)
	switch {
	case newest.IsZero():
		w.violate("XR6", "%s holds no replica of %s, running on its holder for over %s with the network whole", r.name, a.short(),
			every+xReplicaTransfer)
	case w.now.Sub(newest) > every+transfer+xReplicaTransfer:
		w.violate("XR6", "%s's newest replica of %s is %s old, more than `every` (%s) and its transfer (%s)", r.name, a.short(),
			w.now.Sub(newest).Round(time.Second), every, transfer.Round(time.Second))
	}
}

// checkReplicasQuiescent is XR4: once both nodes have settled, a replica
// is kept only of an allocation that runs, or that Nomad still knows as
// unknown (kept as it is; a lost one's is kept sticky_wait), or that a hostile stream brought a
// dataset below (refused: left for the operator, as a migration's copy,
// forOperator; below the copy beside it, for a first snapshot), and no
// whole copy waits beside one but such a refused one (a copy beside no
// replica is a first receive, judged as the replica);
// what the quiescent X4 allows of replicas (replicaKept) is only that.
func (w *XWorld) checkReplicasQuiescent() {
	if !w.replicas {
		return
	}
	for _, n := range w.nodes {
		rows, reps, err := n.replicaRows()
		if err != nil {
			w.violate("harness", "zfs list on %s: %v", n.name, err)
			return
		}
		for _, r := range reps {
			below := slices.ContainsFunc(rows, func(d zfs.Dataset) bool {
				return strings.HasPrefix(d.Name, r.Dataset+"/") || strings.HasPrefix(d.Name, r.Dataset+".whole/")
			})
			if !below && !w.replicaKept(r.Source) {
				sa := w.cluster.Alloc(r.Source)
				st := "unknown to Nomad"
				if sa != nil {
					st = sa.ClientStatus + ", desired " + sa.DesiredStatus
				}
				w.violate("XR4", "%s: replica %s of %s (%s) is still there at quiescence", n.name, r.Dataset, shortID(r.Source), st)
			}
		}
		for _, d := range rows {
			// Without its replica, a copy beside is the replica's first
			// receive, judged as the replica above (model.ReplicasIn).
			replica := strings.TrimSuffix(d.Name, ".whole")
			if strings.HasSuffix(d.Name, ".whole") && slices.ContainsFunc(rows, func(b zfs.Dataset) bool { return b.Name == replica }) &&
				!slices.ContainsFunc(rows, func(b zfs.Dataset) bool { return strings.HasPrefix(b.Name, d.Name+"/") }) {
				w.violate("XR4", "%s: a whole copy %s still waits beside its replica at quiescence", n.name, d.Name)
			}
		}
	}
}

// replicaKept reports whether a replica of source may stay for good.
func (w *XWorld) replicaKept(source string) bool {
	sa := w.cluster.Alloc(source)
	return sa != nil && (sa.ClientStatus == structs.AllocClientStatusRunning || sa.ClientStatus == structs.AllocClientStatusPending ||
		sa.ClientStatus == structs.AllocClientStatusUnknown)
}

// latest is the latest of ts.
func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}
