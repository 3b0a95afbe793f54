package model

import (
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// A loop in hooks that decides, acts and reads again (a Reserve's fence of
// one slot, its inheritance of a predecessor's data, a pull of a copy from
// another node) is a decider here and the driver there: the decider
// returns the loop's next Move, the driver (hooks/drive.go) does it and
// asks again with the Result. The decider does no I/O, so every sequence
// of steps a crash or a retry can make is a table test
// (reserve_move_test.go, pull_move_test.go).

// MoveKind is what a loop's driver does next.
type MoveKind int

const (
	// MoveRead: read the slot (Move.Slot's dataset) from ZFS again.
	MoveRead MoveKind = iota + 1
	// MoveAsk: fetch a fresh answer from the Nomad API (one non-blocking
	// query) of which allocations name this node's slots.
	MoveAsk
	// MoveLookup: look up allocation Move.Alloc.ID on the servers (an
	// allocation garbage-collected there: as the node last saw it end).
	MoveLookup
	// MoveLocal: ask the local client whether Move.Alloc runs here.
	MoveLocal
	// MoveReadPrev: read what the caller, Move.Alloc, may inherit: its
	// predecessor's slot and parked data (looking up a predecessor on
	// another node first).
	MoveReadPrev
	// MoveWait: pause Move.For, then ask again.
	MoveWait
	// MoveRun: carry out Move.Act under the slot's lock.
	MoveRun
	// MoveGrant: done; hand the slot out.
	MoveGrant
	// MoveFail: done; refuse (Move.Reason says why).
	MoveFail
	// MoveList: list Move.Dataset and what is below it (Result.Rows):
	// filesystems and snapshots, and volumes with Move.Volumes (a pull's
	// copy, which a peer's stream may have made one; its rows carry a
	// partial receive's resume token).
	MoveList
	// MoveReadSlot: read the slot Move.Slot.Dataset as it is now
	// (Result.Slot), leaving the Manager's view as it is.
	MoveReadSlot
	// MoveFetch: ask the sending node for Move.Fetch and receive it
	// (Result.Complete: the sender says the copy is whole; Result.Rows:
	// the copy as listed once an increment was received).
	MoveFetch
	// MoveDone: the loop has nothing more to do; Move.Wake: a copy may be
	// claimable now, or data has migrated (wake the pass, and the Reserves
	// waiting for a copy).
	MoveDone
	// MoveDecodeToken: decode the peer's resume token with this node's zfs
	// (Result.Resume).
	MoveDecodeToken
	// MoveLock, MoveUnlock: take (or try to take: Result.Locked) the lock
	// Move.Lock, or let it go; the driver lets every lock a loop took go
	// when it ends.
	MoveLock
	MoveUnlock
	// MoveReadParked: read the parked data Move.Dataset in one listing
	// (Result.Parked, nil for none; Result.Rows, the listing).
	MoveReadParked
)

var moveNames = [...]string{"?", "read", "ask", "lookup", "local", "read-prev", "wait", "run", "grant", "fail",
	"list", "read-slot", "fetch", "done", "decode-token", "lock", "unlock", "read-parked"}

func (k MoveKind) String() string {
	if k < 0 || int(k) >= len(moveNames) {
		return moveNames[0]
	}
	return moveNames[k]
}

// Act is what a MoveRun step carries out.
type Act int

const (
	// ActRelease releases the slot's data by its class's policy for
	// Move.Alloc's Move.Outcome (PlanRelease; in a sticky class it may
	// park it).
	ActRelease Act = iota + 1
	// ActRecord records Move.Alloc as the slot's holder (PlanRecord).
	ActRecord
	// ActClaim claims Move.Parked onto the ready slot for Move.Alloc
	// (PlanClaim).
	ActClaim
	// ActPark runs a pass's step on the predecessor's slot, Move.Dataset,
	// under its own lock (skipped if busy): it parks the data of a holder
	// that has ended a little before the watcher's pass would.
	ActPark
	// ActPlan runs Move.Plan, under the lock the loop holds.
	ActPlan
	// ActTakeover runs Move.Plan (PlanTakeReplica) on replica
	// Move.Dataset, under its lock and that of Move.Parked, the parked
	// data it becomes.
	ActTakeover
)

var actNames = [...]string{"?", "release", "record", "claim", "park", "plan", "takeover"}

func (a Act) String() string {
	if a < 0 || int(a) >= len(actNames) {
		return actNames[0]
	}
	return actNames[a]
}

// Awaits is what a MoveWait waits for: the driver says it in the log
// line an operator reads (docs/troubleshooting.md).
type Awaits int

const (
	// AwaitsRetry: the last move failed (Move.Retry); try again.
	AwaitsRetry Awaits = iota
	// AwaitsHolder: the previous holder is stopping.
	AwaitsHolder
	// AwaitsKept: the holder may still run (the servers or the local
	// client say so).
	AwaitsKept
	// AwaitsData: the predecessor's data, still in its slot or still
	// coming from its node.
	AwaitsData
	// AwaitsIncrement: a pull's pause before its next pre-copy increment,
	// which a Reserve's Move.Kick ends early.
	AwaitsIncrement
)

// Move is a loop's next step, as its decider returns it.
type Move struct {
	Kind MoveKind
	Act  Act
	// Slot is the slot the step reads or acts on, of Class; Dataset, for
	// ActPark, the predecessor's slot.
	Class   Class
	Slot    Slot
	Dataset string
	// Alloc is the allocation the step is about (the holder to look up or
	// release, the caller to record); Outcome how it ended.
	Alloc   Alloc
	Outcome string
	Parked  *Retained
	// For is how long a MoveWait pauses.
	For time.Duration
	// Stale: after this step the decider needs a fresh answer from Nomad
	// (a wait for a holder to end, a release: what Nomad said before it no
	// longer explains the slot).
	Stale bool
	// Awaits, on a MoveWait: what it waits for.
	Awaits Awaits
	// Wake, on a MoveWait: wake the watcher's pass first (it parks the
	// predecessor's data the Reserve waits for); on a MoveDone, see there.
	Wake bool
	// Kick, on a Reserve's MoveWait for a copy from another node: end the
	// pulls' pauses before their next increment (AwaitsIncrement) first.
	// Its predecessor has ended (Nomad runs a replacement's hooks once it
	// has), so the final increment may be ready now, not at the pull's
	// next tick, up to PullEvery later.
	Kick bool
	// Retry, on a MoveWait: the last step failed with it; the pause is
	// before trying again. On a pull's step after a failed fetch: the
	// fetch's error, the round's once the step is done.
	Retry error
	// Phase is where in a pull or a send the step is (the decider reads it
	// back from Result.Step); Attempt, on a pull's pauses, the rounds failed
	// in a row.
	Phase   Phase
	Attempt int
	// Plan is what an ActPlan runs; Warn, when set, says the plan's
	// failure is only logged, with this message, and the loop goes on.
	Plan *Plan
	Warn string
	// Fetch is what a MoveFetch asks for; Rows the data as listed, which
	// the step was decided on.
	Fetch   *Fetch
	Rows    []zfs.Dataset
	Volumes bool
	// Token is the resume token a MoveDecodeToken decodes.
	Token string
	// Lock is the lock a MoveLock takes (only tries, with Try) or a
	// MoveUnlock lets go: a copy's name, a slot's ID.
	Lock string
	Try  bool
	// Send, on a send's MoveDone: what is sent; on its other steps, the
	// send decided.
	Send *Send
	// Err, on a send's MoveFail: the error the transport answers with.
	Err error
	// Refused, on a MoveFail: handing the slot out could share or wipe
	// live data (else it is not ready).
	Refused bool
	Reason  string
}

// Result is what came of a step: what the driver feeds back to the
// decider.
type Result struct {
	// Step is the step done; zero before the first.
	Step Move
	Err  error
	// Alloc and Found: a MoveLookup's answer.
	Alloc Alloc
	Found bool
	// Running: a MoveLocal's answer.
	Running bool
	// Changed: an ActPark's pass changed the predecessor's slot.
	Changed bool
	// Inherit: a MoveReadPrev's reading; nil when the caller replaces no
	// predecessor on this slot. Dataset is the predecessor's slot.
	Inherit *InheritInput
	Dataset string
	// Rows: a MoveList's listing; Slot: a MoveReadSlot's or MoveRead's
	// reading; Complete: a MoveFetch's
	// "complete"; Resume: a MoveDecodeToken's; Parked: a MoveReadParked's
	// (with its listing in Rows); Locked: whether a MoveLock took its lock.
	Rows     []zfs.Dataset
	Slot     Slot
	Complete bool
	Resume   *Resume
	Parked   *Retained
	Locked   bool
}

// Phase is where in a pull or a send a step is: the decider reads it back
// from Result.Step to know what it asked for (pull_move.go, send_move.go).
type Phase int

// Since is what a loop has read since its last pause, which is all it may
// decide on: something foreign may appear below a slot, and an allocation
// may end, while it waits. The driver keeps it, by After alone.
type Since struct {
	// Read: the slot has been read (or acted on and read back).
	Read bool
	// Asked: Nomad has answered this loop, and no step since made the
	// answer stale.
	Asked bool
	// Parked: an ActPark has run (it is tried once a pause).
	Parked bool
}

// After is what the loop has read once step has been done, with err.
func (s Since) After(step Move, err error) Since {
	switch {
	case step.Kind == MoveWait:
		s = Since{Asked: s.Asked}
	case err != nil:
	case step.Kind == MoveRead:
		s.Read = true
	case step.Kind == MoveAsk:
		s.Asked = true
	case step.Kind == MoveRun && step.Act == ActPark:
		s.Parked = true
	case step.Kind == MoveRun:
		s.Read = true // acted on, and read back
	}
	if step.Stale || (step.Kind == MoveAsk && err != nil) {
		s.Asked = false
	}
	return s
}
