package hooks

import (
	"context"
	"sync"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// The clocks of the held slots that wait on something no event of the
// plugin's own reports (model.Wait: a stopping holder the servers may
// forget, a holder only the local client still runs). Each pass says which
// slots wait, and on what; Run's loop looks again when the earliest clock
// is due (recheck), backed off per slot (model.RecheckAfter), until the
// wait ends. So no slot's release waits for an unrelated allocation to
// move the node's list.

// waitClock is one slot's clock.
type waitClock struct {
	wait model.Wait
	// looks counts the looks taken since the wait began; due is the next.
	looks int
	due   time.Time
}

// waitClocks are the clocks, by slot ID; mu guards them (Reserve's passes
// and Run's loop both end waits).
type waitClocks struct {
	mu sync.Mutex
	m  map[string]*waitClock
}

// syncWaits makes the clocks those of waits, the slots that wait after a
// pass, by slot ID: a new wait starts its clock and logs once what it
// waits for; one that goes on (the same holder) keeps its clock; one that
// ended is dropped.
func (m *Manager) syncWaits(waits map[string]model.Wait) {
	m.waits.mu.Lock()
	defer m.waits.mu.Unlock()
	if m.waits.m == nil {
		m.waits.m = map[string]*waitClock{}
	}
	now := m.now()
	for id, c := range m.waits.m {
		if w, ok := waits[id]; !ok || w.Alloc != c.wait.Alloc {
			delete(m.waits.m, id)
			m.logger.Debug("slot no longer waits", "slot", id, "alloc_id", c.wait.Alloc)
		}
	}
	for id, w := range waits {
		if c, ok := m.waits.m[id]; ok {
			// The same holder, maybe asked another way now (stopping,
			// then forgotten by the servers and still run here): one
			// clock, and the line said once.
			if c.wait.Kind != w.Kind {
				m.logger.Debug("slot still waits", "slot", id, "alloc_id", w.Alloc, "waiting_for", w.Kind.String())
				c.wait = w
			}
			continue
		}
		m.waits.m[id] = &waitClock{wait: w, due: now.Add(model.RecheckAfter(0))}
		m.logger.Info("slot waits; asking again until it ends", "slot", id, "alloc_id", w.Alloc, "waiting_for", w.Kind.String())
	}
}

// nextRecheck is when Run's loop looks again at a waiting slot: the
// earliest clock; false when no slot waits.
func (m *Manager) nextRecheck() (time.Time, bool) {
	m.waits.mu.Lock()
	defer m.waits.mu.Unlock()
	var next time.Time
	for _, c := range m.waits.m {
		if next.IsZero() || c.due.Before(next) {
			next = c.due
		}
	}
	return next, !next.IsZero()
}

// dueWaits takes the waits whose clock is due, and sets each clock's next
// look: a look that does not end the wait is followed by one later.
func (m *Manager) dueWaits() (due []model.Wait) {
	m.waits.mu.Lock()
	defer m.waits.mu.Unlock()
	now := m.now()
	for _, c := range m.waits.m {
		if c.due.After(now) {
			continue
		}
		due = append(due, c.wait)
		c.looks++
		c.due = now.Add(model.RecheckAfter(c.looks))
	}
	return due
}

// recheck looks again at the slots whose clock is due: when a stopping
// holder is among them, it first asks the servers for the node's
// allocations (one non-blocking query; the watcher's blocking one does not
// answer a deletion), then runs Settle, whose steps ask the local client
// about a holder the servers no longer run. Run's loop calls it when
// nextRecheck is due; the simulation calls it in simulated time
// (Steps.Recheck).
func (m *Manager) recheck(ctx context.Context) {
	due := m.dueWaits()
	if len(due) == 0 {
		return
	}
	for _, w := range due {
		if w.Kind != model.WaitStopping {
			continue
		}
		if err := m.refresh(ctx); err != nil {
			m.logger.Debug("cannot ask again whether a stopping holder ended; asking later", "alloc_id", w.Alloc, "error", err)
		}
		break
	}
	m.Settle(ctx)
}

// waitOf is what slot id waits for now, if anything.
func (m *Manager) waitOf(id string) model.Wait {
	m.waits.mu.Lock()
	defer m.waits.mu.Unlock()
	if c, ok := m.waits.m[id]; ok {
		return c.wait
	}
	return model.Wait{}
}
