package model

// The slot lifecycle, as pure decisions over a slot (from ZFS) and a
// snapshot of this node's allocations (from the watcher):
//
//	ready ──holder seen──▶ held ──holder ended──▶ releasing ──policy──▶ ready
//	                                                        └─snapshot─▶ retained (aside)
//
// An orphan (a slot the configuration no longer has) follows the same
// edges, except that its release ends in no slot: destroyed, or retained
// aside by the snapshot policy, and not created again. An idle orphan goes
// at once.
//
// Invariants (docs/lifecycle.md): no slot's data is ever visible to two
// allocations that may both run; nothing is wiped while an allocation that
// may still run holds it; a crash anywhere resumes from the state in ZFS
// user properties.

// StepKind is what the watcher's reconcile does to one slot.
type StepKind int

const (
	// StepRecord records a live allocation as the slot's holder.
	StepRecord StepKind = iota
	// StepRelease releases the slot's data by policy.
	StepRelease
	// StepCheckLost asks the local client whether a lost holder still runs
	// here; the release follows only on a definite "no".
	StepCheckLost
	// StepCheckGone looks a holder up by ID because the node's allocation
	// list no longer shows it: a narrow token hides allocations, so absence
	// alone never releases anything.
	StepCheckGone
	// StepTidy clears what a release left on a ready slot (a crash between
	// its last writes): PlanTidy.
	StepTidy
	// StepPristine takes the @pristine snapshot a ready slot of a class
	// that rolls back lacks (a crash between its create and its snapshot):
	// PlanPristine.
	StepPristine
)

func (k StepKind) String() string {
	return [...]string{"record holder", "release", "check lost holder", "check vanished holder", "tidy", "take pristine snapshot"}[k]
}

// Step is one lifecycle action on one slot.
type Step struct {
	Kind StepKind
	Slot Slot
	// Alloc is the holder to record, release or check.
	Alloc Alloc
	// Outcome is how the holder ended, for StepRelease.
	Outcome string
}

// PlanLifecycle decides, for every existing slot, what the watcher's latest
// snapshot calls for. It is level-triggered: the same inputs give the same
// steps, so a crash or a repeated snapshot is harmless. The classes below a
// parent with a problem (its pool not healthy, its listing failed) are left
// alone until it clears.
func PlanLifecycle(v *View, snap *Snapshot) []Step {
	if v == nil || snap == nil {
		return nil
	}
	snap = snap.Indexed() // one look-up per slot, not a search of the snapshot
	var steps []Step
	plan := func(cv *ClassView, slots []Slot) {
		if v.ParentProblem(cv) != "" {
			return
		}
		c := cv.Class
		for _, s := range slots {
			if !s.Exists {
				continue
			}
			if st, ok := PlanSlot(c, s, snap); ok {
				steps = append(steps, st)
			}
		}
	}
	for ci := range v.Classes {
		plan(&v.Classes[ci], v.Classes[ci].Slots)
		plan(&v.Classes[ci], v.Classes[ci].Orphans)
	}
	for ci := range v.Removed {
		plan(&v.Removed[ci], v.Removed[ci].Orphans)
	}
	return steps
}

// PlanSlot decides what snap calls for on one slot of class c, if
// anything.
func PlanSlot(c Class, s Slot, snap *Snapshot) (Step, bool) {
	switch s.State {
	case StateReleasing:
		// A release was under way (a crash, a busy dataset, an operator's
		// request): finish it.
		return Step{Kind: StepRelease, Slot: s, Alloc: holderOf(snap, s), Outcome: s.Outcome}, true

	case StateHeld, StateParked:
		holder, seen := findAlloc(snap, s.Holder)
		if !seen {
			return Step{Kind: StepCheckGone, Slot: s, Alloc: Alloc{ID: s.Holder}}, true
		}
		switch live, outcome := Judge(holder, true); live {
		case AskClient:
			return Step{Kind: StepCheckLost, Slot: s, Alloc: holder}, true
		case Ended:
			if next, ok := successorOn(c, s, holder, snap); ok {
				// A sticky class's replacement placed on the same slot
				// inherits it in place: no release, no rename.
				return Step{Kind: StepRecord, Slot: s, Alloc: next}, true
			}
			return Step{Kind: StepRelease, Slot: s, Alloc: holder, Outcome: outcome}, true
		}
		return Step{}, false // pending, running, unknown, stopping: keep

	case StateReady:
		// An allocation placed after the last recorded holder that has
		// already ended ran on this slot unrecorded (the plugin was down, or
		// it ran faster than a pass): its data is here and must go before
		// anyone else gets the slot — unless an allocation already runs on
		// it, under which nothing is ever wiped.
		r := refsFor(snap, s.Class, s.ID)
		dirty := newer(r.terminal, s.HolderIndex)
		live := r.live // whatever their index (refs.live)
		if len(dirty) > 0 && !anyRunning(live) {
			// A lost one may still run here (cut off, or within its kill
			// timeout after the node reconnected): ask the local client
			// first, as for a recorded holder.
			if l, ok := firstLost(dirty); ok {
				return Step{Kind: StepCheckLost, Slot: s, Alloc: l}, true
			}
			// The snapshot says how it ended: its outcome picks the policy
			// (on_failure) as it would have for a recorded holder.
			d := dirty[len(dirty)-1]
			return Step{Kind: StepRelease, Slot: s, Alloc: d, Outcome: OutcomeOf(d)}, true
		}
		if len(live) > 0 && !inheritsAtReserve(c, live[0], s.ID, snap) {
			return Step{Kind: StepRecord, Slot: s, Alloc: live[0]}, true
		}
		if s.Orphan && len(r.live) == 0 {
			// Idle and no longer configured: nobody may be given it again,
			// so it goes (Class.PolicyFor destroys it, without re-creating).
			// Any allocation that names it and may run keeps it.
			return Step{Kind: StepRelease, Slot: s, Outcome: OutcomeRetired}, true
		}
		if len(ClearedOnReady(s, false)) > 0 {
			return Step{Kind: StepTidy, Slot: s}, true
		}
		if len(r.live) == 0 && len(dirty) == 0 && !s.Orphan && !s.HasPristine && c.NeedsPristine() && len(s.Strangers) == 0 {
			// Ready and clean (Reserve records a holder before it grants the
			// slot, and no allocation names it since it was made ready), so
			// its content is what the class makes a slot with: what a
			// rollback must return to.
			return Step{Kind: StepPristine, Slot: s}, true
		}
	}
	return Step{}, false
}

// successorOn finds, for a sticky class, the allocation that replaces
// holder (ended) and was placed on the same slot for the same task and
// position (Predecessor): it may run, and inherits the slot as it is. One
// placed on it for another task inherits another slot's data instead, so
// this one is parked for whoever pairs with it.
func successorOn(c Class, s Slot, holder Alloc, snap *Snapshot) (Alloc, bool) {
	if !c.Sticky || s.Orphan {
		return Alloc{}, false
	}
	origin := s.ID
	if s.State == StateParked {
		// A claim a crash interrupted: the data came from the slot its
		// parked name records.
		origin = parkedFrom(s.Info.User.Get(PropOwner), holder.ID)
	}
	for _, a := range refsFor(snap, s.Class, s.ID).live {
		if prev, from, ok := Predecessor(c, a, s.ID, snap); ok && prev.ID == holder.ID && from == origin {
			return a, true
		}
	}
	return Alloc{}, false
}

// inheritsAtReserve reports whether allocation a, which names ready slot id
// and has not started, is a sticky class's replacement whose Reserve is to
// claim its predecessor's data: recording it now would make the slot its
// own, fresh, before the claim.
func inheritsAtReserve(c Class, a Alloc, id string, snap *Snapshot) bool {
	if anyRunning([]Alloc{a}) {
		return false
	}
	if _, _, ok := Predecessor(c, a, id, snap); ok {
		return true
	}
	// Its predecessor ran on another node (maybe not looked up yet): its
	// Reserve waits for the copy, and records it then.
	_, local := localAlloc(snap, a.PreviousAllocation)
	if c.Sticky && c.Migrate.Enabled && a.PreviousAllocation == "" && c.Replicate.Enabled() {
		// It may replace a lost allocation Nomad does not name
		// (LostPredecessor): only its Reserve asks the servers, and it
		// records it then.
		return true
	}
	return c.Sticky && c.Migrate.Enabled && a.PreviousAllocation != "" && !local
}
