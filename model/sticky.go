package model

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Sticky data: a class with Sticky set hands an allocation's data to the
// allocation Nomad replaces it with, on this node, without a copy.
//
//	held by A ──A ended, replaced──▶ parked (<class>/parked-<A>-<slot>), fresh slot in its place
//	parked ──B (B.PreviousAllocation = A) reserves slot Y──▶ renamed onto Y, held by B
//	parked ──no replacement can come, or past StickyWait──▶ the class's release policy
//
// A replacement placed on A's own slot inherits it in place (StepRecord,
// ReserveInherit): no rename at all. Nomad links the two allocations both
// ways (B.PreviousAllocation, and A.NextAllocation once B exists), for a
// destructive update, `nomad alloc stop`, a reschedule and a drain alike.

// ParkedName is where slot id's data goes when holder parks it: one
// dataset per holder and slot, beside the slots.
func (c *Config) ParkedName(class, holder, id string) string {
	return c.ClassDataset(class) + "/parked-" + holder + "-" + id
}

// parkedPrefix starts the name of every parked dataset below its class.
const parkedPrefix = "parked-"

// Parks reports whether releasing slot s of class c for holder, which
// ended with outcome, parks the data for a replacement instead: the class
// is sticky, the slot still configured, and Nomad has replaced the holder
// or may still reschedule it (it failed or was lost, and is not stopped),
// or may have replaced it without naming it (awaitsUnlinked).
// An operator's release, a holder gone from Nomad (no record of a
// replacement) and a completed one that nothing replaces get the policy.
//
// So does data that the replacement, as snap shows it, will not claim
// (awaitsClaim): it asks no request that pairs with s, or it has the
// slot of that request recorded as its own already (it was placed while
// the class was not sticky yet, or its Reserve of it gave up waiting).
// The data gets the policy at once rather than parked data that only
// PlanParked's next look releases. Only the replacement's slot for s's
// request counts, as slot gives it (as last read), and only when
// everything else calls for parking.
func (c Class) Parks(s Slot, holder Alloc, outcome string, snap *Snapshot, slot func(id string) (Slot, bool)) bool {
	if !c.Sticky || s.Orphan {
		return false
	}
	switch outcome {
	case OutcomeOperator, OutcomeRetired, OutcomeGone:
		return false
	}
	if holder.NextAllocation != "" {
		next, ok := findAlloc(snap, holder.NextAllocation)
		if !ok {
			return true // not seen yet: its Reserve, when it comes, decides
		}
		_, awaits := c.awaitsClaim(holder, next, s.ID, slot)
		return awaits
	}
	if outcome == OutcomeLost && c.awaitsUnlinked(holder) {
		return true
	}
	return (outcome == OutcomeFailed || outcome == OutcomeLost) && !holder.ServerTerminal()
}

// awaitsUnlinked reports whether holder's data, in class c, waits for a
// replacement Nomad does not name: the servers stopped holder as lost
// with its node (LostByServers) and name no replacement, in a sticky class
// that migrates and keeps replicas. Nomad 1.6.2 places the replacement B
// of such an allocation under stop_after_client_disconnect without
// linking the two (replica_lost.go); B's Reserve pairs itself with it
// (LostPredecessor), and once this node, back, has ended it, waits for
// its final data from here rather than a replica (docs/node-loss.md,
// finding (c)). Parked, that data is sent to B's node (transfer.Decide's
// unlinked case) and kept until B's node confirms the copy, or
// sticky_wait; then aside (KeepsLost), never destroyed unconfirmed.
func (c Class) awaitsUnlinked(holder Alloc) bool {
	return c.Sticky && c.Migrate.Enabled && c.KeepsLost(OutcomeLost) && holder.LostByServers && holder.NextAllocation == ""
}

// awaitsClaim reports whether next, the replacement of prev, may still
// claim the data of prev's slot from: it asks the same request
// (successorSlot), and its slot for it, as slot gives it, is not recorded
// as its own. why says what it found otherwise.
func (c Class) awaitsClaim(prev, next Alloc, from string, slot func(id string) (Slot, bool)) (why string, awaits bool) {
	to, ok := successorSlot(c, prev, next, from)
	if !ok {
		return fmt.Sprintf("its replacement %s asks no device that pairs with %s", short(next.ID), from), false
	}
	if s, ok := slot(to); ok {
		if _, started := recordedOn([]Slot{s}, next.ID); started {
			return fmt.Sprintf("its replacement %s started on %s without it", short(next.ID), to), false
		}
	}
	return "", true
}

// recordedOn finds the slot among slots that records allocation id as its
// holder (held or releasing): id started on it without inheriting.
func recordedOn(slots []Slot, id string) (Slot, bool) {
	for _, s := range slots {
		if s.Exists && s.Holder == id && (s.State == StateHeld || s.State == StateReleasing) {
			return s, true
		}
	}
	return Slot{}, false
}

// Which slot's data a replacement inherits when its predecessor held
// several slots of the class is decided by request. A request is one
// device a task asks of the class, named by the task and the position
// among that device's IDs ("main" 1st, "side" 1st): it is the same in the
// predecessor and in the replacement, whichever slots Nomad gave each
// (their order differs from one placement to the next). The data of the
// predecessor's slot for a request goes to the replacement's slot for the
// same request, and nowhere else:
//
//   - by a claim (parked, renamed onto the replacement's slot), or in place
//     when Nomad gave both the same slot (successorOn);
//   - a request the predecessor holds no slot of (its Reserve of it failed,
//     or never ran) hands nothing over: the replacement's slot for it is as
//     the class makes a slot; its other requests inherit as usual;
//   - the data goes by the class's policy, not to the replacement, once the
//     replacement has that request's slot recorded as its own without it,
//     or asks no such request (a task renamed, fewer devices asked). What
//     the replacement's other requests hold, claimed or fresh, says nothing
//     about this one: a Reserve takes one slot at a time, and each task of
//     an allocation reserves its devices in a call of its own.
//
// Inheritance is one step, from PreviousAllocation, and each step is read
// from what the predecessor held, started or not: A (main: pg-1, side:
// pg-2) fails in its device hook after only side's slot was recorded; B
// (main: pg-2, side: pg-1) gets nothing for main and A's pg-2 data for
// side; C (main: pg-3, side: pg-2) gets B's pg-2 for main and B's pg-1 (A's
// side data) for side. Data parked for a replacement that ended without
// claiming it is released (PlanParked), not handed to that replacement's
// own replacement.

// request is one device a task asks of a class: the task's name, and the
// position among that device's IDs.
type request struct {
	task string
	pos  int
}

// requestOf finds the request through which a names slot id of class c.
func requestOf(c Class, a Alloc, id string) (request, bool) {
	for _, d := range a.Devices {
		if c.names(d) {
			if i := slices.Index(d.IDs, id); i >= 0 {
				return request{task: d.Task, pos: i}, true
			}
		}
	}
	return request{}, false
}

// slotFor is a's slot of class c for request r.
func slotFor(c Class, a Alloc, r request) (string, bool) {
	for _, d := range a.Devices {
		if c.names(d) && d.Task == r.task && r.pos < len(d.IDs) {
			return d.IDs[r.pos], true
		}
	}
	return "", false
}

// names reports whether device d is of class c.
func (c Class) names(d Device) bool {
	return d.Vendor == Vendor && d.Type == DeviceType && d.Name == c.Name
}

// Predecessor finds whose data a Reserve of slot id by caller inherits:
// the allocation caller replaces (its PreviousAllocation), as snap shows
// it, and that allocation's slot for the same request (the same task's
// device of the class, at the same position). ok is false when the class
// is not sticky, caller replaces nothing, or snap does not show the
// predecessor holding a slot of the class for that request.
func Predecessor(c Class, caller Alloc, id string, snap *Snapshot) (prev Alloc, prevSlot string, ok bool) {
	if !c.Sticky || caller.PreviousAllocation == "" {
		return prev, "", false
	}
	prev, seen := findAlloc(snap, caller.PreviousAllocation)
	if !seen {
		return prev, "", false
	}
	r, ok := requestOf(c, caller, id)
	if !ok {
		return prev, "", false
	}
	prevSlot, ok = slotFor(c, prev, r)
	return prev, prevSlot, ok
}

// successorSlot is the other side of Predecessor: the slot of next (the
// replacement of prev) whose request is the one prev held slot from
// through. ok is false when next asks no such request, or prev does not
// name from.
func successorSlot(c Class, prev, next Alloc, from string) (string, bool) {
	r, ok := requestOf(c, prev, from)
	if !ok {
		return "", false
	}
	return slotFor(c, next, r)
}

// InheritKind is what a Reserve does about its predecessor's data.
type InheritKind int

const (
	// InheritNone: nothing to inherit; the slot is handed out as it is.
	InheritNone InheritKind = iota
	// InheritClaim: the predecessor's data is parked; rename it onto the
	// slot before the grant.
	InheritClaim
	// InheritWait: the predecessor's data is still in its slot (the
	// predecessor stops, or has ended and is not parked yet), or still
	// coming from its node: wait, bounded, and decide again.
	InheritWait
	// InheritFail: the data did not come from the predecessor's node
	// within the class's migrate timeout, and the class says to fail the
	// start (MigrateFail).
	InheritFail
	// InheritTakeover: the predecessor was lost with its node and has
	// stopped by Nomad's rules, and this node holds its newest replica:
	// run Plan (PlanTakeReplica), which makes it the predecessor's parked
	// data, and decide again (the claim follows).
	InheritTakeover
)

// InheritDecision is DecideInherit's answer.
type InheritDecision struct {
	Kind   InheritKind
	Reason string
	// Plan is InheritTakeover's.
	Plan *Plan
}

// InheritInput is what a Reserve of ready slot Slot by Caller, the
// replacement of Prev, decides its inheritance from.
type InheritInput struct {
	Class  Class
	Slot   Slot
	Caller Alloc
	Prev   Alloc
	// PrevSlot is the predecessor's slot as last read, when it is on this
	// node (nil otherwise); Parked is its data under ParkedName, read just
	// now (nil when there is none): parked here, or a copy received from
	// the predecessor's node.
	PrevSlot *Slot
	Parked   *Retained
	// NodeID is this node's; Waited how long this Reserve has waited.
	NodeID string
	Waited time.Duration
	// Takeover is what was read for a takeover of a replica (issue 30)
	// when the predecessor ran on another node, the class keeps replicas
	// and Nomad says the predecessor is lost or unknown; nil otherwise.
	Takeover *TakeoverInput
}

// DecideInherit decides a Reserve of a ready slot by a sticky class's
// replacement.
func DecideInherit(in InheritInput) InheritDecision {
	s, prev, parked, prevSlot := in.Slot, in.Prev, in.Parked, in.PrevSlot
	remote := prev.NodeID != "" && in.NodeID != "" && prev.NodeID != in.NodeID
	switch {
	case parked != nil && parked.Holder == prev.ID && ranAgain(prev, prevSlot, *parked):
		return InheritDecision{Kind: InheritWait, Reason: fmt.Sprintf(
			"%s ran again on %s after its data was parked as %s; waiting for its newer data there to be parked",
			short(prev.ID), prevSlot.ID, parked.Dataset)}
	case parked != nil && parked.Holder == prev.ID && len(parked.Strangers) > 0 && parked.State == StateReceiving:
		// A copy from prev's node that came with datasets below it (a
		// replication stream) is refused and left for the operator
		// (CopyNotOneFilesystem); the data is still on that node, so the
		// class's on_timeout decides, as when no copy comes.
		return in.waitForCopy(fmt.Sprintf("parked data %s is not handed over: %s",
			parked.Dataset, strangersAdvice(zfsParent2(parked.Dataset), parked.Dataset, parked.Strangers)))
	case parked != nil && parked.Holder == prev.ID && len(parked.Strangers) > 0:
		return InheritDecision{Kind: InheritNone, Reason: fmt.Sprintf("parked data %s is not handed over: %s",
			parked.Dataset, strangersAdvice(zfsParent2(parked.Dataset), parked.Dataset, parked.Strangers))}
	case parked != nil && parked.Holder == prev.ID && parked.State == StateReceiving:
		return in.waitForCopy(fmt.Sprintf("the data of %s, which %s replaces, is still coming from node %s",
			short(prev.ID), short(in.Caller.ID), short(prev.NodeID)))
	case parked != nil && parked.Holder == prev.ID:
		// Parked, or renamed aside by a park a crash interrupted (its
		// state not yet rewritten): the claim finishes either.
		return InheritDecision{Kind: InheritClaim}
	case remote && in.Class.Migrate.Enabled && in.Takeover.lostOrUnknown():
		return in.decideTakeover()
	case remote && in.Class.Migrate.Enabled:
		return in.waitForCopy(fmt.Sprintf("the data of %s, which %s replaces, is to come from node %s; no copy has arrived yet",
			short(prev.ID), short(in.Caller.ID), short(prev.NodeID)))
	case remote:
		return InheritDecision{Kind: InheritNone}
	case prevSlot != nil && prevSlot.ID != s.ID && prevSlot.Exists && prevSlot.Holder == prev.ID && len(prevSlot.Strangers) > 0:
		return InheritDecision{Kind: InheritNone, Reason: fmt.Sprintf("the data of %s stays in %s: %s",
			short(prev.ID), prevSlot.ID, prevSlot.Reason)}
	case prevSlot != nil && prevSlot.ID != s.ID && prevSlot.Exists && prevSlot.Holder == prev.ID &&
		(prevSlot.State == StateHeld || prevSlot.State == StateReleasing || prevSlot.State == StateParked):
		return InheritDecision{Kind: InheritWait, Reason: fmt.Sprintf(
			"the data of %s, which %s replaces, is still in %s; waiting for it to be parked", short(prev.ID), short(in.Caller.ID), prevSlot.ID)}
	}
	return InheritDecision{Kind: InheritNone}
}

// ranAgain reports whether prev was recorded on the slot its parked data
// came from after the park: a park leaves a fresh slot there, holding
// nothing, so prev holding it means prev ran again (the servers' state
// restored from before its replacement) and the slot's data is newer than
// the parked data. planPark releases the older one when it parks the slot.
func ranAgain(prev Alloc, prevSlot *Slot, parked Retained) bool {
	return prevSlot != nil && prevSlot.Exists && prevSlot.ID == parkedOrigin(parked) && prevSlot.Holder == prev.ID &&
		(prevSlot.State == StateHeld || prevSlot.State == StateReleasing)
}

// waitForCopy waits for a copy from the predecessor's node, until the
// class's migrate timeout; then the class's OnTimeout says what happens.
func (in InheritInput) waitForCopy(why string) InheritDecision {
	m := in.Class.Migrate
	if in.Waited < m.Timeout {
		return InheritDecision{Kind: InheritWait, Reason: why}
	}
	if m.OnTimeout == MigrateStartEmpty {
		return InheritDecision{Kind: InheritNone, Reason: fmt.Sprintf(
			"%s, and migrate timeout %s has passed: starting empty (on_timeout = %q); its data stays on its node", why, m.Timeout, m.OnTimeout)}
	}
	return InheritDecision{Kind: InheritFail, Reason: fmt.Sprintf(
		"%s, and migrate timeout %s has passed: failing the start (on_timeout = %q), so that Nomad restarts the task", why, m.Timeout, m.OnTimeout)}
}

// zfsParent2 is the dataset two levels up: a parked dataset's parent
// dataset of the plugin (<parent>/<class>/parked-...).
func zfsParent2(name string) string {
	for range 2 {
		if i := strings.LastIndexByte(name, '/'); i > 0 {
			name = name[:i]
		}
	}
	return name
}

// ParkedStepKind is what becomes of parked data.
type ParkedStepKind int

const (
	// ParkedKeep: a replacement may still claim it.
	ParkedKeep ParkedStepKind = iota
	// ParkedRelease: none will; the class's release policy applies.
	ParkedRelease
	// ParkedLookup: the allocation Lookup names is not in the node's
	// list; ask Nomad for it and decide again with the answer.
	ParkedLookup
	// ParkedFinish: a crash came between the park's rename and the rewrite
	// of the data's own marks; finish them (PlanFinishParked).
	ParkedFinish
	// ParkedRetain: none will, and it may hold the only copy of writes
	// its replacement does not have; kept aside as retained data whatever
	// the class's policy (PlanRetainParked).
	ParkedRetain
)

// ParkedStep is PlanParked's answer.
type ParkedStep struct {
	Kind ParkedStepKind
	// Lookup is the allocation to look up for ParkedLookup.
	Lookup string
	Reason string
}

// PlanParked decides what becomes of parked data p of class c, given this
// node's allocations (snap), the class's slots as last read, the answers
// of earlier lookups (looked: ID → the allocation, absent from the map
// when not looked up, a zero Alloc when Nomad has none), and now.
func PlanParked(c Class, p Retained, slots []Slot, snap *Snapshot, looked map[string]Alloc, now time.Time) ParkedStep {
	release := func(why string, args ...any) ParkedStep {
		return ParkedStep{Kind: ParkedRelease, Reason: fmt.Sprintf(why, args...)}
	}
	switch {
	case p.State == StateReleasing || p.State == StateReplica:
		// A park, or a takeover of a replica (PlanTakeReplica), that a
		// crash interrupted after its rename.
		return ParkedStep{Kind: ParkedFinish}
	case !c.Sticky:
		return release("the class is no longer sticky")
	case !p.Expires.IsZero() && now.After(p.Expires):
		return release("no replacement claimed it within sticky_wait (%s)", c.StickyWait)
	case snap == nil:
		return ParkedStep{Kind: ParkedKeep}
	}
	find := func(id string) (Alloc, bool, bool) {
		if a, ok := findAlloc(snap, id); ok {
			return a, true, true
		}
		if a, ok := looked[id]; ok {
			return a, a.ID != "", true
		}
		return Alloc{}, false, false
	}
	prev, found, known := find(p.Holder)
	switch {
	case !known:
		return ParkedStep{Kind: ParkedLookup, Lookup: p.Holder}
	case !found:
		return release("%s is gone from Nomad", short(p.Holder))
	case c.awaitsUnlinked(prev) && p.Migrated():
		return release("the replacement Nomad does not name for %s (lost with its node) holds its final copy", short(prev.ID))
	case c.awaitsUnlinked(prev):
		// Here, A's own data, which B's node pulls; on B's node, the copy
		// B's Reserve claims. sticky_wait bounds both (above).
		return ParkedStep{Kind: ParkedKeep, Reason: "waiting for the replacement Nomad does not name for " + short(prev.ID) +
			" (stopped as lost with its node; stop_after_client_disconnect) to copy or claim it, within sticky_wait"}
	case prev.NextAllocation == "" && prev.ServerTerminal():
		return release("%s was stopped and nothing replaces it", short(prev.ID))
	case prev.NextAllocation == "":
		return ParkedStep{Kind: ParkedKeep, Reason: "waiting for Nomad to reschedule " + short(prev.ID)}
	}
	next, found, known := find(prev.NextAllocation)
	switch {
	case !known:
		return ParkedStep{Kind: ParkedLookup, Lookup: prev.NextAllocation}
	case !found:
		return release("its replacement %s is gone from Nomad", short(prev.NextAllocation))
	case snap.NodeID != "" && next.NodeID != "" && next.NodeID != snap.NodeID && !c.Migrate.Enabled:
		return release("its replacement %s runs on another node", short(next.ID))
	case next.ClientTerminal():
		return release("its replacement %s ended without claiming it", short(next.ID))
	case p.Migrated():
		return release("its replacement %s's node holds its final copy", short(next.ID))
	case c.Replicate.Enabled() && snap.NodeID != "" && next.NodeID != "" && next.NodeID != snap.NodeID && anyRunning([]Alloc{next}) &&
		!p.FinalSent():
		// The replacement started on its node without this data's final
		// snapshot: it took a replica over (A was lost with this node,
		// which is back), or started as on_timeout said. Its node pulls
		// no more (Migration.Settled), and this data holds what A wrote
		// after the replica: never sent over the replacement's data,
		// never destroyed by a policy, but kept aside for the operator.
		return ParkedStep{Kind: ParkedRetain, Reason: fmt.Sprintf("its replacement %s started on node %s without it (a replica taken "+
			"over, or on_timeout): it may hold writes that replacement has not; kept aside for the operator", short(next.ID), short(next.NodeID))}
	case snap.NodeID != "" && next.NodeID != "" && next.NodeID != snap.NodeID:
		return ParkedStep{Kind: ParkedKeep, Reason: fmt.Sprintf("waiting for node %s, where %s runs, to copy it", short(next.NodeID), short(next.ID))}
	}
	if from := parkedOrigin(p); from != "" {
		if why, awaits := c.awaitsClaim(prev, next, from, slotIn(slots)); !awaits {
			return release("%s", why)
		}
	}
	return ParkedStep{Kind: ParkedKeep, Reason: "waiting for " + short(next.ID) + " to start"}
}

// parkedOrigin is the slot parked data p came from, as its parked name
// records it: its dataset's name, or at a slot's name (a claim a crash
// interrupted) its owner mark; "" when neither does.
func parkedOrigin(p Retained) string {
	if id := parkedFrom(p.Dataset, p.Holder); id != "" {
		return id
	}
	return parkedFrom(p.Info.User.Get(PropOwner), p.Holder)
}

// slotIn looks a slot up by ID among slots.
func slotIn(slots []Slot) func(id string) (Slot, bool) {
	return func(id string) (Slot, bool) {
		for _, s := range slots {
			if s.ID == id {
				return s, true
			}
		}
		return Slot{}, false
	}
}

// parkedFrom is the slot ID a parked dataset's name (ParkedName) records
// for holder, "" when name is not holder's parked data.
func parkedFrom(name, holder string) string {
	id, ok := strings.CutPrefix(name[strings.LastIndexByte(name, '/')+1:], parkedPrefix+holder+"-")
	if !ok {
		return ""
	}
	return id
}
