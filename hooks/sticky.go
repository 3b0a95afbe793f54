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

// park renames the releasing slot's data aside for holder's replacement
// and creates a fresh slot in its place. Marked before the rename, so a
// crash between any two steps resumes: the release again, or runParked
// finishing the renamed data.
func (m *Manager) park(ctx context.Context, s model.Slot, c model.Class, holder model.Alloc, holderIndex uint64) error {
	aside := m.cfg.ParkedName(s.Class, holder.ID, s.ID)
	if err := m.zfs.Set(ctx, s.Dataset, model.ParkAsProps(aside)); err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return err
	}
	err := m.zfs.Rename(ctx, s.Dataset, aside)
	if errors.Is(err, zfs.ErrExists) {
		// Parked already, then a crash before the fresh slot was created:
		// the slot made since holds nothing of holder's (it ended before
		// the park), so it is released as an ordinary one.
		if p, rerr := m.readParked(ctx, aside); rerr != nil || p == nil || p.Holder != holder.ID {
			return fmt.Errorf("cannot park %s as %s: it exists and is not %s's parked data", s.Dataset, aside, holder.ID)
		}
		m.logger.Info("data already parked; releasing the slot made since", "slot", s.ID, "parked", aside)
		return m.destroyAndRecreate(ctx, s, c, holderIndex)
	}
	if err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return err
	}
	now := m.now()
	if err := m.zfs.Set(ctx, aside, model.ParkedProps(aside, now, now.Add(c.StickyWait))); err != nil {
		return err
	}
	m.logger.Info("slot data parked for the allocation's replacement", "slot", s.ID, "alloc_id", holder.ID,
		"next_alloc_id", holder.NextAllocation, "parked", aside)
	return m.replace(ctx, s, c, holderIndex)
}

// readParked reads parked data by name (one zfs process); nil when there
// is none.
func (m *Manager) readParked(ctx context.Context, name string) (*model.Retained, error) {
	rows, err := m.zfs.List(ctx, name, model.UserProps)
	if errors.Is(err, zfs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return model.ParkedFromRows(name, rows), nil
}

// inherit decides, for a Reserve of ready slot s by caller, whether caller
// inherits its predecessor's data, and claims it if so. It reports whether
// the slot changed (read it again), or errWaitPark while the data is still
// in the predecessor's slot. The caller holds s's lock.
func (m *Manager) inherit(ctx context.Context, s model.Slot, c model.Class, caller model.Alloc) (bool, error) {
	prev, prevID, ok := model.Predecessor(c, caller, s.ID, m.snapshot())
	if !ok {
		return false, nil
	}
	name := m.cfg.ParkedName(c.Name, prev.ID, prevID)
	for attempt := 0; ; attempt++ {
		var prevSlot *model.Slot
		if prevID != s.ID {
			prevSlot, _ = m.current(prevID)
		}
		if v, _ := m.View(); prevSlot != nil && v != nil {
			// The decision rests on the predecessor's slot: what lies below
			// it (a stranger the operator may have removed since the scan)
			// and its state. Read it as it is now (without its lock, so not
			// recorded as an override); on an error, as last read.
			if now, err := readSlot(ctx, m.cfg, m.zfs, c.Name, prevID, v.ParentMountpoint); err == nil {
				now.Healthy, now.Reason = model.Health(&now, v.Problem, "")
				prevSlot = &now
			}
		}
		p, err := m.readParked(ctx, name)
		if err != nil {
			return false, err
		}
		d := model.DecideInherit(s, caller, prev, prevSlot, p)
		switch {
		case d.Kind == model.InheritWait && attempt == 0:
			// Park it now if its holder has ended (the watcher's pass
			// would, a little later): the predecessor's slot, under its
			// own lock, as a pass does it; skipped if that lock is busy.
			if changed, _ := m.runStep(ctx, prevID, c.Name, m.snapshot()); changed {
				continue
			}
			fallthrough
		case d.Kind == model.InheritWait:
			m.logger.Info("reserve: waiting for the predecessor's data", "slot", s.ID, "alloc_id", caller.ID, "reason", d.Reason)
			m.Trigger()
			return false, errWaitPark
		case d.Kind == model.InheritClaim:
			return true, m.claim(ctx, s, caller, *p)
		}
		if d.Reason != "" {
			m.logger.Warn("reserve: not inheriting", "slot", s.ID, "alloc_id", caller.ID, "reason", d.Reason)
		}
		return false, nil
	}
}

// errWaitPark: the predecessor's data is not parked yet.
var errWaitPark = errors.New("waiting for the predecessor's data to be parked")

// claim hands parked data p to caller as ready slot s: the fresh dataset is
// destroyed (it holds nothing: Reserve found no one's data in it), p is
// renamed onto its name, and recorded held by caller. A rename, whatever
// the size. The caller holds s's lock; p's lock orders it against a pass
// releasing p.
func (m *Manager) claim(ctx context.Context, s model.Slot, caller model.Alloc, p model.Retained) error {
	lock := m.locks.get(p.Dataset)
	lock.Lock()
	defer lock.Unlock()
	start := time.Now()
	for _, snap := range s.OwnSnapshots {
		if err := destroySnapshot(ctx, m.zfs, snap); err != nil {
			return err
		}
	}
	if err := m.zfs.Destroy(ctx, s.Dataset, zfs.DestroyOptions{}); err != nil && !errors.Is(err, zfs.ErrNotExist) {
		// A destroy refused as busy may have unmounted the fresh slot
		// first (seen on OpenZFS under load): mount it again, so that it
		// stays healthy for Reserve's next try instead of failing it.
		if merr := m.zfs.Mount(ctx, s.Dataset); merr != nil {
			m.logger.Debug("remounting a slot a refused destroy left", "slot", s.ID, "error", merr)
		}
		return foreignBelow(err, s.Dataset)
	}
	if err := m.zfs.Set(ctx, p.Dataset, model.ClaimAsProps(s.Dataset)); err != nil {
		return err
	}
	if err := m.zfs.Rename(ctx, p.Dataset, s.Dataset); err != nil {
		return err
	}
	if err := m.setClaimed(ctx, s.Dataset, caller, s.Generation+1); err != nil {
		return err
	}
	m.logger.Info("claimed parked data", "slot", s.ID, "alloc_id", caller.ID, "from", p.Dataset,
		"took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// setClaimed records claimed data, renamed onto slot dataset, held by
// caller: one zfs set. What the parked data still carries (retain_as
// naming the slot, expires, outcome) is left: the slot's next release
// rewrites or clears it (model.ClearedOnReady), and nothing reads it on a
// held slot.
func (m *Manager) setClaimed(ctx context.Context, dataset string, caller model.Alloc, generation int) error {
	return m.zfs.Set(ctx, dataset, model.ClaimedProps(dataset, caller, generation, m.now()))
}

// runParked settles every class's parked data: finished after a crash,
// kept while a replacement may claim it, released by the class's policy
// when none will (model.PlanParked). It reports whether anything changed.
func (m *Manager) runParked(ctx context.Context, cv *model.ClassView) bool {
	changed := false
	snap := m.snapshot()
	for _, p := range cv.Parked {
		if p.State != model.StateParked {
			if err := m.zfs.Set(ctx, p.Dataset, model.ParkedProps(p.Dataset, m.now(), m.now().Add(cv.Class.StickyWait))); err != nil {
				m.logger.Error("cannot finish parked data", "dataset", p.Dataset, "error", err)
				continue
			}
			m.logger.Info("finished parked data after a crash", "dataset", p.Dataset)
			changed = true
			continue
		}
		if m.allocs == nil {
			continue
		}
		looked := map[string]model.Alloc{}
		step := model.PlanParked(cv.Class, p, cv.Slots, snap, looked, m.now())
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
		if step.Kind != model.ParkedRelease {
			continue
		}
		err := m.releaseParked(ctx, cv.Class, p, step.Reason)
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
	// the slot.
	errSlotInReserve = errors.New("the slot is in a Reserve")
)

// releaseParked gives parked data no replacement will claim back by the
// class's policy for its holder's outcome: the snapshot policy keeps it as
// retained data, the others destroy it.
//
// The pass plans from a scan, and a Reserve may have claimed the data since
// (the scan runs beside the lifecycle): p is read again under its lock and
// released only if it is still the same parked data. Parked data at a
// slot's name (a claim a crash interrupted) is the slot's, which a Reserve
// finishes under the slot's lock: that lock is taken first, as Reserve
// takes it before a parked dataset's, and skipped when busy, as a pass's
// step skips a slot in a Reserve.
func (m *Manager) releaseParked(ctx context.Context, c model.Class, p model.Retained, why string) error {
	if id := path.Base(p.Dataset); p.Dataset == m.cfg.SlotDataset(c.Name, id) {
		slot := m.locks.get(id)
		if !slot.TryLock() {
			return errSlotInReserve
		}
		defer slot.Unlock()
	}
	lock := m.locks.get(p.Dataset)
	lock.Lock()
	defer lock.Unlock()
	cur, err := m.readParked(ctx, p.Dataset)
	if err != nil {
		return err
	}
	if cur == nil || cur.State != p.State || cur.Holder != p.Holder || cur.Info.GUID != p.Info.GUID {
		return fmt.Errorf("%w: %s", errParkedMoved, p.Dataset)
	}
	p = *cur
	if err := model.CheckDestroyRetained(m.cfg, p); err != nil {
		return err
	}
	policy := c.Release.PolicyFor(p.Outcome)
	m.logger.Info("releasing parked data", "dataset", p.Dataset, "alloc_id", p.Holder, "policy", policy, "why", why)
	if policy == model.PolicySnapshot {
		snap := p.Dataset + "@" + model.RetainedSnapshot
		if err := m.zfs.Snapshot(ctx, snap, nil); err != nil && !errors.Is(err, zfs.ErrExists) {
			return err
		}
		if err := m.zfs.Hold(ctx, model.HoldTag, snap); err != nil {
			return err
		}
		return m.zfs.Set(ctx, p.Dataset, model.RetainedParkedProps(p.Dataset, m.now(), m.now().Add(c.Release.Retain)))
	}
	for _, snap := range p.OwnSnapshots {
		if err := destroySnapshot(ctx, m.zfs, snap); err != nil {
			return err
		}
	}
	if err := m.zfs.Destroy(ctx, p.Dataset, zfs.DestroyOptions{}); err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return fmt.Errorf("destroying %s: %w", p.Dataset, foreignBelow(err, p.Dataset))
	}
	return nil
}
