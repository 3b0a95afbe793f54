package model

import (
	"errors"
	"time"
)

// ReserveLoop is what a Reserve's fence of one slot decides its next step
// from (DecideReserveMove): the slot as last read, Nomad's latest answer,
// what the fence has read since its last pause, and what came of its last
// step.
type ReserveLoop struct {
	Class Class
	Slot  Slot
	Snap  *Snapshot
	// Nomad: the plugin asks Nomad who holds its slots (false only in
	// tests and demos without an allocation source: every slot is handed
	// out as it is).
	Nomad bool
	// Pace is the pause between two looks at a holder that may still run,
	// and before a failed step is tried again.
	Pace  time.Duration
	Since Since
	Last  Result
}

// DecideReserveMove is the Reserve fence as a loop: DecideReserve says what
// the slot needs, and this what to do about it now. Its rules, which the
// step sequences of reserve_move_test.go show:
//
//   - A slot's data is released only on a reading of the slot taken since
//     the fence's last pause (something foreign may have appeared below it
//     since the scan, and a rename takes it along).
//   - Who asks is decided only on an answer from Nomad fetched by this
//     Reserve (DecideReserve's fresh), and asked again after waiting for a
//     holder and after releasing an ended holder's data.
//   - A holder that may still run (a lookup or the local client says so) is
//     waited for, then asked about again; a failed step is tried again
//     after a pause, until the Reserve's deadline.
//   - A ready slot's caller first inherits its predecessor's data, if any
//     (DecideInherit), then is recorded as its holder: the grant follows
//     the reading back.
func DecideReserveMove(in ReserveLoop) Move {
	s, last := in.Slot, in.Last
	if last.Err != nil {
		if last.Step.Kind == MoveRead {
			// The reading a release was to rest on.
			return Move{Kind: MoveFail, Slot: s, Reason: last.Err.Error()}
		}
		return in.wait(Move{Alloc: last.Step.Alloc, Retry: last.Err})
	}
	switch last.Step.Kind {
	case MoveLookup:
		return in.judged(last.Alloc, last.Found)
	case MoveLocal:
		if last.Running {
			return in.keep(last.Step.Alloc)
		}
		return in.run(Move{Act: ActRelease, Alloc: last.Step.Alloc, Outcome: last.Step.Outcome})
	case MoveReadPrev:
		return in.inheritMove(last.Step.Alloc, last.Inherit, last.Dataset)
	case MoveRun:
		if last.Step.Act == ActPark {
			if last.Changed {
				return Move{Kind: MoveReadPrev, Class: in.Class, Slot: s, Alloc: last.Step.Alloc}
			}
			return in.waitPrev(last.Step.Alloc, last.Step.Reason)
		}
	}

	if !s.Exists || (s.State != StateReleasing && !s.Healthy) {
		return Move{Kind: MoveFail, Slot: s, Reason: s.Reason}
	}
	if !in.Nomad {
		return Move{Kind: MoveGrant, Slot: s}
	}
	d := DecideReserve(in.Class, s, in.Snap, in.Since.Asked)
	switch d.Kind {
	case ReserveReleaseFirst, ReserveCheckLost, ReserveCheckGone:
		if !in.Since.Read {
			return Move{Kind: MoveRead, Class: in.Class, Slot: s}
		}
	}
	switch d.Kind {
	case ReserveInherit:
		// The replacement of the ended holder, in a sticky class: the
		// data is its own now.
		return in.run(Move{Act: ActRecord, Alloc: d.Alloc})
	case ReserveGrant:
		switch {
		case s.State != StateReady && s.State != StateHeld:
			return Move{Kind: MoveRead, Class: in.Class, Slot: s} // a release just ran
		case s.State == StateReady && d.Alloc.ID != "":
			return Move{Kind: MoveReadPrev, Class: in.Class, Slot: s, Alloc: d.Alloc}
		}
		return Move{Kind: MoveGrant, Slot: s}
	case ReserveFail:
		return Move{Kind: MoveFail, Slot: s, Alloc: d.Alloc, Refused: true, Reason: d.Reason}
	case ReserveRefresh:
		return Move{Kind: MoveAsk, Slot: s}
	case ReserveWait:
		return in.wait(Move{Alloc: d.Alloc, Reason: d.Reason, Stale: true, Awaits: AwaitsHolder})
	case ReserveReleaseFirst:
		return in.run(Move{Act: ActRelease, Alloc: d.Alloc, Outcome: d.Outcome, Stale: true})
	case ReserveCheckLost:
		return Move{Kind: MoveLocal, Class: in.Class, Slot: s, Alloc: d.Alloc, Outcome: OutcomeLost}
	default: // ReserveCheckGone
		return Move{Kind: MoveLookup, Class: in.Class, Slot: s, Alloc: d.Alloc}
	}
}

// judged acts on a lookup of a holder missing from the node's allocations
// (found: the servers, or the node's memory of its end, know it). An
// error is never read as absence: the driver returns it as the step's.
func (in ReserveLoop) judged(a Alloc, found bool) Move {
	switch live, outcome := Judge(a, found); live {
	case MayRun:
		return in.keep(a)
	case AskClient:
		return Move{Kind: MoveLocal, Class: in.Class, Slot: in.Slot, Alloc: a, Outcome: outcome}
	default:
		return in.run(Move{Act: ActRelease, Alloc: a, Outcome: outcome})
	}
}

// keep waits for holder a, which may still run, and asks Nomad again.
func (in ReserveLoop) keep(a Alloc) Move {
	return in.wait(Move{Alloc: a, Reason: "the holder may still run", Stale: true, Awaits: AwaitsKept})
}

// inheritMove acts on the reading of what caller may inherit on the ready
// slot: prev is nil when it replaces no predecessor here; prevDataset is
// the predecessor's slot.
func (in ReserveLoop) inheritMove(caller Alloc, prev *InheritInput, prevDataset string) Move {
	if prev == nil {
		return in.record(caller, "")
	}
	d := DecideInherit(*prev)
	switch d.Kind {
	case InheritWait:
		local := prev.Prev.NodeID == "" || prev.Prev.NodeID == prev.NodeID
		if local && !in.Since.Parked {
			// Park it now if its holder has ended (the watcher's pass
			// would, a little later), once a pause.
			return in.run(Move{Act: ActPark, Dataset: prevDataset, Alloc: caller, Reason: d.Reason})
		}
		mv := in.waitPrev(caller, d.Reason)
		if !local {
			mv.For, mv.Kick = CopyLooks*in.Pace, true
		}
		return mv
	case InheritFail:
		return in.wait(Move{Alloc: caller, Retry: errors.New(in.Slot.ID + ": " + d.Reason)})
	case InheritClaim:
		return in.run(Move{Act: ActClaim, Alloc: caller, Parked: prev.Parked})
	case InheritTakeover:
		// The replica becomes the predecessor's parked data; the next
		// reading of it claims that.
		replica, parked := prev.Takeover.target(prev.Prev.ID)
		return in.run(Move{Act: ActTakeover, Alloc: caller, Plan: d.Plan, Dataset: replica, Parked: parked, Reason: d.Reason})
	}
	// Nothing to inherit (Reason says why, if there was something).
	return in.record(caller, d.Reason)
}

// record records caller as the holder of the ready slot before the grant,
// not at the next pass: an allocation that ends and is garbage-collected
// before then would leave its data in a ready slot no allocation names, for
// the next one to read. why, if any, is why it inherits nothing.
func (in ReserveLoop) record(caller Alloc, why string) Move {
	return in.run(Move{Act: ActRecord, Alloc: caller, Reason: why})
}

// CopyLooks: a Reserve waiting for a copy of its predecessor's data from
// another node looks again only every CopyLooks paces. The pull that makes
// the copy claimable wakes it at once (hooks); each look, a Nomad query
// and a zfs list of the copy, ran beside the stream and its receive on the
// cutover's path, and delayed the claim behind one in flight
// (docs/performance.md). The migrate timeout is noticed up to that much
// later.
const CopyLooks = 10

// waitPrev waits for the predecessor's data, waking the watcher's pass to
// park it, and asks Nomad again.
func (in ReserveLoop) waitPrev(caller Alloc, why string) Move {
	return in.wait(Move{Alloc: caller, Reason: why, Stale: true, Wake: true, Awaits: AwaitsData})
}

func (in ReserveLoop) wait(n Move) Move {
	n.Kind, n.Class, n.Slot, n.For = MoveWait, in.Class, in.Slot, in.Pace
	return n
}

func (in ReserveLoop) run(n Move) Move {
	n.Kind, n.Class, n.Slot = MoveRun, in.Class, in.Slot
	return n
}
