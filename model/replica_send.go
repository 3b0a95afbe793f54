package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// What the holder's node sends for one replica pull (issue 30): the
// increment from the replica's newest snapshot to a newer one, from the
// bookmark the holder kept of it, so that the holder keeps no snapshot's
// blocks for a replica once it has them.
//
// On the holder's slot, at any time: at most the newest @replica-<n> (the
// one a stream may be sending or resuming; taken under the plugin's hold
// and bookmarked at once as #replica-<n>) and the newest bookmarks
// (ReplicaBookmarksKept). A pull whose base is the newest snapshot gets a
// new one, and the old one goes: its bookmark is the next base. A pull
// from an older base (another replica node that is behind) gets the
// newest snapshot there is, from its bookmark; no snapshot is taken for
// it. A base the holder has no bookmark or snapshot of (behind by more
// than it keeps, or another lineage) gets a whole stream.

// ReplicaBookmarksKept is how many of the newest #replica-<n> bookmarks a
// holder keeps: a replica node behind by more starts over with a whole
// stream. A bookmark holds no blocks, only a snapshot's guid and txg.
const ReplicaBookmarksKept = 16

// ReplicaSendInput is what a replica's send is decided from, on the
// holder's node.
type ReplicaSendInput struct {
	// Dataset is the held slot; Rows one `zfs list -r -t filesystem,
	// snapshot` of it, Bookmarks one `zfs list -t bookmark` of it.
	Dataset   string
	Rows      []zfs.Dataset
	Bookmarks []zfs.Bookmark
	// HaveGUID is the guid of the replica's newest snapshot, 0 for none;
	// Token, when set, what its interrupted receive was taking, as the
	// holder's zfs decodes it.
	HaveGUID uint64
	Token    *Resume
}

// ReplicaSend is the decision: the stream (Snapshot, incrementally from
// From, a bookmark or a snapshot of Dataset, "" for a whole stream), a
// snapshot to take first (Take, then bookmarked as TakeBookmark; a
// TakeBookmark alone bookmarks Snapshot), and what
// goes once the stream is decided: snapshots (DropSnapshots, each after
// the plugin's hold) and bookmarks (DropBookmarks).
type ReplicaSend struct {
	Take, TakeBookmark string
	Snapshot, From     string
	FromGUID           uint64
	// Resume: the receiver's interrupted stream is resumed (its token
	// names Snapshot from From).
	Resume bool
	// StartOver: the receiver has a base the holder no longer knows (it
	// is behind by more than ReplicaBookmarksKept, or holds another
	// lineage): a whole stream, which it receives beside its replica.
	StartOver     bool
	DropSnapshots []string
	DropBookmarks []string
}

// replicaMark is one of a slot's @replica-<n> snapshots or #replica-<n>
// bookmarks.
type replicaMark struct {
	n    int
	name string
	guid uint64
}

// DecideReplicaSend decides the stream for one replica pull of
// in.Dataset (see the comment above for the rules).
func DecideReplicaSend(in ReplicaSendInput) (ReplicaSend, error) {
	var snaps, marks []replicaMark
	// taken is the highest replica number any snapshot of the slot has,
	// the plugin's or not: the next one taken is above it, never on a
	// stranger's name (the snapshot's Done on "exists" would then hold,
	// bookmark and send the stranger's).
	taken := 0
	for i := range in.Rows {
		r := &in.Rows[i]
		ds, short, ok := strings.Cut(r.Name, "@")
		n, replica := ReplicaNumber(short)
		if !ok || ds != in.Dataset || !replica {
			continue
		}
		taken = max(taken, n)
		if !ownSnapshot(r) {
			continue // a stranger's @replica-<n>: no base, never sent
		}
		g, err := strconv.ParseUint(r.GUID, 10, 64)
		if err != nil {
			return ReplicaSend{}, fmt.Errorf("snapshot %s: guid %q: %w", r.Name, r.GUID, err)
		}
		snaps = append(snaps, replicaMark{n, r.Name, g})
	}
	for _, b := range in.Bookmarks {
		ds, short, ok := strings.Cut(b.Name, "#")
		if n, own := ReplicaNumber(short); ok && ds == in.Dataset && own {
			marks = append(marks, replicaMark{n, b.Name, b.GUID})
		}
	}
	newestSnap, newest := replicaMark{}, 0
	for _, s := range snaps {
		if s.n > newestSnap.n {
			newestSnap = s
		}
	}
	for _, m := range slices.Concat(snaps, marks) {
		newest = max(newest, m.n)
	}
	newest = max(newest, taken)
	var out ReplicaSend
	// The base: the receiver's newest, from its bookmark when there is one
	// (it outlives the snapshot), else the snapshot itself.
	base := replicaMark{}
	if in.HaveGUID != 0 {
		for _, m := range slices.Concat(marks, snaps) {
			if m.guid == in.HaveGUID {
				base = m
				break
			}
		}
	}
	if base.n > 0 {
		out.From, out.FromGUID = base.name, base.guid
	}
	out.StartOver = in.HaveGUID != 0 && base.n == 0
	switch t := in.Token; {
	case t != nil && newestSnap.n > base.n && t.ToGUID == newestSnap.guid && t.FromGUID == out.FromGUID:
		out.Snapshot, out.Resume = newestSnap.name, true
	case newestSnap.n > base.n:
		out.Snapshot = newestSnap.name
	default:
		newestSnap = replicaMark{}
		out.Take = in.Dataset + "@" + ReplicaSnapshot(newest+1)
		out.TakeBookmark = in.Dataset + "#" + ReplicaSnapshot(newest+1)
		out.Snapshot = out.Take
	}
	// A snapshot sent again whose bookmark a crash kept from being made
	// gets it now.
	if newestSnap.n > 0 && !hasMark(marks, newestSnap.n) {
		out.TakeBookmark = in.Dataset + "#" + ReplicaSnapshot(newestSnap.n)
	}
	// Every other snapshot goes: each is bookmarked from its taking on,
	// and one a crash left without its bookmark is still the base, From,
	// until a newer one is.
	for _, s := range snaps {
		if s.name != out.Snapshot && s.name != out.From {
			out.DropSnapshots = append(out.DropSnapshots, s.name)
		}
	}
	top := newest
	if out.Take != "" {
		top++
	}
	for _, m := range marks {
		if m.n <= top-ReplicaBookmarksKept {
			out.DropBookmarks = append(out.DropBookmarks, m.name)
		}
	}
	return out, nil
}

// hasMark reports whether marks has a bookmark of the n-th replica
// snapshot.
func hasMark(marks []replicaMark, n int) bool {
	for _, m := range marks {
		if m.n == n {
			return true
		}
	}
	return false
}

// PlanTakeReplicaSnapshot takes a replica snapshot on the holder's slot,
// with its own mark (ReplicaSnapshotProps: the model counts it the
// plugin's by that, ownSnapshot) and under the plugin's hold (only the
// plugin's own drop destroys it), and bookmarks it at once: the bookmark
// is the next pull's base after the snapshot goes. With snap "" it only bookmarks ReplicaSend.Snapshot
// (sent, whose bookmark a crash kept from being made).
func PlanTakeReplicaSnapshot(rs ReplicaSend) Plan {
	if rs.Take == "" {
		return Plan{Doing: "bookmarking " + rs.Snapshot, Ops: []Op{bookmarkOp(rs.Snapshot, rs.TakeBookmark)}}
	}
	return Plan{Doing: "taking " + rs.Take + " for a replica",
		Ops: []Op{markedSnapshotOp(rs.Take, ReplicaSnapshotProps(rs.Take)), holdOp(rs.Take), bookmarkOp(rs.Take, rs.TakeBookmark)}}
}

// PlanDropReplicaBases drops what no replica pull needs any more: old
// replica snapshots (after the plugin's hold) and old bookmarks.
func PlanDropReplicaBases(snaps, bookmarks []string) Plan {
	return Plan{Doing: "dropping a replica's old snapshots and bookmarks", Ops: dropOwn(snaps, bookmarks)}
}

// dropReplicaBases drops what replica pulls left on slot s (its
// @replica-<n> snapshots, after the plugin's hold, and its #replica-<n>
// bookmarks), before its data leaves the slot's name: renamed, a replica
// snapshot's own mark would no longer name it (a stranger then, keeping
// the data from ever being destroyed), and a bookmark would be a base no
// pull may use (its allocation has ended) on data that is no longer a
// slot. None are left for a later holder of the data to send from.
func dropReplicaBases(s Slot) []Op {
	var snaps []string
	for _, snap := range s.OwnSnapshots {
		if replicaSnapshot(snap) {
			snaps = append(snaps, snap)
		}
	}
	return PlanDropReplicaBases(snaps, s.OwnBookmarks).Ops
}

// bookmarkOp bookmarks snap as bookmark; one already there is done.
func bookmarkOp(snap, bookmark string) Op {
	return Op{Command: zfs.Command{Verb: zfs.VerbBookmark, Name: snap, Arg: bookmark}, Done: []error{zfs.ErrExists}}
}
