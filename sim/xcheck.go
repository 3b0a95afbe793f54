package sim

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/nomad/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The cross-node invariants (docs/lifecycle.md, X1-X5 and X7), from
// data: each task writes token files into the slot its Reserve gave it,
// and the world keeps what each found, wrote and left; X7 reads the
// parked data's own marks around each pass. X8-X10 are in xclaim.go.

// checkStart is X1 when a task starts: its slot holds exactly what its
// predecessor's held when its task ended (its final data), whole, or
// nothing when the plugin gave up by its policy: on_timeout =
// "start_empty" after migrate.timeout, sticky_wait passed, Nomad no
// longer knows the predecessor, or a replacement in between ended
// without starting (its data then goes by the policy). Never a part of
// it, never anything else. A predecessor that never started passes on
// what it inherited in place, so the data is that of the nearest one in
// the chain that ran.
func (w *XWorld) checkStart(n *xnode, a *xalloc, waited time.Duration) {
	got := w.data[a.id].inherited
	var prev *xdata
	broken, gone := false, w.cluster.Alloc(a.prev) == nil
	for p, hops := a.prev, 0; p != "" && hops < 64; hops++ {
		d := w.data[p]
		if d != nil && d.started {
			prev = d
			break
		}
		broken = true
		switch {
		case d != nil:
			p = d.prev
		case w.cluster.Alloc(p) != nil:
			p = w.cluster.Alloc(p).PreviousAllocation
		default:
			p = ""
		}
	}
	var want []string
	if prev != nil {
		want = prev.final
	}
	gotS, wantS := strings.Join(got, ","), strings.Join(want, ",")
	if len(got) > 0 && w.tookOver(n, got) {
		w.logf("  %s started with a replica taken over (XR7 checked it)", a.short())
		return
	}
	if len(got) > 0 && a.prev == "" && w.handedOverUnlinked(n, a, got) {
		return
	}
	switch {
	case len(got) > 0 && gotS == wantS && prev.ended:
		w.counts.HandedOver++
		if prev.node != n.name {
			w.counts.HandedOverRemote++
		}
		return
	case len(got) == 0 && len(want) == 0:
		return
	case len(got) == 0:
		c := w.cfg.Class("pg")
		switch {
		case c.Migrate.OnTimeout == model.MigrateStartEmpty && waited >= c.Migrate.Timeout:
			w.counts.StartedEmpty++
			return
		case prev.ended && w.now.Sub(prev.endedAt) >= c.StickyWait, broken, gone:
			return
		}
		w.violate("X1", "%s on %s started empty after %s, though %s's data (%d tokens) was to come and on_timeout is %q",
			a.short(), n.name, waited, shortID(a.prev), len(want), c.Migrate.OnTimeout)
		return
	}
	missing, extra := diffSets(want, got)
	switch {
	case prev != nil && !prev.ended:
		w.violate("X1", "%s on %s found the data of %s, which has not ended: %v", a.short(), n.name, prev.node, got)
	case len(extra) > 0:
		w.violate("X1", "%s on %s found tokens that are not its predecessor %s's final data: %v", a.short(), n.name, shortID(a.prev), extra)
	default:
		w.violate("X1", "%s on %s found a partial copy of %s's data: %d of %d tokens, missing %v", a.short(), n.name, shortID(a.prev), len(got), len(want), missing)
	}
}

// handedOverUnlinked is X1 for a replacement Nomad placed without naming
// its predecessor (docs/node-loss.md, finding (c)): it may find the final
// data of the allocation it replaces under its name, one the servers
// stopped as lost with its node and whose node ended it since (the
// newest that started, placed before it; its data came from that node,
// not a replica: tookOver is checked first). Anything else in its slot is
// left to checkStart's violation.
func (w *XWorld) handedOverUnlinked(n *xnode, a *xalloc, got []string) bool {
	sb := w.cluster.Alloc(a.id)
	if sb == nil {
		return false
	}
	var cands []*structs.Allocation
	for _, o := range append(slices.Clone(w.nodes), w.lost...) {
		for _, sa := range w.cluster.Allocs(o.id) {
			if sa.ID != sb.ID && sa.Namespace == sb.Namespace && sa.JobID == sb.JobID && sa.TaskGroup == sb.TaskGroup &&
				sa.Name == sb.Name && sa.CreateIndex < sb.CreateIndex && sa.NextAllocation == "" &&
				nomadapi.LostByServers(sa.DesiredDescription) {
				cands = append(cands, sa)
			}
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].CreateIndex > cands[j].CreateIndex })
	for _, sa := range cands {
		d := w.data[sa.ID]
		if d == nil || !d.started {
			continue
		}
		final, have := slices.Clone(d.final), slices.Clone(got)
		sort.Strings(final)
		sort.Strings(have)
		if !d.ended || strings.Join(have, ",") != strings.Join(final, ",") {
			return false
		}
		w.counts.HandedOver++
		w.counts.HandedOverUnlinked++
		if d.node != n.name {
			w.counts.HandedOverRemote++
		}
		w.logf("  %s started with the final data of %s, which Nomad stopped as lost and does not name", a.short(), shortID(sa.ID))
		return true
	}
	return false
}

// diffSets returns what want has and got lacks, and what got has beyond want.
func diffSets(want, got []string) (missing, extra []string) {
	in := func(s []string, x string) bool {
		for _, y := range s {
			if y == x {
				return true
			}
		}
		return false
	}
	for _, x := range want {
		if !in(got, x) {
			missing = append(missing, x)
		}
	}
	for _, x := range got {
		if !in(want, x) {
			extra = append(extra, x)
		}
	}
	return missing, extra
}

// check is what holds after every event: a live task's slot holds what
// it found and wrote, nothing less (X2: not destroyed under it) and
// nothing more (X3: one writer); and data owed to a replacement still
// exists whole on some node (X2).
func (w *XWorld) check() {
	for _, n := range w.nodes {
		for _, a := range n.sortedLocal() {
			if a.phase != running && a.phase != killing {
				continue
			}
			got, want := n.filesAt(a.path), w.data[a.id].content()
			missing, extra := diffSets(want, got)
			if len(missing) > 0 {
				w.violate("X2", "%s on %s is %s and its slot %s lost %v", a.short(), n.name, a.phase, a.slot, missing)
			}
			if len(extra) > 0 {
				w.violate("X3", "%s on %s is %s and its slot %s holds others' tokens %v", a.short(), n.name, a.phase, a.slot, extra)
			}
		}
	}
	w.checkOwed()
	w.checkCopies()
	w.checkReplicas(w.pulled)
	w.checkWriters()
}

// checkOwed is X2: the final data of an ended allocation whose
// replacement has not started yet, is still to run and may still get it
// (sticky_wait has not passed) exists whole: on its node, or as a
// complete copy (a received snapshot holding it) on a node, or as a
// filesystem holding it, mounted or not: a claimed copy drops its
// transfer snapshots while still parked and unmounted, before it is
// renamed onto the slot (model.PlanClaim), and a plugin dying between
// the two leaves the data only in that copy's own files. A partial
// receive's data is not in its target's files (the fake keeps it apart,
// as zfs does), so no partial copy counts.
//
// Data whose node is lost for good, pool and all, before any other node
// held a whole copy of it is owed no more (docs/node-loss.md: what a
// replica cannot do): its allocation ended on that node, so it was never
// replicated as it ended. Once another node held such a copy, that copy
// is owed as before (copied).
func (w *XWorld) checkOwed() {
	if w.copied == nil {
		w.copied = map[string]bool{}
	}
	listed := make([][]zfs.Dataset, len(w.nodes))
	for id, d := range w.data {
		if !d.ended || len(d.final) == 0 || w.now.Sub(d.endedAt) >= w.cfg.Class("pg").StickyWait {
			continue
		}
		sa := w.cluster.Alloc(id)
		if sa == nil || sa.NextAllocation == "" {
			continue
		}
		next := w.cluster.Alloc(sa.NextAllocation)
		if next == nil || next.DesiredStatus != structs.AllocDesiredStatusRun || next.ClientTerminalStatus() {
			continue
		}
		if nd := w.data[next.ID]; nd != nil && nd.started {
			continue
		}
		want := strings.Join(d.final, ",")
		found := false
		for i, n := range w.nodes {
			if listed[i] == nil {
				sets, err := zfs.NewClient(n.fake).List(context.Background(), parent, nil)
				if err != nil {
					w.violate("harness", "zfs list on %s: %v", n.name, err)
					return
				}
				listed[i] = sets
			}
			for _, s := range listed[i] {
				if strings.Contains(s.Name, "@") && w.snapContent[s.GUID] == want ||
					!strings.Contains(s.Name, "@") && strings.Join(n.filesAt(n.fake.DataDir(s.Name)), ",") == want {
					found = true
					w.copied[id] = w.copied[id] || n.name != d.node
				}
			}
		}
		if !found && !w.copied[id] && slices.ContainsFunc(w.lost, func(n *xnode) bool { return n.name == d.node }) {
			continue // gone with its node before any copy: owed no more
		}
		if !found {
			w.violate("X2", "%s's final data (%d tokens, on %s) is gone from every node while its replacement %s waits for it",
				shortID(id), len(d.final), d.node, shortID(next.ID))
		}
	}
}

// settle ends the faults (a process holding parked data, XBusy, leaves in
// its own time) and lets both nodes run until nothing changes and
// sticky_wait has passed; then X4 (nothing left behind on either node)
// and X5 (every migration ended) are checked.
func (w *XWorld) settle() {
	w.logf("--- settle: faults end ---")
	w.link = xfaults{}
	for _, n := range w.nodes {
		if n.p != nil {
			n.p.run.budget = -1
		}
		if n.fullTill != (time.Time{}) {
			n.unfill()
		}
	}
	for _, n := range w.nodes {
		w.nodeUp(n)
	}
	w.reap()
	w.rx.calmSince, w.pulled = w.now, w.nodes
	end := w.now
	changed, last := w.now, ""
	for round := 0; !w.broken; round++ {
		// Five seconds a round while things move; half a minute once
		// nothing has for a minute (expiries are minutes away).
		step := 5 * time.Second
		if w.now.Sub(changed) > time.Minute {
			step = 30 * time.Second
		}
		w.advance(step)
		for _, n := range w.nodes {
			for range 20 {
				ms := n.moves()
				if len(ms) == 0 {
					break
				}
				ms[0].fn()
			}
			n.pass(round%3 == 0)
		}
		w.runPulls()
		w.reap()
		w.noteModified()
		w.noteLosses()
		w.followUps()
		w.check()
		if len(w.violations) > 0 {
			return
		}
		if d := w.digest(); d != last {
			changed, last = w.now, d
		}
		// Quiet for longer than anything set at the last change takes
		// to expire (sticky_wait, the retention).
		if c := w.cfg.Class("pg"); w.now.Sub(changed) > c.StickyWait+c.Release.Retain+time.Minute {
			break
		}
		if w.now.Sub(end) > 2*time.Hour {
			w.violate("X5", "both nodes still change two hours after the faults ended")
			return
		}
	}
	w.checkQuiescent()
	w.checkReplicasQuiescent()
}

// digest is what settles: both nodes' datasets, the clients' moves, the
// pulls.
func (w *XWorld) digest() string {
	var b strings.Builder
	for _, n := range w.nodes {
		sets, _ := zfs.NewClient(n.fake).List(context.Background(), parent, model.UserProps)
		for _, s := range sets {
			if _, short, ok := strings.Cut(strings.Replace(s.Name, "#", "@", 1), "@"); ok {
				if _, rep := model.ReplicaNumber(short); rep {
					continue // a replica's increments go on while its allocation runs
				}
			}
			fmt.Fprintf(&b, "%s:%s:%s ", s.Name, s.User.Get(model.PropState), s.User.Get(model.PropHolder))
		}
		fmt.Fprintf(&b, "| moves %d pulls %d |", len(n.moves()), n.livePulls())
	}
	return b.String()
}

// checkQuiescent is X4 and X5: on either node, nothing below the parent
// but the class and its slots, each ready or held by an allocation that
// runs there; no snapshot (a pre-copy's, a copy's), no partial receive,
// no copy, but one the plugin refused for what a hostile sender's stream
// brought below it, which it leaves for the operator (forOperator); no
// pull still running, no replacement still waiting.
func (w *XWorld) checkQuiescent() {
	for _, n := range w.nodes {
		z := zfs.NewClient(n.fake)
		sets, err := z.List(context.Background(), parent, model.UserProps)
		if err != nil {
			w.violate("harness", "zfs list on %s: %v", n.name, err)
			return
		}
		for _, s := range sets {
			switch {
			case s.Name == parent || s.Name == parent+"/pg":
			case n.forOperator(sets, s.Name):
			case w.replicas && n.replicaBase(s.Name): // XR3, XR4
			case strings.Contains(s.Name, "@"):
				w.violate("X4", "%s: snapshot %s left behind", n.name, s.Name)
			case s.Name == parent+"/pg/pg-1" || s.Name == parent+"/pg/pg-2":
				st, holder := model.State(s.User.Get(model.PropState)), s.User.Get(model.PropHolder)
				a := n.local[holder]
				if st != model.StateReady && !(st == model.StateHeld && a != nil && a.phase == running) {
					w.violate("X4", "%s: slot %s is %s for %s at quiescence", n.name, s.Name, st, shortID(holder))
				}
			default:
				w.violate("X4", "%s: %s (%s, holder %s) left behind", n.name, s.Name, s.User.Get(model.PropState), shortID(s.User.Get(model.PropHolder)))
			}
		}
		toks, err := z.ResumeTokens(context.Background(), parent)
		for _, t := range toks {
			if err == nil && t.Token != "" && !(w.replicas && n.replicaBase(t.Dataset)) { // XR4 judges a replica's
				w.violate("X4", "%s: a partial receive into %s left behind", n.name, t.Dataset)
			}
		}
		if c := n.livePulls(); c > 0 {
			w.violate("X5", "%s: %d pulls still running at quiescence", n.name, c)
		}
		var waiting []string
		for _, a := range n.sortedLocal() {
			if a.phase == pulled {
				waiting = append(waiting, a.short())
			}
		}
		sort.Strings(waiting)
		if len(waiting) > 0 {
			w.violate("X5", "%s: %v still not started at quiescence", n.name, waiting)
		}
	}
}

// replicaBase reports whether name is a replica (or below one), which
// XR4 judges at quiescence, or a replica snapshot or bookmark of a slot
// held by an allocation that runs on n, which XR3 bounds.
func (n *xnode) replicaBase(name string) bool {
	ds, short, _ := strings.Cut(name, "@")
	if ds == name {
		ds, short, _ = strings.Cut(name, "#")
	}
	if rest, ok := strings.CutPrefix(ds, n.w.cfg.ClassDataset("pg")+"/"); ok && strings.HasPrefix(rest, "replica-") {
		return true // a dataset a hostile stream brought below one too: the operator's, as forOperator's
	}
	if _, ok := model.ReplicaNumber(short); !ok {
		return false
	}
	for _, a := range n.local {
		if a.phase == running && n.w.cfg.SlotDataset("pg", a.slot) == ds {
			return true
		}
	}
	return false
}

// noteCopied is X7's record: the parked data on n whose @migrated is there
// now (its replacement's node named the final snapshot, model.PlanMigrated)
// joins n.copied. It returns all of n.copied, sorted: what the pass about
// to run must release. The record outlives the mark: a release drops
// @migrated before its destroy, which a fault may then refuse.
func (w *XWorld) noteCopied(n *xnode) []string {
	sets, err := zfs.NewClient(n.fake).List(context.Background(), parent, []string{model.PropState})
	if err != nil {
		w.violate("harness", "zfs list on %s: %v", n.name, err)
		return nil
	}
	for _, s := range sets {
		if ds, ok := strings.CutSuffix(s.Name, "@"+model.Migrated); ok && parkedIn(sets, ds) {
			n.copied[ds] = true
		}
	}
	out := make([]string, 0, len(n.copied))
	for ds := range n.copied {
		out = append(out, ds)
	}
	sort.Strings(out)
	return out
}

// parkedIn reports whether dataset ds is in sets, parked.
func parkedIn(sets []zfs.Dataset, ds string) bool {
	for _, s := range sets {
		if s.Name == ds {
			return model.State(s.User.Get(model.PropState)) == model.StateParked
		}
	}
	return false
}

// checkReleased is X7 after a whole pass on n: parked data recorded as
// copied whole before it began (copied) is given to the class's policy by
// that pass (destroyed, or retained), unless the pass met a fault (clean
// is false: a zfs command failed, the plugin died, the node could not
// reach the servers). Then the next pass that meets none releases it: a
// release a busy destroy interrupted is retried at once, not kept until
// sticky_wait (model.PlanReleaseParked records the decision first).
func (w *XWorld) checkReleased(n *xnode, copied []string, clean bool) {
	if len(copied) == 0 {
		return
	}
	sets, err := zfs.NewClient(n.fake).List(context.Background(), parent, []string{model.PropState})
	if err != nil {
		w.violate("harness", "zfs list on %s: %v", n.name, err)
		return
	}
	for _, ds := range copied {
		switch {
		case !parkedIn(sets, ds):
			delete(n.copied, ds)
		case clean:
			w.violate("X7", "%s: %s was copied whole to its replacement's node (@migrated) and is still parked after a pass that met no fault: its release is not retried until sticky_wait",
				n.name, ds)
		}
	}
}

// forOperator reports whether name, as listed on n (sets), is what the
// plugin leaves for the operator: a copy a hostile sender's replication
// stream brought a dataset below (XHostile), still receiving (never made
// claimable), with what is below it and its snapshots
// (model.CopyNotOneFilesystem: the plugin never destroys what is not its
// own).
func (n *xnode) forOperator(sets []zfs.Dataset, name string) bool {
	for _, s := range sets {
		c := s.Name
		if n.replicated[c] && (name == c || strings.HasPrefix(name, c+"/") || strings.HasPrefix(name, c+"@")) {
			below := slices.ContainsFunc(sets, func(b zfs.Dataset) bool { return strings.HasPrefix(b.Name, c+"/") })
			return below && model.State(s.User.Get(model.PropState)) == model.StateReceiving
		}
	}
	return false
}
