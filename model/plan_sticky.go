package model

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Plans of sticky data (sticky.go has the rules): a release parks the data
// of a replaced holder, a Reserve by the replacement claims it, a pass
// finishes what a crash left and releases what no replacement will claim.

// planPark renames the releasing slot's data aside for the holder's
// replacement (its replica snapshots and bookmarks dropped first,
// dropReplicaBases: a replacement's replicas start from its own holding),
// creates a fresh slot in its place and marks the data parked,
// after p's ops (the releasing mark). The slot is marked with the parked name before the
// rename, so a crash between any two commands resumes: the release again,
// or the pass finishing the renamed data (PlanFinishParked).
//
// The parked name is taken when the holder's data was parked before and
// the holder was then recorded on the fresh slot the park left: it ran
// again there (the servers' state restored from before its replacement).
// Its data in the slot is the newer (sticky data is the holder's last
// life's), so the older parked data goes first, then the park as usual;
// the rename asks to plan again when it finds the name taken unlooked.
func planPark(in ReleaseInput, s Slot, holderIndex uint64, p Plan) (Plan, error) {
	aside := in.Config.ParkedName(s.Class, in.Holder.ID, s.ID)
	p.Doing, p.Policy = fmt.Sprintf("parking %s for the replacement of %s", s.Dataset, in.Holder.ID), string(PolicyPark)
	// p's one op, if any, is the releasing mark (PlanRelease).
	markOnly := len(p.Ops) == 1 && !in.Seen.Taken(aside)
	if in.Seen.Taken(aside) {
		older := ParkedFromRows(aside, in.Seen[aside])
		if older == nil || older.Holder != in.Holder.ID {
			return Plan{}, fmt.Errorf("%s: cannot park %s as %s: it exists and is not %s's parked data", p.Doing, s.Dataset, aside, in.Holder.ID)
		}
		if err := CheckDestroyRetained(in.Config, *older); err != nil {
			return Plan{}, fmt.Errorf("%s: %s holds %s's older parked data, %w", p.Doing, aside, in.Holder.ID, err)
		}
		p.Notes = append(p.Notes, Note{Msg: "destroying older parked data: the allocation ran again on the slot since", Warn: true,
			KV: []any{"slot", s.ID, "alloc_id", in.Holder.ID, "parked", aside}})
		p.Ops = append(append(p.Ops, dropSnapshots(older.OwnSnapshots)...), destroyOp(aside))
	}
	rename := renameOp(s.Dataset, aside)
	rename.Done, rename.Replan, rename.Check = []error{zfs.ErrNotExist}, []error{zfs.ErrExists}, aside
	if markOnly {
		// The releasing mark and the parked name in one zfs set (one
		// process less on the cutover's path, docs/performance.md). A crash
		// after it leaves what the two sets left: a releasing slot marked
		// with the name.
		p.Ops[0].Props = maps.Clone(p.Ops[0].Props)
		maps.Copy(p.Ops[0].Props, ParkAsProps(aside))
	} else {
		p.Ops = append(p.Ops, setGoneOK(s.Dataset, ParkAsProps(aside)))
	}
	// A replica pull's snapshot and bookmarks go before the rename: a
	// renamed snapshot's own mark no longer names it (dropReplicaBases).
	p.Ops = append(append(p.Ops, dropReplicaBases(s)...), rename)
	// The fresh slot before the parked data's own marks, as a retain does
	// it (retainOps).
	p.Ops = append(p.Ops, replaceOps(in.Class, s, holderIndex, in.Now)...)
	p.Ops = append(p.Ops, setOp(aside, ParkedProps(aside, in.Now, in.Now.Add(in.Class.StickyWait))))
	p.Done = Note{Msg: "slot data parked for the allocation's replacement", KV: []any{"slot", s.ID, "alloc_id", in.Holder.ID,
		"next_alloc_id", in.Holder.NextAllocation, "parked", aside}}
	return p, nil
}

// PlanRecord records live allocation a as the holder of slot s: a ready
// one, or in a sticky class one whose ended holder a replaces and inherits
// in place. A slot that is parked data at the slot's name (a claim a crash
// interrupted) is finished as the claim would have.
func PlanRecord(s Slot, a Alloc, now time.Time) Plan {
	props := HeldProps(a.ID, ReleaseIndex(s, a.CreateIndex), now)
	if s.State == StateParked {
		props = ClaimedProps(s.Dataset, a, s.Generation+1, now)
	}
	return Plan{
		Ops:   []Op{setOp(s.Dataset, props)},
		Notes: []Note{{Msg: "slot held", KV: []any{"slot", s.ID, "alloc_id", a.ID, "job_id", a.JobID, "namespace", a.Namespace}}},
	}
}

// PlanClaim hands parked data p to caller as ready slot s: the fresh
// dataset is destroyed (it holds nothing: Reserve found no one's data in
// it), p is marked with the slot's name (unless it carries the mark
// already: a copy its pull marked, PlanReceived) and renamed onto it, and
// recorded held by caller. A rename, whatever the size.
//
// A destroy refused as busy may have unmounted the fresh slot first (seen
// on OpenZFS under load): it is mounted again, so that it stays healthy for
// Reserve's next try instead of failing it. What the parked data still
// carries (retain_as naming the slot, expires, outcome) is left: the slot's
// next release rewrites or clears it (ClearedOnReady), and nothing reads it
// on a held slot.
func PlanClaim(s Slot, caller Alloc, p Retained, now time.Time) Plan {
	destroy := destroyOp(s.Dataset)
	destroy.Recover = []zfs.Command{{Verb: zfs.VerbMount, Name: s.Dataset}}
	ops := dropSnapshots(s.OwnSnapshots)
	if p.Outcome == OutcomeMigrated {
		// A copy from another node: its snapshots were the transfer's, and
		// they go first, while it is still parked. Left on the slot (a
		// crash after the rename), a later migration of this data would
		// take them for its own and send the stale @migrate-final as the
		// final copy.
		snaps := migrationSnapshots(p.OwnSnapshots)
		ops = append(ops, dropReceived(snaps)...)
	}
	ops = append(ops, destroy)
	if !carries(p.Info, ClaimAsProps(p.Dataset, s.Dataset)) {
		// A copy its pull marked for this slot carries them already
		// (PlanReceived).
		ops = append(ops, setOp(p.Dataset, ClaimAsProps(p.Dataset, s.Dataset)))
	}
	ops = append(ops, renameOp(p.Dataset, s.Dataset),
		setOp(s.Dataset, ClaimedProps(s.Dataset, caller, s.Generation+1, now)))
	if p.Outcome == OutcomeMigrated {
		// It was received unmounted: the slot is mounted.
		ops = append(ops, mountOp(s.Dataset))
	}
	return Plan{
		Ops:  ops,
		Done: Note{Msg: "claimed parked data", KV: []any{"slot", s.ID, "alloc_id", caller.ID, "from", p.Dataset}},
	}
}

// carries reports whether d, as read, has every one of props.
func carries(d zfs.Dataset, props map[string]string) bool {
	for k, v := range props {
		if d.User.Get(k) != v {
			return false
		}
	}
	return true
}

// dropReceived destroys a copy's snapshots, received from another node,
// in one zfs destroy without a release first: a receive places no hold,
// and the plugin holds only what it sends (one process less on the
// cutover's path, docs/performance.md). Should one carry the plugin's hold
// all the same, ZFS refuses the destroy as busy, destroying none, and its
// Recover releases the hold for the next try.
func dropReceived(snaps []string) []Op {
	ops := dropSnapshots(snaps)
	var out []Op
	for i := 0; i+1 < len(ops); i += 2 {
		destroy := ops[i+1]
		destroy.Recover = []zfs.Command{ops[i].Command}
		out = append(out, destroy)
	}
	return out
}

// migrationSnapshots are those of snaps that a migration took.
func migrationSnapshots(snaps []string) []string {
	var out []string
	for _, snap := range snaps {
		if _, name, _ := strings.Cut(snap, "@"); migrationSnapshot(name) {
			out = append(out, snap)
		}
	}
	return out
}

// PlanFinishParked completes parked data a crash left between its rename
// and the rewrite of its own marks (still in the slot's state, recognised
// by PropRetainAs and its name): parked, waiting sticky_wait from now.
func PlanFinishParked(c Class, p Retained, now time.Time) Plan {
	return Plan{
		Ops:  []Op{setOp(p.Dataset, ParkedProps(p.Dataset, now, now.Add(c.StickyWait)))},
		Done: Note{Msg: "finished parked data after a crash", KV: []any{"dataset", p.Dataset}},
	}
}

// PlanReleaseParked gives parked data p that no replacement will claim
// (PlanParked said why) back by the class's policy for its holder's
// outcome: the snapshot policy keeps it as retained data, the others
// destroy it. Nothing is planned for data with anything foreign below it.
func PlanReleaseParked(cfg *Config, c Class, p Retained, why string, now time.Time) (Plan, error) {
	if err := CheckDestroyRetained(cfg, p); err != nil {
		return Plan{}, err
	}
	policy := c.Release.PolicyFor(p.Outcome)
	if c.KeepsLost(p.Outcome) && !p.Migrated() {
		// The replacement's node confirmed no final copy: this may be
		// the only copy of the lost holder's last writes.
		policy = PolicySnapshot
	}
	if p.Outcome == OutcomeMigrated {
		// A copy of another node's data: the class's policy applies to
		// the original, there. The copy (maybe a partial receive) goes.
		policy = PolicyDestroy
	}
	plan := Plan{Notes: []Note{{Msg: "releasing parked data", KV: []any{"dataset", p.Dataset, "alloc_id", p.Holder, "policy", policy, "why", why}}}}
	if policy == PolicySnapshot {
		plan.Ops = retainParkedOps(c, p, now)
		return plan, nil
	}
	// The decision first, on the data itself: what it was made from may
	// go with the snapshots (@migrated, the mark that the replacement's
	// node holds the final copy), and a destroy refused after them (a
	// busy dataset, seen on real agents right after the last send) must
	// be retried by the next pass, not forgotten until sticky_wait ends.
	plan.Ops = append(plan.Ops, setOp(p.Dataset, map[string]string{PropExpires: unix(now.Add(-time.Second))}))
	if p.Outcome == OutcomeMigrated {
		plan.Ops = append(plan.Ops, abortReceiveOp(p.Dataset))
	}
	plan.Ops = append(append(plan.Ops, dropSnapshots(p.OwnSnapshots)...), destroyOp(p.Dataset))
	return plan, nil
}

// PlanRetainParked keeps parked data p aside as retained data whatever
// the class's policy (PlanParked's ParkedRetain: it may hold writes its
// replacement has not), for the class's retain and under its retain_max,
// as any retained data: the operator reads it (`status`), and `purge` or
// the retention ends it. Nothing is planned for data with anything
// foreign below it.
func PlanRetainParked(cfg *Config, c Class, p Retained, why string, now time.Time) (Plan, error) {
	if err := CheckDestroyRetained(cfg, p); err != nil {
		return Plan{}, err
	}
	return Plan{Ops: retainParkedOps(c, p, now), Notes: []Note{{Msg: "keeping parked data aside: its replacement started without it",
		KV: []any{"dataset", p.Dataset, "alloc_id", p.Holder, "policy", PolicySnapshot, "why", why}, Warn: true}}}, nil
}

// retainParkedOps make parked data p retained data: its own snapshot
// held, its marks those of retained data expiring after the class's
// retain.
func retainParkedOps(c Class, p Retained, now time.Time) []Op {
	snap := p.Dataset + "@" + RetainedSnapshot
	ops := []Op{snapshotOp(snap), holdOp(snap), setOp(p.Dataset, RetainedParkedProps(p.Dataset, now, now.Add(c.Release.Retain)))}
	// A migration's snapshots (the sender leaves them to the policy,
	// DecideSend) are not kept with retained data: they would pin what
	// the data no longer has for the whole retention. After the mark:
	// until then @migrated is what the release is decided from. A crash
	// between the two leaves them to the prune.
	return append(ops, dropSnapshots(migrationSnapshots(p.OwnSnapshots))...)
}
