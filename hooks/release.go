package hooks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// release gives a slot's data back by its class's policy and leaves a ready
// slot in its place. Every step tolerates having been done already, so a
// crash between any two resumes here from the recorded state (releasing,
// with holder and outcome). The caller holds the slot's lock.
func (m *Manager) release(ctx context.Context, s Slot, c Class, holder allocwatch.Alloc, outcome string) error {
	now := m.now()
	holderIndex := s.HolderIndex
	if holder.CreateIndex > holderIndex {
		holderIndex = holder.CreateIndex
	}
	if s.State != StateReleasing {
		err := m.zfs.Set(ctx, s.Dataset, map[string]string{
			PropState:       string(StateReleasing),
			PropHolder:      holder.ID,
			PropHolderIndex: strconv.FormatUint(holderIndex, 10),
			PropOutcome:     outcome,
			PropSince:       unix(now),
		})
		if err != nil {
			return fmt.Errorf("marking %s releasing: %w", s.Dataset, err)
		}
		s.State, s.Holder, s.Outcome = StateReleasing, holder.ID, outcome
	}
	policy := c.Release.PolicyFor(outcome)
	if policy == PolicyRollback && !s.HasPristine {
		m.logger.Warn("no pristine snapshot to roll back to; destroying instead", "dataset", s.Dataset)
		policy = PolicyDestroy
	}
	m.logger.Info("releasing slot", "slot", s.ID, "alloc_id", holder.ID, "outcome", outcome, "policy", policy)

	var err error
	switch policy {
	case PolicyRollback:
		err = m.rollback(ctx, s, holderIndex)
	case PolicySnapshot:
		err = m.retain(ctx, s, c, holderIndex)
	default:
		err = m.destroyAndRecreate(ctx, s, c, holderIndex)
	}
	if err != nil {
		return fmt.Errorf("releasing %s (%s): %w", s.Dataset, policy, err)
	}
	m.logger.Info("slot ready", "slot", s.ID, "generation", s.Generation+1)
	return nil
}

// destroyAndRecreate destroys the slot with its snapshots and creates a fresh
// one. A busy dataset (a process still has a file open in it) is not forced:
// the error is returned and the release is retried on the next pass.
func (m *Manager) destroyAndRecreate(ctx context.Context, s Slot, c Class, holderIndex uint64) error {
	if err := m.zfs.Destroy(ctx, s.Dataset, zfs.DestroyOptions{Recursive: true}); err != nil {
		return err
	}
	return m.createSlot(ctx, c, s.Dataset, freshSlotProps(c, s.Dataset, s.Generation+1, holderIndex, m.now()))
}

// rollback returns the slot to its pristine snapshot, destroying any newer
// snapshots the holder took.
func (m *Manager) rollback(ctx context.Context, s Slot, holderIndex uint64) error {
	if err := m.zfs.Rollback(ctx, s.Dataset+"@"+pristine, true); err != nil {
		return err
	}
	if err := m.zfs.Set(ctx, s.Dataset, map[string]string{
		PropState:       string(StateReady),
		PropGeneration:  strconv.Itoa(s.Generation + 1),
		PropHolderIndex: strconv.FormatUint(holderIndex, 10),
		PropSince:       unix(m.now()),
	}); err != nil {
		return err
	}
	return m.clearHolder(ctx, s.Dataset)
}

// retain keeps the holder's data: the slot is marked with the name it will
// have, snapshotted under a hold, renamed aside, and a fresh slot created.
func (m *Manager) retain(ctx context.Context, s Slot, c Class, holderIndex uint64) error {
	aside := retainedName(s, m.cfg.classDataset(c.Name))
	if err := m.zfs.Set(ctx, s.Dataset, map[string]string{
		PropRetainAs: aside,
		PropExpires:  unix(m.now().Add(c.Release.Retain)),
	}); err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return err
	}
	snap := s.Dataset + "@" + retainedSnapshot
	if err := m.zfs.Snapshot(ctx, snap, nil); err != nil && !errors.Is(err, zfs.ErrExists) && !errors.Is(err, zfs.ErrNotExist) {
		return err
	}
	if err := m.zfs.Hold(ctx, holdTag, snap); err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return err
	}
	err := m.zfs.Rename(ctx, s.Dataset, aside)
	if errors.Is(err, zfs.ErrExists) {
		// The holder's data from another slot (an allocation holding two
		// slots of the class), or from this slot before a crash between
		// the rename and the re-create, already has the name: keep this
		// data beside it rather than retry the same rename for ever.
		alt := fmt.Sprintf("%s-%s-%s", aside, s.ID, unix(m.now()))
		if err := m.zfs.Set(ctx, s.Dataset, map[string]string{PropRetainAs: alt}); err != nil {
			return err
		}
		aside = alt
		err = m.zfs.Rename(ctx, s.Dataset, aside)
	}
	if err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return err
	}
	if err := m.finishRetained(ctx, aside); err != nil {
		return err
	}
	return m.createSlot(ctx, c, s.Dataset, freshSlotProps(c, s.Dataset, s.Generation+1, holderIndex, m.now()))
}

// finishRetained makes a renamed slot a retained dataset of its own.
func (m *Manager) finishRetained(ctx context.Context, aside string) error {
	return m.zfs.Set(ctx, aside, map[string]string{
		PropOwner: aside,
		PropState: string(StateRetained),
		PropSince: unix(m.now()),
	})
}

// finishRenamed completes retained datasets a crash left between the
// rename and the rewrite of their owner mark: still in state releasing,
// recognised by PropRetainAs. It reports whether it changed anything.
func (m *Manager) finishRenamed(ctx context.Context, cv *ClassView) bool {
	changed := false
	for _, r := range cv.Retained {
		if State(r.Info.User[PropState]) == StateRetained {
			continue
		}
		if err := m.finishRetained(ctx, r.Dataset); err != nil {
			m.logger.Error("cannot finish retained data", "dataset", r.Dataset, "error", err)
			continue
		}
		m.logger.Info("finished retained data after a crash", "dataset", r.Dataset)
		changed = true
	}
	return changed
}

// retainedName is where a slot's retained data goes: one per holder.
func retainedName(s Slot, classDataset string) string {
	tag := s.Holder
	if tag == "" {
		tag = fmt.Sprintf("%s-gen%d", s.ID, s.Generation)
	}
	return classDataset + "/retained-" + tag
}

// freshSlotProps are a re-created slot's properties: it keeps the index of
// the holder whose data it replaced, so that holder's record is not taken
// for a newer one.
func freshSlotProps(c Class, dataset string, generation int, holderIndex uint64, now time.Time) map[string]string {
	props := newSlotProps(c, dataset, generation, now)
	if holderIndex > 0 {
		props[PropHolderIndex] = strconv.FormatUint(holderIndex, 10)
	}
	return props
}

// createSlot makes a ready slot: created with props (the class's properties
// and the plugin's state, in one command, so it never exists unmarked), or
// cloned from the class's golden snapshot; then, for classes that roll back,
// its pristine snapshot.
func (m *Manager) createSlot(ctx context.Context, c Class, dataset string, props map[string]string) error {
	var err error
	if c.FromSnapshot != "" {
		err = m.zfs.Clone(ctx, c.FromSnapshot, dataset, props)
	} else {
		err = m.zfs.Create(ctx, dataset, props)
	}
	if err != nil && !errors.Is(err, zfs.ErrExists) {
		return err
	}
	if c.Release.Policy == PolicyRollback || c.Release.OnFailure == PolicyRollback {
		err := m.zfs.Snapshot(ctx, dataset+"@"+pristine, nil)
		if err != nil && !errors.Is(err, zfs.ErrExists) {
			return err
		}
	}
	return nil
}

// clearHolder removes the holder and outcome recorded on a slot.
func (m *Manager) clearHolder(ctx context.Context, dataset string) error {
	for _, p := range []string{PropHolder, PropOutcome} {
		if err := m.zfs.Inherit(ctx, dataset, p); err != nil {
			return err
		}
	}
	return nil
}

// recordHolder marks a ready slot held by a live allocation.
func (m *Manager) recordHolder(ctx context.Context, s Slot, a allocwatch.Alloc) error {
	m.logger.Info("slot held", "slot", s.ID, "alloc_id", a.ID, "job_id", a.JobID, "namespace", a.Namespace)
	return m.zfs.Set(ctx, s.Dataset, map[string]string{
		PropState:       string(StateHeld),
		PropHolder:      a.ID,
		PropHolderIndex: strconv.FormatUint(a.CreateIndex, 10),
		PropSince:       unix(m.now()),
	})
}

// pruneRetained destroys retained data past its expiry, and the oldest past
// the class's RetainMax (RetainedDue decides). It reports whether it
// destroyed anything.
func (m *Manager) pruneRetained(ctx context.Context, cv *ClassView) bool {
	pruned := false
	for _, p := range RetainedDue(cv.Class.Release, cv.Retained, m.now()) {
		if err := DestroyRetained(ctx, m.zfs, p.Retained.Dataset); err != nil {
			m.logger.Error("cannot prune retained data", "dataset", p.Retained.Dataset, "error", err)
			continue
		}
		m.logger.Info("pruned retained data", "dataset", p.Retained.Dataset, "expired", p.Expired)
		pruned = true
	}
	return pruned
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
