package hooks

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// runLifecycle carries out what the watcher's latest snapshot calls for.
// Each step re-reads its slot under the slot's lock and decides again, so a
// Reserve that changed the slot meanwhile is never overtaken by a stale
// plan. It reports whether anything changed and whether a step failed (to
// be retried). The slots left waiting on what no event of the plugin's own
// reports get a clock each (waits.go).
func (m *Manager) runLifecycle(ctx context.Context, v *model.View) (changed, failed bool) {
	m.lookupPredecessors(ctx)
	snap := m.snapshot()
	waits := model.StoppingWaits(v, snap)
	for _, st := range model.PlanLifecycle(v, snap) {
		c, f, w := m.runStep(ctx, st.Slot.Class, st.Slot.Dataset, snap)
		changed = changed || c
		failed = failed || f
		if w.Kind != 0 {
			waits[st.Slot.ID] = w
		}
	}
	m.syncWaits(waits)
	return changed, failed
}

// runStep re-reads one slot of class, at dataset, under its lock, re-plans
// and acts. A slot whose lock is taken is being fenced by a Reserve, which
// may wait up to reserve_timeout for a predecessor: the pass skips it
// rather than stall every other slot, and the next pass looks again.
// wait is what the slot waits for after the step, if a check found its
// holder may still run (or, when the step could not run, what it waited
// for before).
func (m *Manager) runStep(ctx context.Context, class, dataset string, snap *model.Snapshot) (changed, failed bool, wait model.Wait) {
	id := path.Base(dataset)
	lock := m.locks.get(id)
	if !lock.TryLock() {
		// Retried soon, as a failed step is: a transfer's snapshot holds
		// it for a moment, a Reserve for as long as it fences.
		m.logger.Debug("slot busy; retrying soon", "slot", id)
		return false, true, m.waitOf(id)
	}
	defer lock.Unlock()

	s, err := m.reread(ctx, class, dataset)
	if err != nil {
		m.logger.Error("cannot read slot", "slot", id, "error", err)
		return false, true, m.waitOf(id)
	}
	c := m.cfg.Class(class)
	st, ok := model.PlanSlot(c, s, snap)
	if !ok {
		return false, false, model.Wait{}
	}
	kept := false
	switch st.Kind {
	case model.StepRecord:
		err = m.recordHolder(ctx, s, st.Alloc)
	case model.StepRelease:
		err = m.release(ctx, s, c, st.Alloc, st.Outcome)
	case model.StepCheckLost:
		kept, err = m.releaseIfNotRunningLocally(ctx, s, c, st.Alloc, model.OutcomeLost)
	case model.StepCheckGone:
		kept, err = m.releaseIfGone(ctx, s, c, st.Alloc.ID)
	case model.StepTidy:
		err = m.run(ctx, model.PlanTidy(s))
	case model.StepPristine:
		err = m.run(ctx, model.PlanPristine(s))
	}
	if kept {
		// Only the local client can tell when it ends: asked again on
		// the slot's clock, not at the next news of other allocations.
		return false, false, model.Wait{Kind: model.WaitLocal, Alloc: st.Alloc.ID}
	}
	if err != nil {
		m.logger.Error("slot lifecycle step failed; will retry", "slot", id, "step", st.Kind, "alloc_id", st.Alloc.ID, "error", err)
	}
	if _, rerr := m.reread(ctx, class, dataset); rerr != nil {
		m.logger.Debug("cannot re-read slot after a change", "slot", id, "error", rerr)
	}
	return true, err != nil, model.Wait{}
}

// releaseIfNotRunningLocally releases the slot of a holder that is lost or
// gone from the servers only once the local client confirms it does not run
// the allocation: a lost allocation keeps running on a node that was cut
// off from the servers, and the servers collect lost allocations too. kept
// reports that the slot is kept: the holder may still run.
func (m *Manager) releaseIfNotRunningLocally(ctx context.Context, s model.Slot, c model.Class, a model.Alloc, outcome string) (kept bool, err error) {
	running, err := m.runningLocally(ctx, a.ID, outcome)
	if err != nil {
		return false, err
	}
	if running {
		// Said once, when the slot's wait begins (syncWaits), not at
		// every look.
		m.logger.Debug("allocation still runs here; keeping its slot", "slot", s.ID, "alloc_id", a.ID, "outcome", outcome)
		return true, nil
	}
	return false, m.release(ctx, s, c, a, outcome)
}

// runningLocally asks the local client whether allocation id, lost or
// gone from the servers (outcome), runs here. An error is never read as
// "it does not".
func (m *Manager) runningLocally(ctx context.Context, id, outcome string) (bool, error) {
	running, err := m.allocs.RunningLocally(ctx, id)
	if err != nil {
		return false, fmt.Errorf("cannot ask the local client about %s allocation %s: %w", outcome, id, err)
	}
	return running, nil
}

// releaseIfGone looks up a holder missing from the node's allocation list
// and acts on the model's judgement of the answer. An error is never read
// as absence: an allocation the token cannot read is missing from the list
// too. kept reports that the slot is kept: the holder may still run.
func (m *Manager) releaseIfGone(ctx context.Context, s model.Slot, c model.Class, id string) (kept bool, err error) {
	a, found, err := m.lookupHolder(ctx, id)
	if err != nil {
		return false, err
	}
	switch live, outcome := model.Judge(a, found); live {
	case model.MayRun:
		return true, nil
	case model.AskClient:
		return m.releaseIfNotRunningLocally(ctx, s, c, a, outcome)
	default:
		return false, m.release(ctx, s, c, a, outcome)
	}
}

// lookupHolder looks up holder id, missing from the node's allocations. An
// error is never read as absence.
func (m *Manager) lookupHolder(ctx context.Context, id string) (model.Alloc, bool, error) {
	a, found, err := m.allocs.Lookup(ctx, id)
	if err != nil {
		return model.Alloc{}, false, fmt.Errorf("holder %s is missing from the node's allocations and cannot be looked up (does the token have read-job in its namespace?): %w", id, err)
	}
	if !found {
		// Garbage-collected. If a snapshot showed how it ended, that is its
		// outcome; otherwise it is "gone".
		a, found = m.endedAlloc(id)
	}
	a.ID = id
	return a, found, nil
}

// reread scans the dataset of one slot of class (one zfs process), judged
// by its parent's part of the published view, and records the result as an
// override of that view, so Reserve sees the change at once. The dataset,
// not the ID, names the slot: an orphan of a removed class may be below any
// parent.
func (m *Manager) reread(ctx context.Context, class, dataset string) (model.Slot, error) {
	at := m.stamp()
	v, _ := m.View()
	var pv model.ParentView
	if v != nil {
		pv = v.Parent(slotParent(dataset))
	}
	s, err := readSlot(ctx, m.cfg, m.zfs, class, dataset, pv.Mountpoint)
	if err != nil {
		return model.Slot{}, err
	}
	s.Healthy, s.Reason = model.Health(&s, pv.Problem, "")
	m.mu.Lock()
	m.overrides[s.ID] = &override{slot: s, at: at}
	m.mu.Unlock()
	return s, nil
}

// slotParent is the parent dataset of a slot's dataset,
// <parent>/<class>/<id>.
func slotParent(dataset string) string { return zfs.Parent(zfs.Parent(dataset)) }

// rereadMany reads the slots of acts back with one zfs process and records
// them as overrides, as reread does for one, judged against v (the pass's
// scan: their parents' problems and mountpoints). A failure only logs: the
// next scan reads them anyway.
func (m *Manager) rereadMany(ctx context.Context, v *model.View, acts []model.Action) {
	at := m.stamp()
	roots := make([]string, len(acts))
	for i, a := range acts {
		roots[i] = a.Dataset
	}
	rows, err := m.zfs.ListMany(ctx, roots, model.UserProps)
	if err != nil {
		m.logger.Debug("cannot read new slots back; the next scan will", "count", len(acts), "error", err)
		return
	}
	bySlot := make(map[string][]zfs.Dataset, len(acts))
	for _, d := range rows {
		for _, root := range roots {
			if d.Name == root || strings.HasPrefix(d.Name, root+"/") || strings.HasPrefix(d.Name, root+"@") {
				bySlot[root] = append(bySlot[root], d)
				break
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range acts {
		pv := v.Parent(slotParent(a.Dataset))
		s := model.SlotFromListing(m.cfg, a.Class, a.Dataset, bySlot[a.Dataset], pv.Mountpoint)
		s.Healthy, s.Reason = model.Health(&s, pv.Problem, "")
		m.overrides[s.ID] = &override{slot: s, at: at}
	}
}

// current returns a slot as last read: the override if newer than the
// published view, else the view's.
func (m *Manager) current(id string) (*model.Slot, *model.ClassView) {
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

// currentSlot is current's slot alone, for the model's lookups.
func (m *Manager) currentSlot(id string) (model.Slot, bool) {
	if s, _ := m.current(id); s != nil {
		return *s, true
	}
	return model.Slot{}, false
}
