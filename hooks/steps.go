package hooks

import (
	"context"
	"errors"
	"fmt"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
)

// runLifecycle carries out what the watcher's latest snapshot calls for.
// Each step re-reads its slot under the slot's lock and decides again, so a
// Reserve that changed the slot meanwhile is never overtaken by a stale
// plan. It reports whether anything changed.
func (m *Manager) runLifecycle(ctx context.Context, v *View) bool {
	snap := m.snapshot()
	changed := false
	for _, st := range planLifecycle(v, snap) {
		if m.runStep(ctx, st.slot.ID, st.slot.Class, snap) {
			changed = true
		}
	}
	return changed
}

// runStep re-reads one slot under its lock, re-plans and acts. A slot whose
// lock is taken is being fenced by a Reserve, which may wait up to
// reserve_timeout for a predecessor: the pass skips it rather than stall
// every other slot, and the next pass looks again.
func (m *Manager) runStep(ctx context.Context, id, class string, snap *allocwatch.Snapshot) bool {
	lock := m.locks.get(id)
	if !lock.TryLock() {
		m.logger.Debug("slot busy in Reserve; next pass", "slot", id)
		return false
	}
	defer lock.Unlock()

	s, err := m.reread(ctx, class, id)
	if err != nil {
		m.logger.Error("cannot read slot", "slot", id, "error", err)
		return false
	}
	st, ok := planSlot(s, class, snap)
	if !ok {
		return false
	}
	c := m.class(class)
	switch st.kind {
	case stepRecord:
		err = m.recordHolder(ctx, s, st.alloc)
	case stepRelease:
		err = m.release(ctx, s, c, st.alloc, st.outcome)
	case stepCheckLost:
		err = m.releaseIfNotRunningLocally(ctx, s, c, st.alloc)
	case stepCheckGone:
		err = m.releaseIfGone(ctx, s, c, st.alloc.ID)
	}
	if errors.Is(err, errKeep) {
		return false
	}
	if err != nil {
		m.logger.Error("slot lifecycle step failed; will retry", "slot", id, "step", st.kind, "alloc_id", st.alloc.ID, "error", err)
	}
	if _, rerr := m.reread(ctx, class, id); rerr != nil {
		m.logger.Debug("cannot re-read slot after a change", "slot", id, "error", rerr)
	}
	return true
}

// errKeep means a check found the holder may still run: nothing to do.
var errKeep = errors.New("holder may still run")

// releaseIfNotRunningLocally releases a lost holder's slot only once the
// local client confirms it does not run the allocation: a lost allocation
// keeps running on a node that was cut off from the servers.
func (m *Manager) releaseIfNotRunningLocally(ctx context.Context, s Slot, c Class, a allocwatch.Alloc) error {
	running, err := m.allocs.RunningLocally(ctx, a.ID)
	if err != nil {
		return fmt.Errorf("cannot ask the local client about lost allocation %s: %w", a.ID, err)
	}
	if running {
		m.logger.Info("lost allocation still runs here; keeping its slot", "slot", s.ID, "alloc_id", a.ID)
		return errKeep
	}
	return m.release(ctx, s, c, a, OutcomeLost)
}

// releaseIfGone looks up a holder missing from the node's allocation list.
// Only a definite "not found" releases: an allocation the token cannot read
// is missing from the list too, and an error is never read as absence.
func (m *Manager) releaseIfGone(ctx context.Context, s Slot, c Class, id string) error {
	a, found, err := m.allocs.Lookup(ctx, id)
	if err != nil {
		return fmt.Errorf("holder %s is missing from the node's allocations and cannot be looked up (does the token have read-job in its namespace?): %w", id, err)
	}
	switch {
	case !found:
		// The servers collect lost allocations too, while a node that was
		// cut off may still run them: the local client decides.
		running, err := m.allocs.RunningLocally(ctx, id)
		if err != nil {
			return fmt.Errorf("cannot ask the local client about vanished allocation %s: %w", id, err)
		}
		if running {
			m.logger.Info("vanished allocation still runs here; keeping its slot", "slot", s.ID, "alloc_id", id)
			return errKeep
		}
		return m.release(ctx, s, c, allocwatch.Alloc{ID: id}, OutcomeGone)
	case !a.ClientTerminal():
		return errKeep
	case a.ClientStatus == "lost":
		return m.releaseIfNotRunningLocally(ctx, s, c, a)
	default:
		return m.release(ctx, s, c, a, outcomeOf(a))
	}
}

// reread scans one slot's dataset (one zfs process) and records the result
// as an override of the published view, so Reserve sees the change at once.
func (m *Manager) reread(ctx context.Context, class, id string) (Slot, error) {
	at := m.now()
	s, err := readSlot(ctx, m.cfg, m.zfs, class, id)
	if err != nil {
		return Slot{}, err
	}
	v, _ := m.View()
	problem := ""
	if v != nil {
		problem = v.Problem
	}
	s.Healthy, s.Reason = health(&s, problem, "")
	m.mu.Lock()
	m.overrides[id] = override{slot: s, at: at}
	m.mu.Unlock()
	return s, nil
}

// current returns a slot as last read: the override if newer than the
// published view, else the view's.
func (m *Manager) current(id string) (*Slot, *ClassView) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s, cv := m.view.Slot(id)
	if s == nil {
		return nil, nil
	}
	if o, ok := m.overrides[id]; ok && o.at.After(m.view.ScannedAt) {
		cp := o.slot
		return &cp, cv
	}
	cp := *s
	return &cp, cv
}
