package hooks

import (
	"fmt"
	"sort"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
)

// The slot lifecycle, as pure decisions over a slot (from ZFS) and a
// snapshot of this node's allocations (from the watcher):
//
//	ready ──holder seen──▶ held ──holder ended──▶ releasing ──policy──▶ ready
//	                                                        └─snapshot─▶ retained (aside)
//
// Invariants (see ../shared notes, and the tests): no slot's data is ever
// visible to two allocations that may both run; nothing is wiped while an
// allocation that may still run holds it; a crash anywhere resumes from the
// state in ZFS user properties.

// refs are the allocations that name one slot, split by whether they may
// still run.
type refs struct {
	live     []allocwatch.Alloc // not client-terminal: pending, running, unknown
	terminal []allocwatch.Alloc // complete, failed, lost
}

// refsFor finds the allocations holding device id of class in snap, oldest
// placement first.
func refsFor(snap *allocwatch.Snapshot, class, id string) refs {
	var r refs
	if snap == nil {
		return r
	}
	for _, a := range snap.Allocs {
		if !a.HoldsDevice(vendor, deviceType, id) || !holdsClass(a, class) {
			continue
		}
		if a.ClientTerminal() {
			r.terminal = append(r.terminal, a)
		} else {
			r.live = append(r.live, a)
		}
	}
	byCreate := func(s []allocwatch.Alloc) {
		sort.Slice(s, func(i, j int) bool { return s[i].CreateIndex < s[j].CreateIndex })
	}
	byCreate(r.live)
	byCreate(r.terminal)
	return r
}

// Device identity as Nomad records it in AllocatedResources.
const (
	vendor     = "zfs"
	deviceType = "dataset"
)

func holdsClass(a allocwatch.Alloc, class string) bool {
	for _, d := range a.Devices {
		if d.Vendor == vendor && d.Type == deviceType && d.Name == class {
			return true
		}
	}
	return false
}

func findAlloc(snap *allocwatch.Snapshot, id string) (allocwatch.Alloc, bool) {
	if snap != nil {
		for _, a := range snap.Allocs {
			if a.ID == id {
				return a, true
			}
		}
	}
	return allocwatch.Alloc{}, false
}

// newer keeps the allocations placed after the slot's last recorded holder.
func newer(as []allocwatch.Alloc, holderIndex uint64) []allocwatch.Alloc {
	var out []allocwatch.Alloc
	for _, a := range as {
		if a.CreateIndex > holderIndex {
			out = append(out, a)
		}
	}
	return out
}

// anyRunning reports whether an allocation has started: its client says
// running, or one of its tasks runs.
func anyRunning(as []allocwatch.Alloc) bool {
	for _, a := range as {
		if a.ClientStatus == "running" {
			return true
		}
		for _, st := range a.TaskStates {
			if st == "running" {
				return true
			}
		}
	}
	return false
}

// firstLost finds a lost allocation among ended ones: it may still run on
// this node.
func firstLost(as []allocwatch.Alloc) (allocwatch.Alloc, bool) {
	for _, a := range as {
		if a.ClientStatus == "lost" {
			return a, true
		}
	}
	return allocwatch.Alloc{}, false
}

// outcomeOf names how a client-terminal allocation ended.
func outcomeOf(a allocwatch.Alloc) string {
	switch a.ClientStatus {
	case "complete":
		return OutcomeComplete
	case "lost":
		return OutcomeLost
	default:
		return OutcomeFailed
	}
}

// stepKind is what the watcher's reconcile does to one slot.
type stepKind int

const (
	// stepRecord records a live allocation as the slot's holder.
	stepRecord stepKind = iota
	// stepRelease releases the slot's data by policy.
	stepRelease
	// stepCheckLost asks the local client whether a lost holder still runs
	// here; the release follows only on a definite "no".
	stepCheckLost
	// stepCheckGone looks a holder up by ID because the node's allocation
	// list no longer shows it: a narrow token hides allocations, so absence
	// alone never releases anything.
	stepCheckGone
)

func (k stepKind) String() string {
	return [...]string{"record holder", "release", "check lost holder", "check vanished holder"}[k]
}

// step is one lifecycle action on one slot.
type step struct {
	kind    stepKind
	slot    Slot
	alloc   allocwatch.Alloc // the holder to record, release or check
	outcome string           // for stepRelease
}

// planLifecycle decides, for every existing slot, what the watcher's latest
// snapshot calls for. It is pure and level-triggered: the same inputs give
// the same steps, so a crash or a repeated snapshot is harmless.
func planLifecycle(v *View, snap *allocwatch.Snapshot) []step {
	if v == nil || snap == nil || v.Problem != "" {
		return nil
	}
	var steps []step
	for ci := range v.Classes {
		cv := &v.Classes[ci]
		for _, s := range cv.Slots {
			if !s.Exists {
				continue
			}
			if st, ok := planSlot(s, cv.Class.Name, snap); ok {
				steps = append(steps, st)
			}
		}
	}
	return steps
}

func planSlot(s Slot, class string, snap *allocwatch.Snapshot) (step, bool) {
	r := refsFor(snap, class, s.ID)
	switch s.State {
	case StateReleasing:
		// A release was under way (a crash, or a busy dataset): finish it.
		holder, _ := findAlloc(snap, s.Holder)
		holder.ID = s.Holder
		return step{kind: stepRelease, slot: s, alloc: holder, outcome: s.Outcome}, true

	case StateHeld:
		holder, seen := findAlloc(snap, s.Holder)
		switch {
		case !seen:
			return step{kind: stepCheckGone, slot: s, alloc: allocwatch.Alloc{ID: s.Holder}}, true
		case !holder.ClientTerminal():
			return step{}, false // pending, running, unknown, stopping: keep
		case holder.ClientStatus == "lost":
			return step{kind: stepCheckLost, slot: s, alloc: holder}, true
		default:
			return step{kind: stepRelease, slot: s, alloc: holder, outcome: outcomeOf(holder)}, true
		}

	case StateReady:
		// An allocation placed after the last recorded holder that has
		// already ended ran on this slot unrecorded (the plugin was down):
		// its data is here and must go before anyone else gets the slot —
		// unless an allocation already runs on it, under which nothing is
		// ever wiped.
		dirty := newer(r.terminal, s.HolderIndex)
		live := newer(r.live, s.HolderIndex)
		if len(dirty) > 0 && !anyRunning(live) {
			// A lost one may still run here (cut off, or within its kill
			// timeout after the node reconnected): ask the local client
			// first, as for a recorded holder.
			if l, ok := firstLost(dirty); ok {
				return step{kind: stepCheckLost, slot: s, alloc: l}, true
			}
			d := dirty[len(dirty)-1]
			return step{kind: stepRelease, slot: s, alloc: d, outcome: OutcomeUnknown}, true
		}
		if len(live) > 0 {
			return step{kind: stepRecord, slot: s, alloc: live[0]}, true
		}
	}
	return step{}, false
}

// reserveKind is what Reserve must do before it can hand a slot out.
type reserveKind int

const (
	// reserveGrant: hand it out now.
	reserveGrant reserveKind = iota
	// reserveRefresh: the snapshot does not show who is asking; fetch a
	// fresh one and decide again.
	reserveRefresh
	// reserveReleaseFirst: the previous holder ended and its data is still
	// there; release it (bounded), then decide again.
	reserveReleaseFirst
	// reserveCheckLost: the previous holder is lost; ask the local client
	// whether it still runs before releasing.
	reserveCheckLost
	// reserveCheckGone: the previous holder is missing from the list; look
	// it up before releasing.
	reserveCheckGone
	// reserveWait: the previous holder is stopping (a destructive update
	// gave its replacement the same slot); wait for it to end.
	reserveWait
	// reserveFail: refuse rather than share or wipe.
	reserveFail
)

// reserveDecision is decideReserve's answer.
type reserveDecision struct {
	kind    reserveKind
	alloc   allocwatch.Alloc // the previous holder, when there is one
	outcome string
	reason  string
}

// decideReserve fences a Reserve of slot s. Reserve does not know which
// allocation calls it, so it decides only on a fresh snapshot (fresh: taken
// by this Reserve): the caller is the newest live allocation naming the
// slot. Nomad calls Reserve once per task start — its device hook is
// recorded done, so a task restart does not call it again — which is why a
// stale snapshot is never trusted: in it, a replacement's first start would
// look like the old holder's.
func decideReserve(s Slot, class string, snap *allocwatch.Snapshot, fresh bool) reserveDecision {
	if s.State == StateReleasing {
		holder, _ := findAlloc(snap, s.Holder)
		holder.ID = s.Holder
		return reserveDecision{kind: reserveReleaseFirst, alloc: holder, outcome: s.Outcome}
	}
	if snap == nil || !fresh {
		return reserveDecision{kind: reserveRefresh, reason: "deciding on a fresh answer from Nomad"}
	}
	r := refsFor(snap, class, s.ID)

	if s.State == StateHeld {
		holder, seen := findAlloc(snap, s.Holder)
		switch {
		case !seen:
			return reserveDecision{kind: reserveCheckGone, alloc: allocwatch.Alloc{ID: s.Holder}}
		case holder.ClientTerminal() && holder.ClientStatus == "lost":
			return reserveDecision{kind: reserveCheckLost, alloc: holder}
		case holder.ClientTerminal():
			return reserveDecision{kind: reserveReleaseFirst, alloc: holder, outcome: outcomeOf(holder)}
		}
		// The holder may still run. Is someone else asking?
		others := newer(r.live, holder.CreateIndex)
		if len(others) == 0 && holder.ServerTerminal() {
			// A stopping allocation starts no task: the caller is one
			// Nomad's answer does not show.
			return reserveDecision{kind: reserveFail, alloc: holder, reason: fmt.Sprintf(
				"the only allocation Nomad shows on this slot, %s, is stopping; %s", short(holder.ID), hiddenCaller)}
		}
		if len(others) == 0 {
			return reserveDecision{kind: reserveGrant} // the holder's own task starting
		}
		if holder.ServerTerminal() {
			return reserveDecision{kind: reserveWait, alloc: holder,
				reason: fmt.Sprintf("previous holder %s is stopping", short(holder.ID))}
		}
		return reserveDecision{kind: reserveFail, alloc: holder, reason: fmt.Sprintf(
			"slot is held by allocation %s, which is %s and not stopping, and allocation %s also names it; refusing to share",
			short(holder.ID), holder.ClientStatus, short(others[0].ID))}
	}

	// Ready: who is asking?
	live := newer(r.live, s.HolderIndex)
	if dirty := newer(r.terminal, s.HolderIndex); len(dirty) > 0 {
		d := dirty[len(dirty)-1]
		if anyRunning(live) {
			return reserveDecision{kind: reserveFail, reason: fmt.Sprintf(
				"slot still holds data of ended allocation %s, and an allocation already runs on it; refusing to wipe or share",
				short(d.ID))}
		}
		if l, ok := firstLost(dirty); ok {
			return reserveDecision{kind: reserveCheckLost, alloc: l}
		}
		return reserveDecision{kind: reserveReleaseFirst, alloc: d, outcome: OutcomeUnknown}
	}
	switch {
	case len(live) == 1 && live[0].ServerTerminal():
		// A stopping allocation starts no task: the caller is one Nomad's
		// answer does not show, and recording the stopping one would let
		// its end release the caller's data.
		return reserveDecision{kind: reserveFail, reason: fmt.Sprintf(
			"the only allocation Nomad shows on this slot, %s, is stopping; %s", short(live[0].ID), hiddenCaller)}
	case len(live) == 1:
		// The caller: Reserve records it as the holder before the grant.
		return reserveDecision{kind: reserveGrant, alloc: live[0]}
	case len(live) > 1 && live[0].ServerTerminal():
		return reserveDecision{kind: reserveWait, alloc: live[0],
			reason: fmt.Sprintf("allocation %s is stopping and still holds it", short(live[0].ID))}
	case len(live) > 1:
		return reserveDecision{kind: reserveFail, reason: fmt.Sprintf(
			"allocations %s and %s both name this slot and neither is stopping; refusing to share",
			short(live[0].ID), short(live[1].ID))}
	}
	return reserveDecision{kind: reserveFail, reason: "no allocation on this node names this slot in Nomad's answer, " +
		"so the plugin cannot tell who is asking: does the plugin's Nomad token have read-job in the job's namespace?"}
}

// hiddenCaller explains a Reserve refused because its caller is not in
// Nomad's answer.
const hiddenCaller = "the plugin cannot tell who is asking: does the plugin's Nomad token have read-job in the job's namespace?"

// short abbreviates an allocation ID as Nomad's CLI does.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
