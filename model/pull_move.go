package model

import (
	"errors"
	"fmt"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// A pull (the receiving side of a migration) is a loop on the driver too
// (move.go): DecidePullMove returns its next step, hooks/drive.go does it
// under the copy's lock, lets the lock go for each pause, and asks again.
// Everything a pull resumes from is in ZFS: the copy's newest snapshot
// (the base of the next increment) and a partial receive's resume token.

// PullEvery paces the pre-copy increments while the allocation the copy is
// of still runs: each brings what it wrote since the last, so the final
// one, after it ends, is small.
const PullEvery = 10 * time.Second

// BusyWait is the pause after a sending node said it is busy with the
// data (parking it as its allocation ended): a second or two.
const BusyWait = time.Second

// The failures of a fetch a pull decides on: the transport classifies
// each failure into one of these (transfer.Classify; transfer.ErrPeerBusy
// is ErrPeerBusy, and so on).
var (
	// ErrPeerBusy: the sender is at its limit of concurrent sends, busy
	// with the data, or could not check the request now; ask again later.
	ErrPeerBusy = errors.New("the peer cannot send now")
	// ErrResumeRefused: the sender will not resume from the token (it does
	// not match what it sends now, or zfs cannot use it). The receiver
	// aborts its partial receive and asks again without one.
	ErrResumeRefused = errors.New("the peer refused the resume token")
	// ErrStartOver: the copy no longer lines up with the sender's data,
	// or what came is not what the sender named: dropped whole.
	ErrStartOver = errors.New("the copy no longer lines up with the sender's")
	// ErrNotFilesystem: the sender's stream is not of a filesystem (a
	// volume's): the copy is refused.
	ErrNotFilesystem = errors.New("the stream is not of a filesystem")
)

// A pull's phases.
const (
	// PullLook, PullLookSlot: the first look, before anything is asked:
	// is the copy claimable already (parked), or does the replacement hold
	// its slot? Then nothing is pulled, and the pull ends quietly.
	PullLook Phase = iota + 1
	PullLookSlot
	// PullStart: the pause, of no time, that starts the rounds.
	PullStart
	// PullList, PullSettled, PullFetch: a round lists the copy (with a
	// partial receive's resume token), reads the replacement's slot when
	// there is no copy, and asks the sending node.
	PullList
	PullSettled
	PullFetch
	// PullRelist, PullDropOlder: after an increment, the copy as it is
	// now (listed only when the fetch returned no listing of its own), and
	// its older snapshots dropped (after a pre-copy's only).
	PullRelist
	PullDropOlder
	// PullAbort: a resume refused; the partial receive discarded.
	PullAbort
	// PullRecount, PullStartOver: the copy no longer lines up with the
	// sender; listed again and dropped, so that the next round starts
	// over with a whole copy.
	PullRecount
	PullStartOver
	// PullDropRefused: a copy refused whole (Move.Reason) is dropped.
	PullDropRefused
	// PullReceived: the whole copy is marked parked: claimable.
	PullReceived
	// PullNext, PullBusy, PullRetry: the pause after a round: the next
	// increment's (no time after the final one, for the sender's
	// "complete"), after the sender said it is busy, after a failure.
	PullNext
	PullBusy
	PullRetry
)

// A send's phases (send_move.go).
const (
	// SendToken: the peer's resume token decoded.
	SendToken Phase = iota + 100
	// SendLockParked, SendReadParked: the parked data, under its lock;
	// SendUnlockParked: not A's final data, so its lock let go.
	SendLockParked
	SendReadParked
	SendUnlockParked
	// SendLockSlot, SendReadSlot: A's slot, under its lock (only tried).
	SendLockSlot
	SendReadSlot
	// SendList: the data listed, and the send decided on it.
	SendList
	// SendDrop: the migration's snapshots no stream needs dropped (a
	// failure only logged).
	SendDrop
	// SendMigrated: the peer holds the final copy; recorded on the data.
	SendMigrated
	// SendTake, SendRelist: the snapshot sent taken, and its guid read.
	SendTake
	SendRelist
)

// A replica send's phases (replica_send_move.go).
const (
	// ReplicaSendToken: the peer's resume token decoded.
	ReplicaSendToken Phase = iota + 200
	// ReplicaSendLockSlot, ReplicaSendReadSlot: the held slot, under its lock
	// (only tried).
	ReplicaSendLockSlot
	ReplicaSendReadSlot
	// ReplicaSendList: the slot listed (its snapshots and bookmarks), and the
	// send decided on it.
	ReplicaSendList
	// ReplicaSendDrop: the bases no pull needs dropped (a failure only logged).
	ReplicaSendDrop
	// ReplicaSendTake, ReplicaSendRelist: the snapshot sent taken and bookmarked,
	// and its guid read.
	ReplicaSendTake
	ReplicaSendRelist
)

var phaseNames = map[Phase]string{PullLook: "look", PullLookSlot: "look-slot", PullStart: "start", PullList: "list",
	PullSettled: "settled", PullFetch: "fetch", PullRelist: "relist", PullDropOlder: "drop-older",
	PullAbort: "abort", PullRecount: "recount", PullStartOver: "start-over", PullDropRefused: "drop-refused",
	PullReceived: "received", PullNext: "next", PullBusy: "busy", PullRetry: "retry",
	SendToken: "token", SendLockParked: "lock-parked", SendReadParked: "read-parked", SendUnlockParked: "unlock-parked",
	SendLockSlot: "lock-slot", SendReadSlot: "read-slot", SendList: "list", SendDrop: "drop", SendMigrated: "migrated",
	SendTake: "take", SendRelist: "relist",
	ReplicaSendToken: "token", ReplicaSendLockSlot: "lock-slot", ReplicaSendReadSlot: "read-slot", ReplicaSendList: "list", ReplicaSendDrop: "drop",
	ReplicaSendTake: "take", ReplicaSendRelist: "relist",
	ReplicaPullList: "list", ReplicaPullFetch: "fetch", ReplicaPullRelist: "relist",
	ReplicaPullDropOlder: "drop-older", ReplicaPullAbort: "abort", ReplicaPullRecount: "recount",
	ReplicaPullStartOver: "start-over", ReplicaPullDropRefused: "drop-refused", ReplicaPullDrop: "drop",
	ReplicaPullListBeside: "list-beside", ReplicaPullRelistBeside: "relist-beside", ReplicaPullSwap: "swap",
	ReplicaPullRebase: "rebase", ReplicaPullRollback: "rollback", ReplicaPullDiscard: "discard",
	ReplicaPullUnverified: "unverified", ReplicaPullSwapResumed: "swap-resumed"}

func (p Phase) String() string {
	if n, ok := phaseNames[p]; ok {
		return n
	}
	return "?"
}

// Fetch is one request of a pull: what to ask the sending node for, and
// where to receive it (Target, with Props set and Exclude not taken).
type Fetch struct {
	// Replica: a replica's pull (transfer.KindReplica): no Replacement.
	// Beside, with its BesideProps and BesideExclude, is where a whole
	// stream answering a request from a base goes (transfer.Into.Beside);
	// a replica's first snapshot is asked for with Target beside already.
	Replica                  bool
	Beside                   string
	BesideProps              map[string]string
	BesideExclude            []string
	Alloc, Replacement, Slot string
	HaveGUID                 uint64
	ResumeToken              string
	Target                   string
	Props                    map[string]string
	Exclude                  []string
	// At is when it was asked: the copy's marks, then and once received.
	At time.Time
}

// PullLoop is what a pull decides its next step from (DecidePullMove).
type PullLoop struct {
	Mig   Migration
	Class Class
	// SlotDataset is the replacement's slot, read to see whether it holds
	// it already (Migration.Settled).
	SlotDataset string
	// Now is the time of the decision.
	Now time.Time
	// Started: the first look is behind the pull; Failures, the rounds
	// failed in a row since (a busy sender is not one). Both kept by After.
	Started  bool
	Failures int
	// Marked: an earlier pull of this copy, in this process, ended on its
	// parked mark (the MoveDone of phase PullReceived): the copy is
	// claimable, and the Reserve that claims it reads it itself.
	Marked bool
	Last   Result
}

// After is the loop once last has been done: Last, and what a pause
// (the first, then after each round) says of the pull; an increment
// received ends the failures in a row.
func (p PullLoop) After(last Result) PullLoop {
	p.Last = last
	switch {
	case last.Step.Kind == MoveWait:
		p.Started, p.Failures = true, last.Step.Attempt
	case last.Step.Kind == MoveFetch && last.Err == nil:
		p.Failures = 0
	}
	return p
}

// DecidePullMove is a pull as a loop. Its rules, which the step sequences
// of pull_move_test.go show:
//
//   - A pull whose copy is claimable already, or whose replacement holds
//     its slot, ends at its first look, quietly (a pass starts a pull for
//     each migration until Nomad shows the replacement running); one
//     whose copy a pull of this process marked parked ends without
//     looking (Marked): the claim does not wait behind its listing.
//   - Each round works on one listing of the copy, under its lock: a round
//     that finds it parked (a pass before a restart marked it), or finds
//     none and the replacement on its slot, ends the pull. After an
//     increment, it goes on with the listing the fetch verified the
//     snapshot on (transfer.Result.Rows), not a listing of its own.
//   - Once the copy holds the final snapshot, its older pre-copy snapshots
//     are left to the claim, and the request for "complete" carries no
//     resume token.
//   - An interrupted receive is resumed from its token, read with the
//     round's listing (zfs.Dataset.ResumeToken); a token the sender
//     refuses is discarded, and the next round starts from the last whole
//     snapshot. A copy that no longer lines up with the sender's data, or
//     whose snapshot is not the one the sender named, is dropped whole.
//   - A copy is made claimable (parked) only on the sender's "complete"
//     over a copy whose newest snapshot is the final one, and only once
//     it is one filesystem within the class's limits; otherwise it is
//     refused, and the pull ends for good (a volume's copy, or one too
//     large, dropped; one with datasets below it left to the operator).
//   - Between rounds: the pre-copy's pace, a second for a busy sender, a
//     growing pause after a failure; after the final increment, none: the
//     request for "complete" follows at once, on the same listing. Only
//     the pace is cut short by a Reserve that waits for a copy
//     (AwaitsIncrement, Move.Kick); a back-off is not.
func DecidePullMove(p PullLoop) Move {
	last := p.Last
	if !p.Started {
		return p.look()
	}
	switch last.Step.Phase {
	case 0, PullStart, PullNext, PullBusy, PullRetry:
		return p.move(Move{Kind: MoveList, Phase: PullList})
	case PullList:
		have, state := NewestCopied(p.Mig.ParkedName, last.Rows)
		switch {
		case last.Err != nil && !errors.Is(last.Err, zfs.ErrNotExist):
			return p.failed(last.Err)
		case state == StateParked:
			return Move{Kind: MoveDone, Wake: true} // final already (a pass before a restart marked it)
		case len(last.Rows) == 0:
			// No copy: the replacement may have claimed it (under this
			// lock) or started empty.
			return p.move(Move{Kind: MoveReadSlot, Phase: PullSettled})
		case HoldsFinal(p.Mig.ParkedName, last.Rows):
			// The request is for "complete", which the sender answers
			// from the base alone (DecideSend): no resume token.
			return p.fetch(last.Rows, "")
		case have == 0 && resumeToken(p.Mig.ParkedName, last.Rows) == "":
			return p.dropBare(last.Rows)
		}
		return p.fetch(last.Rows, resumeToken(p.Mig.ParkedName, last.Rows))
	case PullSettled:
		switch {
		case last.Err != nil:
			return p.failed(last.Err)
		case p.Mig.Settled(last.Slot):
			return Move{Kind: MoveDone, Wake: true}
		}
		return p.fetch(nil, "")
	case PullFetch:
		return p.fetched()
	case PullRelist:
		if last.Err != nil {
			return p.failed(last.Err)
		}
		return p.received(last.Rows)
	case PullDropOlder:
		if last.Err != nil {
			return p.failed(last.Err)
		}
		return p.increment(last.Step.Rows)
	case PullAbort, PullStartOver:
		if last.Err != nil {
			return p.failed(last.Err)
		}
		return p.failed(last.Step.Retry)
	case PullRecount:
		if last.Err != nil {
			return p.failed(last.Err)
		}
		plan := PlanDropCopy(p.Mig.ParkedName, last.Rows)
		return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: PullStartOver, Plan: &plan, Retry: last.Step.Retry})
	case PullDropRefused:
		if last.Err != nil {
			return p.failed(fmt.Errorf("%s; dropping it: %w", last.Step.Reason, last.Err))
		}
		return Move{Kind: MoveFail, Refused: true, Reason: last.Step.Reason}
	case PullReceived:
		// Whether or not the mark was written: a Reserve waiting for the
		// copy looks again, and so does a pass. Written, it is the end of
		// the copy's pulls in this process (Marked).
		if last.Err != nil {
			return Move{Kind: MoveDone, Wake: true}
		}
		return Move{Kind: MoveDone, Wake: true, Phase: PullReceived}
	}
	return p.failed(fmt.Errorf("pull: no move after %s", last.Step.Kind))
}

// look is the first look: nothing to pull when the copy is parked
// already or the replacement holds its slot; a failure to read either is
// no reason not to pull.
func (p PullLoop) look() Move {
	last := p.Last
	start := Move{Kind: MoveWait, Phase: PullStart}
	switch last.Step.Phase {
	case 0:
		if p.Marked {
			return Move{Kind: MoveDone}
		}
		return p.move(Move{Kind: MoveList, Phase: PullLook})
	case PullLook:
		if last.Err != nil && !errors.Is(last.Err, zfs.ErrNotExist) {
			return start
		}
		if _, state := NewestCopied(p.Mig.ParkedName, last.Rows); state == StateParked {
			return Move{Kind: MoveDone} // claimable already; the Reserve claims it from there
		}
		return p.move(Move{Kind: MoveReadSlot, Phase: PullLookSlot})
	case PullLookSlot:
		if last.Err == nil && p.Mig.Settled(last.Slot) {
			return Move{Kind: MoveDone} // claimed or started empty; Nomad does not show it running yet
		}
	}
	return start
}

// move fills in what every step of the pull names: the copy (listed with
// volumes), the replacement's slot.
func (p PullLoop) move(mv Move) Move {
	mv.Dataset, mv.Volumes = p.Mig.ParkedName, true
	mv.Class = p.Class
	mv.Slot = Slot{Dataset: p.SlotDataset}
	return mv
}

// resumeToken is the partial receive's token of copy name, as listed
// (rows), "" for none.
func resumeToken(name string, rows []zfs.Dataset) string {
	for _, r := range rows {
		if r.Name == name {
			return r.ResumeToken
		}
	}
	return ""
}

// dropBare drops the copy, as listed (rows), when it holds no snapshot
// of the transfer's and no partial receive: a drop a crash cut between
// its snapshots and its filesystem (PlanDropCopy), or a lying sender's
// stream under a name of its own. No increment has a base there, and a
// whole stream would meet it ("destination exists") every round, for
// good (the replica's pull met it: seed 9765364).
func (p PullLoop) dropBare(rows []zfs.Dataset) Move {
	plan := PlanDropCopy(p.Mig.ParkedName, rows)
	why := fmt.Errorf("%s holds no snapshot of the transfer's to pull onto", p.Mig.ParkedName)
	if len(plan.Ops) == 0 {
		return p.failed(fmt.Errorf("%w, and is not the plugin's to drop", why))
	}
	return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: PullStartOver, Plan: &plan, Retry: why})
}

// fetch asks the sending node for the next increment of the copy, as
// listed (rows), resuming a partial receive's token if any.
func (p PullLoop) fetch(rows []zfs.Dataset, token string) Move {
	mg, c, now := p.Mig, p.Class, p.Now
	have, _ := NewestCopied(mg.ParkedName, rows)
	props := ReceiveProps(c, mg.ParkedName, mg.Previous.ID, now, now.Add(c.StickyWait))
	f := Fetch{Alloc: mg.Previous.ID, Replacement: mg.Replacement.ID, Slot: mg.PrevSlot, HaveGUID: have,
		ResumeToken: token, Target: mg.ParkedName, Props: props, Exclude: ReceiveExclude(props), At: now}
	return p.move(Move{Kind: MoveFetch, Phase: PullFetch, Fetch: &f, Rows: rows})
}

// fetched decides on the sending node's answer to a fetch.
func (p PullLoop) fetched() Move {
	last, mg, c := p.Last, p.Mig, p.Class
	rows, err := last.Step.Rows, last.Err
	switch {
	case err == nil && last.Complete && !HoldsFinal(mg.ParkedName, rows):
		// The sender names no snapshot: its "complete" is believed only
		// of a copy whose newest snapshot is the final one it sent.
		return p.failed(fmt.Errorf("the sending node says %s is complete, but its newest snapshot is not the final one", mg.ParkedName))
	case err == nil && last.Complete:
		// Whole now; claimable once marked received, so checked first.
		if mv, refused := p.refuseShape(rows); refused {
			return mv
		}
		if mv, refused := p.overLimits(rows); refused {
			return mv
		}
		at := last.Step.Fetch.At
		plan := PlanReceived(mg.ParkedName, p.SlotDataset, at, at.Add(c.StickyWait))
		return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: PullReceived, Plan: &plan})
	case err == nil && last.Rows == nil:
		// A fetcher that did not return its listing (transfer.Client's
		// always does).
		return p.move(Move{Kind: MoveList, Phase: PullRelist})
	case err == nil:
		return p.received(last.Rows)
	case errors.Is(err, ErrNotFilesystem):
		// A property the class sets (-o quota=...) does not apply to what
		// the stream holds: a volume's stream, refused before anything was
		// written. Every stream from that node is the same.
		return Move{Kind: MoveFail, Refused: true,
			Reason: "the sending node's stream is not of a filesystem (a volume?): " + err.Error()}
	case errors.Is(err, ErrResumeRefused):
		// The sender will not resume it (its data moved on): drop the
		// partial receive; the next request starts from the last
		// complete snapshot.
		plan := PlanAbortReceive(mg.ParkedName)
		return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: PullAbort, Plan: &plan, Retry: err})
	case errors.Is(err, ErrStartOver):
		// The copy no longer lines up with what the sender has (its base
		// snapshot is gone there), or what came is not the snapshot the
		// sender named (another guid: not the data asked for): start over
		// with a whole copy, as it is now (the receive may have added a
		// snapshot since the listing the fetch was asked on).
		return p.move(Move{Kind: MoveList, Phase: PullRecount, Retry: err})
	}
	return p.failed(err)
}

// refuseShape refuses the copy, as just listed (rows, volumes included),
// when it is not one filesystem (CopyNotOneFilesystem): a volume, marked
// as the plugin's by its receive, is dropped first; datasets below a
// filesystem carry no mark of the plugin's and are left, with the copy,
// for the operator.
func (p PullLoop) refuseShape(rows []zfs.Dataset) (Move, bool) {
	why, drop := CopyNotOneFilesystem(p.Mig.ParkedName, rows)
	switch {
	case why == "":
		return Move{}, false
	case drop:
		return p.dropRefused(why, rows), true
	}
	return Move{Kind: MoveFail, Refused: true, Reason: why}, true
}

// dropRefused drops a copy refused for why, then refuses it.
func (p PullLoop) dropRefused(why string, rows []zfs.Dataset) Move {
	plan := PlanDropCopy(p.Mig.ParkedName, rows)
	return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: PullDropRefused, Plan: &plan, Reason: why})
}

// received decides on the copy as listed once an increment came (rows,
// volumes included): refused if it is not one filesystem, its older
// pre-copy snapshots dropped, then the next request.
func (p PullLoop) received(rows []zfs.Dataset) Move {
	if mv, refused := p.refuseShape(rows); refused {
		return mv
	}
	// Once the final snapshot is in, the older ones go with the claim
	// or the copy (PlanClaim, PlanReleaseParked), in its one release
	// and one destroy: not on the cutover's path.
	if older := OlderCopied(p.Mig.ParkedName, rows); len(older) > 0 && !HoldsFinal(p.Mig.ParkedName, rows) {
		plan := PlanDropSnapshots(older)
		return p.move(Move{Kind: MoveRun, Act: ActPlan, Phase: PullDropOlder, Plan: &plan, Rows: rows})
	}
	return p.increment(rows)
}

// increment ends a round that brought an increment (or nothing): after
// the final one, the request for the sender's "complete" at once, still
// under the copy's lock and on the same listing (the replacement waits);
// else a pause of the pre-copy's pace.
func (p PullLoop) increment(rows []zfs.Dataset) Move {
	if HoldsFinal(p.Mig.ParkedName, rows) {
		// That request tells the sender this node holds its final
		// snapshot, and the sender then releases its data: a copy this
		// node will refuse is refused first (seed 9760098: a final copy
		// over the class's refquota, refused after the sender had
		// destroyed its own).
		if mv, refused := p.overLimits(rows); refused {
			return mv
		}
		return p.fetch(rows, "")
	}
	// A Reserve waiting for the copy ends this pause (Move.Kick): its
	// predecessor has ended, and the final increment may be ready.
	return Move{Kind: MoveWait, Phase: PullNext, For: PullEvery, Awaits: AwaitsIncrement}
}

// overLimits refuses the copy, as listed (rows), when it references more
// than the class's limits (CopyOverLimits): its replacement would start
// over them, unable to write.
func (p PullLoop) overLimits(rows []zfs.Dataset) (Move, bool) {
	for _, r := range rows {
		if why := CopyOverLimits(p.Class, r); r.Name == p.Mig.ParkedName && why != "" {
			return p.dropRefused(why, rows), true
		}
	}
	return Move{}, false
}

// failed ends a round that failed with err: a busy sender is asked again
// shortly, and is no failure; anything else after a pause that grows with
// the failures in a row.
func (p PullLoop) failed(err error) Move {
	if errors.Is(err, ErrPeerBusy) {
		// The sending node parks or releases the data under its lock just
		// now (the allocation has ended): not a failure, a short wait.
		return Move{Kind: MoveWait, Phase: PullBusy, For: BusyWait, Attempt: p.Failures, Retry: err}
	}
	n := p.Failures + 1
	return Move{Kind: MoveWait, Phase: PullRetry, For: RetryWait(n, time.Minute), Attempt: n, Retry: err}
}

// RetryWait is the pause before retrying a failed step after failures
// failures in a row: a second, doubling, at most ceiling (and at least a
// second).
func RetryWait(failures int, ceiling time.Duration) time.Duration {
	d := time.Second << min(failures-1, 16)
	return min(d, max(ceiling, time.Second))
}
