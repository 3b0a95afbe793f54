package hooks

import (
	"context"
	"fmt"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// maxMoves bounds the moves a loop makes between two pauses: a decider
// that never waits is a bug, not a fence.
const maxMoves = 64

// decider is one loop's model decider, bound to what it decides on (the
// slot as last read, Nomad's latest answer): given what the loop has read
// since its last pause and what came of its last move, its next move.
type decider func(since model.Since, last model.Result) model.Move

// driveLoop is one loop for the driver.
type driveLoop struct {
	decide decider
	// hold is the lock the loop holds but for its pauses (a pull's, of its
	// copy); nil when the caller holds what it needs throughout (a
	// Reserve, its slot's).
	hold *sync.Mutex
	// logWait says why the loop pauses; said is whom the last wait logged
	// at Info was for. nil: nothing.
	logWait func(mv model.Move, said *string)
}

// drive runs a loop: it asks l.decide for the next move, makes it, and
// asks again with what came of it, until the decider grants, fails or is
// done. It keeps what the loop has read since its last pause
// (model.Since.After), and gives up, with the last move's error, when ctx
// ends or a pause fails: a Reserve is bounded by Nomad's reserve timeout,
// a pull by the pass that wants it.
func (m *Manager) drive(ctx context.Context, l driveLoop) (model.Move, error) {
	var (
		since model.Since
		last  model.Result
		said  string
		start = m.now()
		held  bool
		locks = map[string]*sync.Mutex{} // taken by MoveLock
	)
	defer func() {
		if held {
			l.hold.Unlock()
		}
		for _, lock := range locks {
			lock.Unlock()
		}
	}()
	for moves := 0; ; moves++ {
		mv := l.decide(since, last)
		switch mv.Kind {
		case model.MoveGrant, model.MoveFail, model.MoveDone:
			return mv, nil
		case model.MoveWait:
			moves = 0
		}
		if moves >= maxMoves {
			return mv, fmt.Errorf("%d moves without a pause (the last: %s %s): a bug in the decider", maxMoves, mv.Kind, mv.Act)
		}
		if l.hold != nil && held == (mv.Kind == model.MoveWait) {
			if held {
				l.hold.Unlock()
			} else {
				l.hold.Lock()
			}
			held = !held
		}
		if mv.Kind == model.MoveWait && l.logWait != nil {
			l.logWait(mv, &said)
		}
		switch mv.Kind {
		case model.MoveLock:
			last = model.Result{Step: mv, Locked: true}
			lock := m.locks.get(mv.Lock)
			if mv.Try {
				last.Locked = lock.TryLock()
			} else {
				lock.Lock()
			}
			if last.Locked {
				locks[mv.Lock] = lock
			}
		case model.MoveUnlock:
			if lock, ok := locks[mv.Lock]; ok {
				lock.Unlock()
				delete(locks, mv.Lock)
			}
			last = model.Result{Step: mv}
		default:
			last = m.move(ctx, mv, start)
		}
		since = since.After(mv, last.Err)
		switch {
		case last.Err != nil && ctx.Err() != nil:
			return mv, fmt.Errorf("gave up waiting: %v (last: %v)", ctx.Err(), last.Err)
		case last.Err != nil && mv.Kind == model.MoveWait:
			// The pause itself failed: the loop's time is up (a deadline
			// the simulation keeps in its own time, the process ending).
			return mv, fmt.Errorf("gave up waiting: %v", last.Err)
		}
	}
}

// move makes one move; start is when the loop began.
func (m *Manager) move(ctx context.Context, mv model.Move, start time.Time) model.Result {
	r := model.Result{Step: mv}
	switch mv.Kind {
	case model.MoveRead:
		r.Slot, r.Err = m.reread(ctx, mv.Class.Name, mv.Slot.Dataset)
	case model.MoveAsk:
		r.Err = m.refresh(ctx)
	case model.MoveLookup:
		r.Alloc, r.Found, r.Err = m.lookupHolder(ctx, mv.Alloc.ID)
	case model.MoveLocal:
		r.Running, r.Err = m.runningLocally(ctx, mv.Alloc.ID, mv.Outcome)
	case model.MoveReadPrev:
		r.Inherit, r.Dataset, r.Err = m.readPrev(ctx, mv.Class, mv.Slot, mv.Alloc, m.now().Sub(start))
	case model.MoveList:
		list := m.zfs.List
		if mv.Volumes {
			list = m.zfs.ListAll
		}
		r.Rows, r.Err = list(ctx, mv.Dataset, model.UserProps)
	case model.MoveReadParked:
		r.Parked, r.Rows, r.Err = m.listParked(ctx, mv.Dataset)
	case model.MoveDecodeToken:
		r.Resume, r.Err = m.decodeToken(ctx, mv.Token)
	case model.MoveReadSlot:
		r.Slot, r.Err = readSlot(ctx, m.cfg, m.zfs, mv.Class.Name, mv.Slot.Dataset, "")
	case model.MoveFetch:
		r.Complete, r.Rows, r.Err = m.fetch(ctx, *mv.Fetch)
	case model.MoveWait:
		if mv.For <= 0 {
			// A pause of no time only lets the loop's lock go (a pull's
			// round that asks again at once).
			r.Err = ctx.Err()
			break
		}
		if mv.Wake {
			m.trigger()
		}
		if mv.Kick {
			m.pulls.kick()
		}
		sleep := m.sleep
		switch mv.Awaits {
		case model.AwaitsData:
			// Woken early when a pull makes a copy claimable: the pause is
			// still bounded by mv.For, the look again is only sooner.
			sleep = func(ctx context.Context, d time.Duration) error { return m.pulls.pause(ctx, m.sleep, d) }
		case model.AwaitsIncrement:
			// Ended early by a Reserve's kick.
			sleep = func(ctx context.Context, d time.Duration) error { return m.pulls.nap(ctx, m.sleep, d) }
		}
		if err := sleep(ctx, mv.For); err != nil {
			r.Err = err
			if mv.Retry != nil {
				r.Err = mv.Retry
			}
		}
	case model.MoveRun:
		r.Changed, r.Err = m.act(ctx, mv)
	}
	return r
}

// logWait says why a Reserve pauses, in the lines docs/troubleshooting.md
// lists: a wait at Info the first time it is for an allocation, at Debug
// after; a holder kept (it may still run) at Debug; a retry as a warning.
func (m *Manager) logWait(mv model.Move, said *string) {
	var msg string
	switch mv.Awaits {
	case model.AwaitsRetry:
		m.logger.Warn("reserve: retrying", "slot", mv.Slot.ID, "error", mv.Retry)
		return
	case model.AwaitsKept:
		m.logger.Debug("allocation still runs here; keeping its slot", "slot", mv.Slot.ID, "alloc_id", mv.Alloc.ID)
		return
	case model.AwaitsHolder:
		msg = "waiting for the previous holder to end"
	case model.AwaitsData:
		msg = "reserve: waiting for the predecessor's data"
	}
	level := hclog.Debug
	if mv.Alloc.ID != *said {
		level, *said = hclog.Info, mv.Alloc.ID
	}
	m.logger.Log(level, msg, "slot", mv.Slot.ID, "alloc_id", mv.Alloc.ID, "reason", mv.Reason)
}

// act carries out a MoveRun under the slot's lock and reads the slot back
// (an ActPark is a pass's step on another slot, which reads its own; an
// ActPlan, a pull's, reads nothing back). It reports whether an ActPark
// changed the predecessor's slot.
func (m *Manager) act(ctx context.Context, mv model.Move) (changed bool, err error) {
	s, c := mv.Slot, mv.Class
	switch mv.Act {
	case model.ActPark:
		changed, _, _ = m.runStep(ctx, c.Name, mv.Dataset, m.snapshot())
		return changed, nil
	case model.ActPlan:
		err = m.run(ctx, *mv.Plan)
		if err != nil && mv.Warn != "" {
			m.logger.Warn(mv.Warn, "dataset", mv.Dataset, "error", err)
			err = nil
		}
		return false, err
	case model.ActRelease:
		err = m.release(ctx, s, c, mv.Alloc, mv.Outcome)
	case model.ActRecord:
		if mv.Reason != "" {
			m.logger.Warn("reserve: not inheriting", "slot", s.ID, "alloc_id", mv.Alloc.ID, "reason", mv.Reason)
		}
		err = m.recordHolder(ctx, s, mv.Alloc)
	case model.ActClaim:
		err = m.claim(ctx, s, mv.Alloc, *mv.Parked)
	case model.ActTakeover:
		err = m.takeover(ctx, mv)
	}
	if _, rerr := m.reread(ctx, c.Name, s.Dataset); rerr != nil && err == nil {
		err = rerr
	}
	return false, err
}
