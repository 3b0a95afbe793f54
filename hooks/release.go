package hooks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// release gives a slot's data back by its class's policy and leaves a ready
// slot in its place (none for an orphan: model.Slot.Orphan); in a sticky
// class it parks the data of a replaced holder instead. Every step
// tolerates having been done already, so a crash between any two resumes
// here from the recorded state (releasing, with holder and outcome). A
// release that begins by destroying the slot or rolling it back, whatever
// the outcome, records nothing first (model.Class.MarksRelease): one zfs
// process less. A crash before that first change leaves the slot held by
// an ended holder, which is released the same way; a crash after a
// rollback, a pristine slot held by an ended holder, released again. The
// caller holds the slot's lock. The Observer hears how it ended.
func (m *Manager) release(ctx context.Context, s model.Slot, c model.Class, holder model.Alloc, outcome string) (err error) {
	ev := ReleaseEvent{Slot: s, Holder: holder, Outcome: outcome, Started: time.Now()}
	defer func() { ev.Done, ev.Err = time.Now(), err; m.observer.ReleaseDone(ev) }()
	if err := model.CheckRelease(m.cfg, s); err != nil {
		return err // nothing changed; the slot's health says what to do
	}
	holderIndex := model.ReleaseIndex(s, holder.CreateIndex)
	marked := s.State == model.StateReleasing
	if !marked && c.MarksRelease(s) {
		if err := m.markReleasing(ctx, s, holder, holderIndex, outcome); err != nil {
			return err
		}
		marked = true
	}
	s.State, s.Holder, s.Outcome = model.StateReleasing, holder.ID, outcome
	if c.Parks(s, holder, outcome, m.snapshot(), m.currentSlot) {
		ev.Policy = PolicyPark
		if err := m.park(ctx, s, c, holder, holderIndex); err != nil {
			return fmt.Errorf("parking %s for the replacement of %s: %w", s.Dataset, holder.ID, err)
		}
		return nil
	}
	policy := c.PolicyFor(s, outcome)
	ev.Policy = string(policy)
	if policy != c.Release.PolicyFor(outcome) && !s.Orphan {
		m.logger.Warn("no pristine snapshot to roll back to; destroying instead", "dataset", s.Dataset)
	}
	m.logger.Info("releasing slot", "slot", s.ID, "alloc_id", holder.ID, "outcome", outcome, "policy", policy, "orphan", s.Orphan)

	switch policy {
	case model.PolicyRollback:
		err = m.rollback(ctx, s, holderIndex, marked)
	case model.PolicySnapshot:
		err = m.retain(ctx, s, c, holderIndex)
	default:
		err = m.destroyAndRecreate(ctx, s, c, holderIndex)
	}
	if err != nil {
		if !marked {
			// Refused (busy, most often) before anything changed: the mark
			// shows the release under way until a retry gets through.
			if merr := m.markReleasing(ctx, s, holder, holderIndex, outcome); merr != nil && !errors.Is(merr, zfs.ErrNotExist) {
				m.logger.Debug("cannot mark a refused release", "slot", s.ID, "error", merr)
			}
		}
		return fmt.Errorf("releasing %s (%s): %w", s.Dataset, policy, err)
	}
	if s.Orphan {
		m.logger.Info("slot retired: the configuration no longer has it", "slot", s.ID, "dataset", s.Dataset)
		return nil
	}
	m.logger.Info("slot ready", "slot", s.ID, "generation", s.Generation+1)
	return nil
}

// markReleasing records a release on the slot: releasing, with its holder
// and outcome, so a crash midway resumes it as it began.
func (m *Manager) markReleasing(ctx context.Context, s model.Slot, holder model.Alloc, holderIndex uint64, outcome string) error {
	if err := m.zfs.Set(ctx, s.Dataset, model.ReleasingProps(holder.ID, holderIndex, outcome, m.now())); err != nil {
		return fmt.Errorf("marking %s releasing: %w", s.Dataset, err)
	}
	return nil
}

// destroyAndRecreate destroys the slot's own snapshots, then the slot, and
// creates a fresh one. The slot is destroyed without -r: ZFS itself then
// refuses if anything foreign appeared below it since it was read. A busy
// dataset (a process still has a file open in it) is not forced: the error
// is returned and the release is retried on the next pass.
func (m *Manager) destroyAndRecreate(ctx context.Context, s model.Slot, c model.Class, holderIndex uint64) error {
	for _, snap := range s.OwnSnapshots {
		if err := destroySnapshot(ctx, m.zfs, snap); err != nil {
			return err
		}
	}
	if err := m.zfs.Destroy(ctx, s.Dataset, zfs.DestroyOptions{}); err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return foreignBelow(err, s.Dataset)
	}
	return m.replace(ctx, s, c, holderIndex)
}

// replace creates the fresh slot that takes a released one's place, unless
// the configuration no longer has it (an orphan): then nothing does.
func (m *Manager) replace(ctx context.Context, s model.Slot, c model.Class, holderIndex uint64) error {
	if s.Orphan {
		return nil
	}
	return m.createSlot(ctx, c, s.Dataset, model.NewSlotProps(c, s.Dataset, s.Generation+1, holderIndex, m.now()))
}

// rollback returns the slot to its pristine snapshot. The plugin's own
// newer snapshots (the held @retained of a retain that was interrupted, its
// class's policy changed since) go first; it never destroys anyone else's:
// ZFS refuses the rollback if someone took one since the slot was read.
// Then the slot is marked ready, and the properties of its last holding
// cleared (marked: this release wrote a releasing mark).
func (m *Manager) rollback(ctx context.Context, s model.Slot, holderIndex uint64, marked bool) error {
	for _, snap := range s.OwnSnapshots {
		if snap == s.Dataset+"@"+model.PristineSnapshot {
			continue
		}
		if err := destroySnapshot(ctx, m.zfs, snap); err != nil {
			return err
		}
	}
	if err := m.zfs.Rollback(ctx, s.Dataset+"@"+model.PristineSnapshot, false); err != nil {
		return foreignBelow(err, s.Dataset)
	}
	if err := m.zfs.Set(ctx, s.Dataset, model.RolledBackProps(s.Generation+1, holderIndex, m.now())); err != nil {
		return err
	}
	for _, p := range model.ClearedOnReady(s, marked) {
		if err := m.zfs.Inherit(ctx, s.Dataset, p); err != nil {
			return err
		}
	}
	return nil
}

// retain keeps the holder's data: the slot is marked with the name it will
// have, snapshotted under a hold, renamed aside, and a fresh slot created.
func (m *Manager) retain(ctx context.Context, s model.Slot, c model.Class, holderIndex uint64) error {
	aside := m.cfg.RetainedName(s)
	if err := m.zfs.Set(ctx, s.Dataset, model.RetainAsProps(aside, m.now().Add(c.Release.Retain))); err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return err
	}
	snap := s.Dataset + "@" + model.RetainedSnapshot
	if err := m.zfs.Snapshot(ctx, snap, nil); err != nil && !errors.Is(err, zfs.ErrExists) && !errors.Is(err, zfs.ErrNotExist) {
		return err
	}
	if err := m.zfs.Hold(ctx, model.HoldTag, snap); err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return err
	}
	err := m.zfs.Rename(ctx, s.Dataset, aside)
	if errors.Is(err, zfs.ErrExists) {
		// The holder's data from another slot (an allocation holding two
		// slots of the class), or from this slot before a crash between
		// the rename and the re-create, already has the name: keep this
		// data beside it rather than retry the same rename for ever.
		alt := fmt.Sprintf("%s-%s-%s", aside, s.ID, strconv.FormatInt(m.now().Unix(), 10))
		if err := m.zfs.Set(ctx, s.Dataset, model.RetainAsProps(alt, m.now().Add(c.Release.Retain))); err != nil {
			return err
		}
		aside = alt
		err = m.zfs.Rename(ctx, s.Dataset, aside)
	}
	if err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return err
	}
	if err := m.zfs.Set(ctx, aside, model.RetainedProps(aside, m.now())); err != nil {
		return err
	}
	return m.replace(ctx, s, c, holderIndex)
}

// createSlot makes a ready slot: created with props (the class's properties
// and the plugin's state, in one command, so it never exists unmarked), or
// cloned from the class's golden snapshot; then, for classes that roll back,
// its pristine snapshot.
func (m *Manager) createSlot(ctx context.Context, c model.Class, dataset string, props map[string]string) error {
	var err error
	if c.FromSnapshot != "" {
		err = m.zfs.Clone(ctx, c.FromSnapshot, dataset, props)
	} else {
		err = m.zfs.Create(ctx, dataset, props)
	}
	if err != nil && !errors.Is(err, zfs.ErrExists) {
		return err
	}
	if c.NeedsPristine() {
		err := m.zfs.Snapshot(ctx, dataset+"@"+model.PristineSnapshot, nil)
		if err != nil && !errors.Is(err, zfs.ErrExists) {
			return err
		}
	}
	return nil
}

// recordHolder marks a slot held by a live allocation: a ready one, or in
// a sticky class one whose ended holder a, its replacement, inherits. A
// slot that is parked data at the slot's name (a claim a crash
// interrupted) is finished as the claim would have.
func (m *Manager) recordHolder(ctx context.Context, s model.Slot, a model.Alloc) error {
	m.logger.Info("slot held", "slot", s.ID, "alloc_id", a.ID, "job_id", a.JobID, "namespace", a.Namespace)
	if s.State != model.StateParked {
		return m.zfs.Set(ctx, s.Dataset, model.HeldProps(a.ID, a.CreateIndex, m.now()))
	}
	return m.setClaimed(ctx, s.Dataset, a, s.Generation+1)
}

// destroySnapshot destroys one of the plugin's snapshots, first releasing
// the plugin's hold if it has one (a retained snapshot of an interrupted
// retain).
func destroySnapshot(ctx context.Context, z ZFS, snap string) error {
	if err := z.Release(ctx, model.HoldTag, snap); err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return fmt.Errorf("releasing the hold on %s: %w", snap, err)
	}
	if err := z.Destroy(ctx, snap, zfs.DestroyOptions{}); err != nil {
		return fmt.Errorf("destroying %s: %w", snap, err)
	}
	return nil
}

// foreignBelow explains ZFS refusing to destroy or roll back dataset
// because of something below it that the plugin did not make.
func foreignBelow(err error, dataset string) error {
	if errors.Is(err, zfs.ErrHasChildren) || errors.Is(err, zfs.ErrNewerSnapshots) {
		return fmt.Errorf("something below %s is not nomad-device-zfs's (ZFS refused: %w); nothing was destroyed or rolled back", dataset, err)
	}
	return err
}
