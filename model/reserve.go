package model

import (
	"fmt"
)

// ReserveKind is what Reserve must do before it can hand a slot out.
type ReserveKind int

const (
	// ReserveGrant: hand it out now.
	ReserveGrant ReserveKind = iota
	// ReserveRefresh: the snapshot does not show who is asking; fetch a
	// fresh one and decide again.
	ReserveRefresh
	// ReserveReleaseFirst: the previous holder ended and its data is still
	// there; release it (bounded), then decide again.
	ReserveReleaseFirst
	// ReserveCheckLost: the previous holder is lost; ask the local client
	// whether it still runs before releasing.
	ReserveCheckLost
	// ReserveCheckGone: the previous holder is missing from the list; look
	// it up before releasing.
	ReserveCheckGone
	// ReserveWait: the previous holder is stopping (a destructive update
	// gave its replacement the same slot); wait for it to end.
	ReserveWait
	// ReserveFail: refuse rather than share or wipe.
	ReserveFail
	// ReserveInherit: the previous holder ended and the caller, in a
	// sticky class, replaces it: record the caller as the holder of the
	// data as it is.
	ReserveInherit
)

// ReserveDecision is DecideReserve's answer.
type ReserveDecision struct {
	Kind ReserveKind
	// Alloc is the previous holder, when there is one; for ReserveGrant of
	// a ready slot, the caller, to be recorded as its holder.
	Alloc   Alloc
	Outcome string
	Reason  string
}

// DecideReserve fences a Reserve of slot s. Reserve does not know which
// allocation calls it, so it decides only on a fresh snapshot (fresh: taken
// by this Reserve): the caller is the newest live allocation naming the
// slot. Nomad calls Reserve once per task start — its device hook is
// recorded done, so a task restart does not call it again — which is why a
// stale snapshot is never trusted: in it, a replacement's first start would
// look like the old holder's.
//
// c is the slot's class: in a sticky one, the replacement of an ended
// holder inherits its data (ReserveInherit) instead of waiting for a
// release; a ready slot's caller may still inherit parked data
// (DecideInherit).
func DecideReserve(c Class, s Slot, snap *Snapshot, fresh bool) ReserveDecision {
	if s.State == StateReleasing {
		return ReserveDecision{Kind: ReserveReleaseFirst, Alloc: holderOf(snap, s), Outcome: s.Outcome}
	}
	if snap == nil || !fresh {
		return ReserveDecision{Kind: ReserveRefresh, Reason: "deciding on a fresh answer from Nomad"}
	}
	r := refsFor(snap, s.Class, s.ID)

	if s.State == StateHeld || s.State == StateParked {
		holder, seen := findAlloc(snap, s.Holder)
		if !seen {
			return ReserveDecision{Kind: ReserveCheckGone, Alloc: Alloc{ID: s.Holder}}
		}
		switch live, outcome := Judge(holder, true); live {
		case AskClient:
			return ReserveDecision{Kind: ReserveCheckLost, Alloc: holder}
		case Ended:
			if next, ok := successorOn(c, s, holder, snap); ok {
				return ReserveDecision{Kind: ReserveInherit, Alloc: next}
			}
			return ReserveDecision{Kind: ReserveReleaseFirst, Alloc: holder, Outcome: outcome}
		}
		// The holder may still run. Is someone else asking?
		others := newer(r.live, holder.CreateIndex)
		if len(others) == 0 && holder.ServerTerminal() {
			// A stopping allocation starts no task: the caller is one
			// Nomad's answer does not show.
			return ReserveDecision{Kind: ReserveFail, Alloc: holder, Reason: stoppingOnly(holder.ID)}
		}
		if len(others) == 0 {
			return ReserveDecision{Kind: ReserveGrant} // the holder's own task starting
		}
		if holder.ServerTerminal() {
			return ReserveDecision{Kind: ReserveWait, Alloc: holder,
				Reason: fmt.Sprintf("previous holder %s is stopping", short(holder.ID))}
		}
		return ReserveDecision{Kind: ReserveFail, Alloc: holder, Reason: fmt.Sprintf(
			"slot is held by allocation %s, which is %s and not stopping, and allocation %s also names it; refusing to share",
			short(holder.ID), holder.ClientStatus, short(others[0].ID))}
	}

	// Ready: who is asking?
	live := r.live // whatever their index (refs.live)
	if dirty := newer(r.terminal, s.HolderIndex); len(dirty) > 0 {
		d := dirty[len(dirty)-1]
		if anyRunning(live) {
			return ReserveDecision{Kind: ReserveFail, Reason: fmt.Sprintf(
				"slot still holds data of ended allocation %s, and an allocation already runs on it; refusing to wipe or share",
				short(d.ID))}
		}
		if l, ok := firstLost(dirty); ok {
			return ReserveDecision{Kind: ReserveCheckLost, Alloc: l}
		}
		return ReserveDecision{Kind: ReserveReleaseFirst, Alloc: d, Outcome: OutcomeOf(d)}
	}
	switch {
	case len(live) == 1 && live[0].ServerTerminal():
		// A stopping allocation starts no task: the caller is one Nomad's
		// answer does not show, and recording the stopping one would let
		// its end release the caller's data.
		return ReserveDecision{Kind: ReserveFail, Reason: stoppingOnly(live[0].ID)}
	case len(live) == 1:
		// The caller: Reserve records it as the holder before the grant.
		return ReserveDecision{Kind: ReserveGrant, Alloc: live[0]}
	case len(live) > 1 && live[0].ServerTerminal():
		return ReserveDecision{Kind: ReserveWait, Alloc: live[0],
			Reason: fmt.Sprintf("allocation %s is stopping and still holds it", short(live[0].ID))}
	case len(live) > 1:
		return ReserveDecision{Kind: ReserveFail, Reason: fmt.Sprintf(
			"allocations %s and %s both name this slot and neither is stopping; refusing to share",
			short(live[0].ID), short(live[1].ID))}
	}
	return ReserveDecision{Kind: ReserveFail, Reason: "no allocation on this node names this slot in Nomad's answer, so " + hiddenCaller}
}

// stoppingOnly explains a Reserve refused because the only allocation
// Nomad shows on the slot, id, is stopping. A stopping allocation starts no
// task, so either it is the caller, stopped by the servers while its
// Reserve waited (its client kills it anyway), or the caller is one the
// answer does not show: the token is to blame only in the second case.
func stoppingOnly(id string) string {
	return fmt.Sprintf("the only allocation Nomad shows on this slot, %s, is stopping: either it is the caller, stopped while "+
		"its Reserve waited, or %s", short(id), hiddenCaller)
}

// hiddenCaller explains a Reserve refused because its caller is not in
// Nomad's answer.
const hiddenCaller = "the plugin cannot tell who is asking: does the plugin's Nomad token have read-job in the job's namespace?"
