package hooks

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Sticky data (model/sticky.go has the rules): a release parks the data of
// a replaced holder, a Reserve by the replacement claims it, and a pass
// releases what no replacement will claim.

// readParked reads parked data by name (one zfs process); nil when there
// is none.
func (m *Manager) readParked(ctx context.Context, name string) (*model.Retained, error) {
	p, _, err := m.listParked(ctx, name)
	return p, err
}

// listParked is readParked with the listing it read the data from (its
// snapshots among them): a send decides on it (model.DecideSendMove).
func (m *Manager) listParked(ctx context.Context, name string) (*model.Retained, []zfs.Dataset, error) {
	rows, err := m.zfs.List(ctx, name, model.UserProps)
	if errors.Is(err, zfs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return model.ParkedFromRows(name, rows), rows, nil
}

// readPrev reads what caller, in a Reserve of ready slot s, may inherit
// (model.DecideInherit's input): its predecessor's slot, as it is now, and
// the predecessor's parked data. It returns nil when caller replaces no
// predecessor on s, and the predecessor's slot's dataset. waited is how
// long the Reserve has waited. The caller holds s's lock.
func (m *Manager) readPrev(ctx context.Context, c model.Class, s model.Slot, caller model.Alloc, waited time.Duration) (*model.InheritInput, string, error) {
	snap := m.snapshot()
	prev, prevID, ok := model.Predecessor(c, caller, s.ID, snap)
	if !ok && c.Migrate.Enabled && caller.PreviousAllocation != "" {
		// It ran on another node, and no pass has looked it up yet.
		if err := m.lookupRemote(ctx, caller.PreviousAllocation); err != nil {
			return nil, "", err
		}
		snap = m.snapshot()
		prev, prevID, ok = model.Predecessor(c, caller, s.ID, snap)
	}
	if !ok && c.Sticky && c.Migrate.Enabled && c.Replicate.Enabled() && caller.PreviousAllocation == "" && m.cluster != nil {
		// Nomad may have placed it for a lost allocation without naming
		// it (model.LostPredecessor): one whose replica is here.
		if id := m.lostPredecessor(ctx, c, s.ID, caller); id != "" {
			caller.PreviousAllocation = id
			if err := m.lookupRemote(ctx, id); err != nil {
				return nil, "", err
			}
			snap = m.snapshot()
			prev, prevID, ok = model.Predecessor(c, caller, s.ID, snap)
		}
	}
	if !ok {
		return nil, "", nil
	}
	local := prev.NodeID == "" || prev.NodeID == snap.NodeID
	var prevSlot *model.Slot
	if prevID != s.ID && local {
		prevSlot, _ = m.current(prevID)
	}
	if v, _ := m.View(); prevSlot != nil && v != nil {
		// The decision rests on the predecessor's slot: what lies below
		// it (a stranger the operator may have removed since the scan)
		// and its state. Read it as it is now (without its lock, so not
		// recorded as an override); on an error, as last read.
		pv := v.Parent(slotParent(prevSlot.Dataset))
		if now, err := readSlot(ctx, m.cfg, m.zfs, c.Name, prevSlot.Dataset, pv.Mountpoint); err == nil {
			now.Healthy, now.Reason = model.Health(&now, pv.Problem, "")
			prevSlot = &now
		}
	}
	p, err := m.readParked(ctx, m.cfg.ParkedName(c.Name, prev.ID, prevID))
	if err != nil {
		return nil, "", err
	}
	in := &model.InheritInput{Class: c, Slot: s, Caller: caller, Prev: prev, PrevSlot: prevSlot,
		Parked: p, NodeID: snap.NodeID, Waited: waited}
	if !local && p == nil && c.Migrate.Enabled && c.Replicate.Enabled() && m.cluster != nil {
		in.Takeover = m.readTakeover(ctx, c, prev, prevID)
	}
	return in, m.cfg.SlotDataset(c.Name, prevID), nil
}

// claim hands parked data p to caller as ready slot s (model.PlanClaim).
// The caller holds s's lock; p's lock orders it against a pass releasing p.
func (m *Manager) claim(ctx context.Context, s model.Slot, caller model.Alloc, p model.Retained) error {
	lock := m.locks.get(p.Dataset)
	lock.Lock()
	defer lock.Unlock()
	return m.run(ctx, model.PlanClaim(s, caller, p, m.now()))
}

// runParked settles every class's parked data: finished after a crash,
// kept while a replacement may claim it, released by the class's policy
// when none will (model.PlanParked). It reports whether anything changed.
func (m *Manager) runParked(ctx context.Context, cv *model.ClassView) bool {
	changed := false
	snap := m.snapshot()
	for _, p := range cv.Parked {
		looked := map[string]model.Alloc{}
		step := model.PlanParked(cv.Class, p, cv.Slots, snap, looked, m.now())
		if step.Kind == model.ParkedFinish {
			if err := m.run(ctx, model.PlanFinishParked(cv.Class, p, m.now())); err != nil {
				m.logger.Error("cannot finish parked data", "dataset", p.Dataset, "error", err)
				continue
			}
			changed = true
			continue
		}
		if m.allocs == nil {
			continue
		}
		for range 2 {
			if step.Kind != model.ParkedLookup {
				break
			}
			a, found, err := m.allocs.Lookup(ctx, step.Lookup)
			if err != nil {
				m.logger.Warn("cannot look up the allocation parked data waits for; keeping it", "dataset", p.Dataset, "alloc_id", step.Lookup, "error", err)
				break
			}
			if !found {
				a = model.Alloc{}
			}
			looked[step.Lookup] = a
			step = model.PlanParked(cv.Class, p, cv.Slots, snap, looked, m.now())
		}
		if step.Kind != model.ParkedRelease && step.Kind != model.ParkedRetain {
			continue
		}
		err := m.releaseParked(ctx, cv.Class, p, step.Reason, step.Kind == model.ParkedRetain)
		switch {
		case errors.Is(err, errParkedMoved):
			m.logger.Info("parked data changed since the scan; next pass", "dataset", p.Dataset, "error", err)
			changed = true // the view is stale: read again
			continue
		case errors.Is(err, errSlotInReserve):
			m.logger.Debug("parked data at a slot's name is in a Reserve; next pass", "dataset", p.Dataset)
			continue
		case err != nil:
			level := hclog.Error
			if errors.Is(err, zfs.ErrBusy) {
				level = hclog.Info // a process still has it open: the next pass retries
			}
			m.logger.Log(level, "cannot release parked data; next pass", "dataset", p.Dataset, "error", err)
			continue
		}
		changed = true
	}
	return changed
}

var (
	// errParkedMoved: parked data is no longer what the pass planned from.
	errParkedMoved = errors.New("parked data changed since it was read")
	// errSlotInReserve: parked data at a slot's name, and a Reserve holds
	// the slot; or the data itself is locked (a claim, a copy being
	// received).
	errSlotInReserve = errors.New("the slot or the data is in use")
)

// releaseParked gives parked data no replacement will claim back by the
// class's policy for its holder's outcome: the snapshot policy keeps it as
// retained data, the others destroy it; aside, it keeps it as retained
// data whatever the policy (model.ParkedRetain).
//
// The pass plans from a scan, and a Reserve may have claimed the data since
// (the scan runs beside the lifecycle): p is read again under its lock and
// released only if it is still the same parked data. Parked data at a
// slot's name (a claim a crash interrupted) is the slot's, which a Reserve
// finishes under the slot's lock: that lock is taken first, as Reserve
// takes it before a parked dataset's, and skipped when busy, as a pass's
// step skips a slot in a Reserve.
func (m *Manager) releaseParked(ctx context.Context, c model.Class, p model.Retained, why string, aside bool) error {
	if id := path.Base(p.Dataset); p.Dataset == m.cfg.SlotDataset(c.Name, id) {
		slot := m.locks.get(id)
		if !slot.TryLock() {
			return errSlotInReserve
		}
		defer slot.Unlock()
	}
	lock := m.locks.get(p.Dataset)
	if !lock.TryLock() {
		return errSlotInReserve // a Reserve's claim, or a copy being received
	}
	defer lock.Unlock()
	cur, err := m.readParked(ctx, p.Dataset)
	if err != nil {
		return err
	}
	if cur == nil || !cur.Same(p) {
		return fmt.Errorf("%w: %s", errParkedMoved, p.Dataset)
	}
	plan, err := model.PlanReleaseParked(m.cfg, c, *cur, why, m.now())
	if aside {
		plan, err = model.PlanRetainParked(m.cfg, c, *cur, why, m.now())
	}
	if err != nil {
		return err
	}
	return m.run(ctx, plan)
}
