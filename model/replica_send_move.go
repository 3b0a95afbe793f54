package model

import (
	"fmt"
	"strconv"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The holder's answer to a replica pull (issue 30) is a loop on the driver
// (move.go), as a migration's send is (send_move.go): a replica node asks
// for the increment of allocation A's slot it lacks; the transport has
// checked that it may (transfer.DecideReplica); DecideReplicaSendMove
// decides each step from the slot as it is under its lock, and
// hooks/drive.go does it.

// ReplicaSendRequest is a replica node's request for the data allocation
// Alloc holds in its slot Slot of this node.
type ReplicaSendRequest struct {
	Alloc, Slot string
	// HaveGUID is the guid of the replica's newest snapshot, 0 for none.
	HaveGUID uint64
	// ResumeToken is the replica's interrupted receive's token, "" for
	// none: decoded by this node's zfs, never read as the peer says.
	ResumeToken string
}

// ReplicaSendLoop is what a replica send decides its next step from.
type ReplicaSendLoop struct {
	Req ReplicaSendRequest
	// Class is Req.Slot's class; Replicates: a class that keeps replicas
	// (Class.Replicate), else nothing is sent.
	Class      string
	Replicates bool
	// SlotDataset is Req.Slot's dataset.
	SlotDataset string
	// Resume is the peer's token as this node's zfs decoded it (kept by
	// After).
	Resume *Resume
	Last   Result
}

// After is the loop once last has been done.
func (s ReplicaSendLoop) After(last Result) ReplicaSendLoop {
	s.Last = last
	if last.Step.Phase == ReplicaSendToken {
		s.Resume = last.Resume
	}
	return s
}

// DecideReplicaSendMove is a replica send as a loop. Its rules:
//
//   - only a slot of a class that keeps replicas, held by Req.Alloc, is
//     sent from: the holder serves a pull only while its allocation holds
//     the slot (the transport checks that Nomad says it runs here);
//   - the slot's lock is only tried: a Reserve fences it, or a pass
//     releases it; the peer is told to ask again;
//   - what is sent is DecideReplicaSend's, on one listing of the slot
//     under its lock (its snapshots and bookmarks): the bases no pull
//     needs any more dropped (a failure only logged), then the snapshot
//     it names taken (marked, under the plugin's hold) and bookmarked
//     before it is sent, and its guid read back.
func DecideReplicaSendMove(s ReplicaSendLoop) Move {
	last, req := s.Last, s.Req
	switch {
	case last.Err != nil && last.Step.Phase == ReplicaSendToken:
		return tokenRefused(last.Err)
	case last.Err != nil:
		return sendFailed(last.Err)
	}
	switch last.Step.Phase {
	case 0:
		if !s.Replicates {
			return sendFailed(fmt.Errorf("%w: slot %q is not of a class that keeps replicas", ErrNoData, req.Slot))
		}
		if req.ResumeToken != "" {
			return Move{Kind: MoveDecodeToken, Phase: ReplicaSendToken, Token: req.ResumeToken}
		}
		return Move{Kind: MoveLock, Phase: ReplicaSendLockSlot, Lock: req.Slot, Try: true}
	case ReplicaSendToken:
		return Move{Kind: MoveLock, Phase: ReplicaSendLockSlot, Lock: req.Slot, Try: true}
	case ReplicaSendLockSlot:
		if !last.Locked {
			return sendFailed(fmt.Errorf("%w: slot %s is busy", ErrPeerBusy, req.Slot))
		}
		return Move{Kind: MoveRead, Phase: ReplicaSendReadSlot, Class: Class{Name: s.Class}, Slot: Slot{Dataset: s.SlotDataset}}
	case ReplicaSendReadSlot:
		if sl := last.Slot; !sl.Exists || sl.Holder != req.Alloc || sl.State != StateHeld {
			return sendFailed(fmt.Errorf("%w: %s is not held by allocation %s (state %s, holder %q)",
				ErrNoData, req.Slot, req.Alloc, sl.State, sl.Holder))
		}
		return Move{Kind: MoveList, Phase: ReplicaSendList, Dataset: last.Slot.Dataset}
	case ReplicaSendList:
		return s.decide(last.Step.Dataset, last.Rows, true)
	case ReplicaSendDrop:
		return s.decide(last.Step.Dataset, last.Step.Rows, false)
	case ReplicaSendTake:
		return Move{Kind: MoveList, Phase: ReplicaSendRelist, Dataset: last.Step.Dataset, Send: last.Step.Send}
	case ReplicaSendRelist:
		return streamed(*last.Step.Send, last.Step.Dataset, last.Rows)
	}
	return sendFailed(fmt.Errorf("replica send: no move after %s", last.Step.Kind))
}

// decide decides the send on one listing (rows) of the slot's dataset:
// first the drop of the bases no pull needs (when drop), then the
// snapshot and bookmark to take, then the stream. The decision is made
// again on the same rows after the drop: DecideReplicaSend is a function
// of them.
func (s ReplicaSendLoop) decide(dataset string, rows []zfs.Dataset, drop bool) Move {
	marks, err := bookmarkRows(rows)
	if err != nil {
		return sendFailed(err)
	}
	rs, err := DecideReplicaSend(ReplicaSendInput{Dataset: dataset, Rows: rows, Bookmarks: marks, HaveGUID: s.Req.HaveGUID, Token: s.Resume})
	if err != nil {
		return sendFailed(err)
	}
	if drop && len(rs.DropSnapshots)+len(rs.DropBookmarks) > 0 {
		plan := PlanDropReplicaBases(rs.DropSnapshots, rs.DropBookmarks)
		return Move{Kind: MoveRun, Act: ActPlan, Phase: ReplicaSendDrop, Plan: &plan, Dataset: dataset, Rows: rows,
			Warn: "cannot drop a replica's old snapshots and bookmarks; next pull"}
	}
	d := Send{Take: rs.Take, Options: zfs.SendOptions{Snapshot: rs.Snapshot, From: rs.From}, FromGUID: rs.FromGUID}
	if rs.Take != "" || rs.TakeBookmark != "" {
		plan := PlanTakeReplicaSnapshot(rs)
		return Move{Kind: MoveRun, Act: ActPlan, Phase: ReplicaSendTake, Plan: &plan, Dataset: dataset, Send: &d}
	}
	return streamed(d, dataset, rows)
}

// bookmarkRows reads the bookmarks among a listing's rows (zfs.ListArgs
// lists them with the datasets).
func bookmarkRows(rows []zfs.Dataset) ([]zfs.Bookmark, error) {
	var out []zfs.Bookmark
	for _, r := range rows {
		if !r.IsBookmark() {
			continue
		}
		g, err := strconv.ParseUint(r.GUID, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bookmark %s: guid %q: %w", r.Name, r.GUID, err)
		}
		out = append(out, zfs.Bookmark{Name: r.Name, GUID: g})
	}
	return out, nil
}
