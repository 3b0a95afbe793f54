package model

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The sending side of a migration is a loop on the driver too (move.go):
// a peer plugin, on the node where Nomad placed allocation A's
// replacement, asks for A's data (the transport has checked with this
// node's Nomad that it may); DecideSendMove decides, step by step, what
// this node sends, from the data as it is under its lock, and
// hooks/drive.go does each step.

// ErrNoData: the sending node has nothing to send for the allocation: no
// copy of its data is there (the transport answers "no_data";
// transfer.ErrNoData is this).
var ErrNoData = errors.New("the peer has no data for the allocation")

// SendRequest is a peer's request for the data allocation Alloc had in
// its slot Slot of this node, for its replacement Replacement: the
// transport's request (transfer.Request, its wire form) as the sending
// node decides on it.
type SendRequest struct {
	Alloc, Replacement, Slot string
	// HaveGUID is the guid of the newest snapshot of the data the peer
	// holds, 0 for none.
	HaveGUID uint64
	// ResumeToken is the peer's interrupted receive's token, "" for none:
	// decoded by this node's zfs (MoveDecodeToken), never read as the peer
	// says.
	ResumeToken string
}

// SendLoop is what a send decides its next step from (DecideSendMove).
type SendLoop struct {
	Req SendRequest
	// Class is Req.Slot's class; Migrates: a class whose data migrates
	// (sticky, migrate enabled), else nothing is sent.
	Class    string
	Migrates bool
	// ParkedName is where A's data is once parked; SlotDataset, its slot.
	ParkedName, SlotDataset string
	// Resume is the peer's token as this node's zfs decoded it (kept by
	// After).
	Resume *Resume
	Last   Result
}

// After is the loop once last has been done.
func (s SendLoop) After(last Result) SendLoop {
	s.Last = last
	if last.Step.Phase == SendToken {
		s.Resume = last.Resume
	}
	return s
}

// DecideSendMove is a send as a loop. Its rules:
//
//   - A's data is parked (A has ended: the final copy) or in the slot A
//     holds (A may still write it: a pre-copy); each is read under its
//     lock, the parked data's first. Parked data is final from the park's
//     rename on (Retained.SendsFinal), before the park has created the
//     fresh slot and marked the data parked: the final request is not
//     kept waiting for the park's end (docs/performance.md, the cutover).
//     The slot's lock is only tried: a Reserve fences it, or a pass
//     releases it, and its data may be moving; the peer is told to ask
//     again.
//   - What is sent is DecideSend's, on one listing of the data under its
//     lock (for parked data, the one that found it); the snapshot it names
//     is taken (under the plugin's hold) before it is sent, and its guid
//     read back.
//   - A peer that names the final snapshot holds the whole copy: that is
//     recorded on the data (PlanMigrated), and the next pass gives it to
//     the class's policy.
func DecideSendMove(s SendLoop) Move {
	last, req := s.Last, s.Req
	switch {
	case last.Err != nil && last.Step.Phase == SendToken:
		return tokenRefused(last.Err)
	case last.Err != nil:
		return sendFailed(last.Err)
	}
	switch last.Step.Phase {
	case 0:
		if req.ResumeToken != "" {
			return Move{Kind: MoveDecodeToken, Phase: SendToken, Token: req.ResumeToken}
		}
		return s.locate()
	case SendToken:
		return s.locate()
	case SendLockParked:
		return Move{Kind: MoveReadParked, Phase: SendReadParked, Dataset: s.ParkedName}
	case SendReadParked:
		if p := last.Parked; p != nil && p.SendsFinal(req.Alloc) {
			return s.decide(s.ParkedName, last.Rows)
		}
		return Move{Kind: MoveUnlock, Phase: SendUnlockParked, Lock: s.ParkedName}
	case SendUnlockParked:
		return Move{Kind: MoveLock, Phase: SendLockSlot, Lock: req.Slot, Try: true}
	case SendLockSlot:
		if !last.Locked {
			return sendFailed(fmt.Errorf("%w: slot %s is busy", ErrPeerBusy, req.Slot))
		}
		return Move{Kind: MoveRead, Phase: SendReadSlot, Class: Class{Name: s.Class}, Slot: Slot{Dataset: s.SlotDataset}}
	case SendReadSlot:
		if sl := last.Slot; !sl.Exists || sl.Holder != req.Alloc || (sl.State != StateHeld && sl.State != StateReleasing) {
			return sendFailed(fmt.Errorf("%w: %s holds no data of allocation %s (state %s, holder %q), nor is it parked",
				ErrNoData, req.Slot, req.Alloc, sl.State, sl.Holder))
		}
		return Move{Kind: MoveList, Phase: SendList, Dataset: last.Slot.Dataset}
	case SendList:
		return s.decide(last.Step.Dataset, last.Rows)
	case SendDrop:
		return s.send(*last.Step.Send, last.Step.Dataset, last.Step.Rows)
	case SendMigrated:
		return Move{Kind: MoveDone, Wake: true, Send: &Send{Complete: true}}
	case SendTake:
		return Move{Kind: MoveList, Phase: SendRelist, Dataset: last.Step.Dataset, Send: last.Step.Send}
	case SendRelist:
		return streamed(*last.Step.Send, last.Step.Dataset, last.Rows)
	}
	return sendFailed(fmt.Errorf("send: no move after %s", last.Step.Kind))
}

// locate starts looking for A's data: its class first, then, under its
// lock, the parked data.
func (s SendLoop) locate() Move {
	if !s.Migrates {
		return sendFailed(fmt.Errorf("%w: slot %q is not of a class whose data migrates", ErrNoData, s.Req.Slot))
	}
	return Move{Kind: MoveLock, Phase: SendLockParked, Lock: s.ParkedName}
}

// decide decides the send on one listing (rows) of the data in dataset.
func (s SendLoop) decide(dataset string, rows []zfs.Dataset) Move {
	in := SendInput{Dataset: dataset, Rows: rows, Final: dataset == s.ParkedName, HaveGUID: s.Req.HaveGUID, Token: s.Resume}
	d, err := DecideSend(in)
	if errors.Is(err, ErrMigrated) {
		return sendFailed(fmt.Errorf("%w: %w", ErrNoData, err))
	}
	if err != nil {
		return sendFailed(err)
	}
	d.Final = in.Final
	if len(d.Drop) > 0 {
		plan := PlanDropSnapshots(d.Drop)
		return Move{Kind: MoveRun, Act: ActPlan, Phase: SendDrop, Plan: &plan, Dataset: dataset, Send: &d, Rows: rows,
			Warn: "cannot drop a migration's old snapshots; next request"}
	}
	return s.send(d, dataset, rows)
}

// send carries out decision d on the data in dataset, as listed (rows).
func (s SendLoop) send(d Send, dataset string, rows []zfs.Dataset) Move {
	switch {
	case d.Complete && strings.HasSuffix(d.Options.Snapshot, "@"+MigrateFinal):
		plan := PlanMigrated(dataset)
		return Move{Kind: MoveRun, Act: ActPlan, Phase: SendMigrated, Plan: &plan, Dataset: dataset}
	case d.Complete:
		return Move{Kind: MoveDone, Send: &Send{Complete: true}}
	case d.Take != "":
		plan := PlanTakeSnapshot(d.Take)
		return Move{Kind: MoveRun, Act: ActPlan, Phase: SendTake, Plan: &plan, Dataset: dataset, Send: &d}
	}
	return streamed(d, dataset, rows)
}

// streamed ends a send (a migration's, a replica's): d with the guid of
// the snapshot it sends and the stream's flags, from a listing (rows) of
// the data that has it.
func streamed(d Send, dataset string, rows []zfs.Dataset) Move {
	encrypted := false
	for _, r := range rows {
		switch r.Name {
		case dataset:
			encrypted = r.Encryption != "" && r.Encryption != "off"
		case d.Options.Snapshot:
			g, err := strconv.ParseUint(r.GUID, 10, 64)
			if err != nil {
				return sendFailed(fmt.Errorf("snapshot %s: guid %q: %w", r.Name, r.GUID, err))
			}
			d.ToGUID = g
		}
	}
	if d.ToGUID == 0 {
		return sendFailed(fmt.Errorf("%s is not there after it was taken", d.Options.Snapshot))
	}
	d = d.Streamed(encrypted)
	return Move{Kind: MoveDone, Send: &d}
}

// sendFailed ends a send with err, the transport's answer.
func sendFailed(err error) Move {
	return Move{Kind: MoveFail, Err: err, Reason: err.Error()}
}

// tokenRefused is a send that ends on a peer's resume token this node's
// zfs could not decode (err): ErrResumeRefused, so that the peer aborts
// its partial receive and asks again without it, as the transport does
// for a token that decodes but does not resume the send
// (transfer.Server's checkToken). A token whose stream's snapshot is not
// on this node (OpenZFS: "cannot resume send: ... no longer exists"), as
// a lying sender's foreign stream leaves, never decodes here: read as
// any other failure, the peer resumed it on every pull, for good.
func tokenRefused(err error) Move {
	return sendFailed(fmt.Errorf("%w: decoding the resume token: %w", ErrResumeRefused, err))
}
