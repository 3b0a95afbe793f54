package model

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The takeover in B's Reserve (issue 30, docs/node-loss.md): B replaces A,
// which ran on another node that Nomad now says is lost. DecideInherit asks
// decideTakeover once no copy from A's node is here:
//
//	A lost, DecideTakeover: claim ─this node holds A's newest replica─▶ PlanTakeReplica: the replica becomes A's parked data ─▶ the claim of parked data (PlanClaim)
//	                         ─a newer replica is on another node─▶ wait (its pull is not built), then on_timeout
//	                         ─no replica anywhere─▶ wait for a copy, then on_timeout
//	A lost, not yet stopped by its node (DecideTakeover: wait) ─▶ wait, then on_timeout
//	A unknown, or lost with nothing that stops it (never) ─▶ wait for a copy, then on_timeout
//
// Never two writers: a replica is claimed only once DecideTakeover says A
// has stopped by Nomad's own rules; the newest there is, so that no
// increment a replica node holds is lost.

// TakeoverInput is what B's Reserve read for a takeover: what the servers
// say of A's loss, the replicas of A's slot it knows of, and its clock.
type TakeoverInput struct {
	Loss LostAlloc
	// Copies are the replicas of A's slot: this node's (read just now)
	// and, when known, other nodes'.
	Copies []ReplicaCopy
	Now    time.Time
	// Unsure says why this node cannot tell its replica is the newest there
	// is ("" when it can: the class keeps one copy and this node is the
	// one chosen for it): no request asks another replica node what it
	// holds, and a second copy, or the copy a node chosen before this one
	// still keeps, may be newer (sim seed 9711147, XR7). A local replica is
	// then not claimed (but a takeover a crash interrupted is finished).
	Unsure string
}

// ReplicaCopy is one replica of the predecessor's slot, on Node; Local
// when on this node. Snapshots are its @replica-<n> snapshots (full
// names; a local one's, which the takeover drops).
type ReplicaCopy struct {
	Node      string
	Local     bool
	Replica   Replica
	Snapshots []string
}

// claiming reports whether a takeover began on local replica c: its mark
// names the parked data it becomes (PlanTakeReplica). A crash may have
// dropped its snapshots since: it is the one to finish, whatever its
// newest snapshot now says.
func (c ReplicaCopy) claiming() bool {
	return c.Local && c.Replica.Info.User.Get(PropRetainAs) != ""
}

// NewestCopy picks the copy to take over from: one a takeover already
// began on (a crash interrupted it), else the newest (the highest
// @replica-<n>: the holder numbers them in order, and every copy of one
// slot is of the same lineage; on a tie, the newer snapshot time, then
// this node's own). A copy with no snapshot yet (a first receive not
// finished) holds nothing to claim. ok is false when there is none.
func NewestCopy(copies []ReplicaCopy) (ReplicaCopy, bool) {
	var best ReplicaCopy
	found := false
	for _, c := range copies {
		if c.claiming() {
			return c, true
		}
		if c.Replica.Newest == 0 {
			continue
		}
		if !found || newerCopy(c, best) > 0 {
			best, found = c, true
		}
	}
	return best, found
}

// newerCopy orders two copies as NewestCopy prefers them.
func newerCopy(a, b ReplicaCopy) int {
	if n := cmp.Compare(a.Replica.Newest, b.Replica.Newest); n != 0 {
		return n
	}
	if n := a.Replica.NewestAt.Compare(b.Replica.NewestAt); n != 0 {
		return n
	}
	switch {
	case a.Local && !b.Local:
		return 1
	case b.Local && !a.Local:
		return -1
	}
	return 0
}

// lostOrUnknown reports whether the servers say the predecessor is lost
// or unknown: a takeover is decided only then (a running or ended one's
// data comes from its node, as any migration's).
func (tk *TakeoverInput) lostOrUnknown() bool {
	return tk != nil && (tk.Loss.ClientStatus == ClientLost || tk.Loss.ClientStatus == ClientUnknown)
}

// decideTakeover decides the Reserve of in.Slot by in.Caller, the
// replacement of in.Prev on another node, in a class that keeps replicas,
// when no copy from Prev's node is here (DecideInherit).
func (in InheritInput) decideTakeover() InheritDecision {
	tk := in.Takeover
	t := DecideTakeover(tk.Loss, tk.Now)
	switch t.Verdict {
	case TakeoverNever:
		return in.waitForCopy(fmt.Sprintf("no replica of %s is claimed: %s", short(in.Prev.ID), t.Why))
	case TakeoverWait:
		return in.waitForCopy(t.Why)
	}
	c, ok := NewestCopy(tk.Copies)
	switch {
	case !ok:
		return in.waitForCopy(fmt.Sprintf("%s; no node holds a replica of its data", t.Why))
	case !c.Local:
		return in.waitForCopy(fmt.Sprintf("%s; the newest replica of its data (@%s) is on node %s, and a replica is not pulled "+
			"from another replica node yet", t.Why, ReplicaSnapshot(c.Replica.Newest), short(c.Node)))
	case tk.Unsure != "" && !c.claiming():
		return in.waitForCopy(fmt.Sprintf("%s; this node's replica %s is not claimed: %s", t.Why, c.Replica.Dataset, tk.Unsure))
	}
	plan := PlanTakeReplica(in.Class, in.Prev, c, tk.Now)
	return InheritDecision{Kind: InheritTakeover, Plan: &plan, Reason: fmt.Sprintf("%s; taking over its newest replica %s",
		t.Why, c.Replica.Dataset)}
}

// PlanTakeReplica turns local replica c of prev's slot into prev's parked
// data (ParkedName), which the Reserve then claims as any parked data
// (PlanClaim): the mark naming the parked data, canmount=on (the claim
// mounts it; `zfs inherit canmount` is refused) and the outcome of a copy
// from another node (the claim mounts it, a release destroys it) on the
// replica first; its @replica-<n> snapshots dropped (received, without
// their own mark, they would be a stranger's below the slot); the rename;
// the parked data's own marks.
//
// Each step is done again after a crash: the marked replica is still
// listed as a replica and taken over first (ReplicaCopy.claiming), even
// with its snapshots gone; renamed, it is parked data a crash left with
// its state not rewritten (renamedAside), which the claim and the pass
// both finish (PlanParked: ParkedFinish).
func PlanTakeReplica(c Class, prev Alloc, r ReplicaCopy, now time.Time) Plan {
	parked := replicaParkedName(r.Replica.Dataset, prev.ID, r.Replica.Slot)
	mark := ParkAsProps(parked)
	maps.Copy(mark, map[string]string{PropOutcome: OutcomeMigrated, "canmount": "on"})
	var snaps []string
	for _, s := range r.Snapshots {
		if _, short, _ := strings.Cut(s, "@"); strings.HasPrefix(s, r.Replica.Dataset+"@") {
			if _, ok := ReplicaNumber(short); ok {
				snaps = append(snaps, s)
			}
		}
	}
	slices.Sort(snaps)
	rename := renameOp(r.Replica.Dataset, parked)
	rename.Done, rename.Replan, rename.Check = []error{zfs.ErrNotExist}, []error{zfs.ErrExists}, parked
	var ops []Op
	if r.Replica.Info.ResumeToken != "" {
		// A pull cut mid-stream left its partial receive: abandoned
		// first, or the slot it becomes carries it (sim seed 9710166, X4).
		ops = append(ops, abortReceiveOp(r.Replica.Dataset))
	}
	ops = append(ops, setGoneOK(r.Replica.Dataset, mark))
	ops = append(ops, dropReceived(snaps)...)
	ops = append(ops, rename, setOp(parked, ParkedProps(parked, now, now.Add(c.StickyWait))))
	return Plan{
		Doing: fmt.Sprintf("taking over replica %s of %s", r.Replica.Dataset, prev.ID),
		Ops:   ops,
		Done: Note{Msg: "took over a replica of a lost allocation's data", KV: []any{"replica", r.Replica.Dataset,
			"alloc_id", prev.ID, "snapshot", ReplicaSnapshot(r.Replica.Newest), "parked", parked}},
	}
}

// replicaParkedName is ParkedName for the replica dataset of holder's
// slot id: beside it, below the same class.
func replicaParkedName(dataset, holder, id string) string {
	return dataset[:strings.LastIndexByte(dataset, '/')+1] + parkedPrefix + holder + "-" + id
}

// target is what the takeover decided on takes over: the replica, and
// the parked data of prev it becomes (the driver takes both locks).
func (tk *TakeoverInput) target(prev string) (replica string, parked *Retained) {
	c, _ := NewestCopy(tk.Copies)
	return c.Replica.Dataset, &Retained{Dataset: replicaParkedName(c.Replica.Dataset, prev, c.Replica.Slot), Holder: prev}
}

// LocalReplica reads this node's replica name of class dataset classDS
// back from one listing of it (rows, `zfs list -r` of name with
// UserProps), with its @replica-<n> snapshots; ok is false when rows hold
// no such replica of the plugin's, or one with a dataset below it (a
// replication stream brought it: the pull refused the copy and left it for
// the operator, CopyNotOneFilesystem; taken over, it would be parked data
// with a stranger below).
func LocalReplica(classDS, name string, rows []zfs.Dataset) (ReplicaCopy, bool) {
	if slices.ContainsFunc(rows, func(d zfs.Dataset) bool { return strings.HasPrefix(d.Name, name+"/") }) {
		return ReplicaCopy{}, false
	}
	for _, r := range ReplicasIn(classDS, rows) {
		if r.Dataset != name {
			continue
		}
		c := ReplicaCopy{Local: true, Replica: r}
		for _, row := range rows {
			if ds, short, ok := strings.Cut(row.Name, "@"); ok && ds == name {
				if _, replica := ReplicaNumber(short); replica {
					c.Snapshots = append(c.Snapshots, row.Name)
				}
			}
		}
		return c, true
	}
	return ReplicaCopy{}, false
}
