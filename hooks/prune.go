package hooks

import (
	"context"
	"fmt"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// pruneRetained destroys retained data past its expiry, and the oldest past
// the class's RetainMax (model.RetainedDue decides). It reports whether it
// destroyed anything.
func (m *Manager) pruneRetained(ctx context.Context, cv *model.ClassView) bool {
	pruned := false
	for _, p := range model.RetainedDue(cv.Class.Release, cv.Retained, m.now()) {
		if err := DestroyRetained(ctx, m.cfg, m.zfs, p.Retained); err != nil {
			m.logger.Error("cannot prune retained data", "dataset", p.Retained.Dataset, "error", err)
			continue
		}
		m.logger.Info("pruned retained data", "dataset", p.Retained.Dataset, "expired", p.Expired)
		pruned = true
	}
	return pruned
}

// retireClasses destroys the class datasets of removed classes that have
// nothing left below them (their orphans released, their retained data
// expired), without -r: ZFS itself refuses if anything appeared since the
// scan. It reports whether it destroyed anything.
func (m *Manager) retireClasses(ctx context.Context, v *model.View) bool {
	retired := false
	for _, cv := range v.Removed {
		if !cv.Empty || v.Problem != "" {
			continue
		}
		if err := m.zfs.Destroy(ctx, cv.Dataset, zfs.DestroyOptions{}); err != nil {
			m.logger.Error("cannot destroy the dataset of a removed class", "dataset", cv.Dataset, "error", foreignBelow(err, cv.Dataset))
			continue
		}
		m.logger.Info("destroyed the dataset of a class the configuration no longer has", "dataset", cv.Dataset)
		retired = true
	}
	return retired
}

// finishRenamed completes retained data a crash left between the rename
// and the rewrite of its owner mark (still in the slot's state, recognised
// by PropRetainAs). It reports whether it changed anything.
func (m *Manager) finishRenamed(ctx context.Context, cv *model.ClassView) bool {
	changed := false
	for _, r := range cv.Retained {
		if model.State(r.Info.User.Get(model.PropState)) == model.StateRetained {
			continue
		}
		if err := m.zfs.Set(ctx, r.Dataset, model.RetainedProps(r.Dataset, m.now())); err != nil {
			m.logger.Error("cannot finish retained data", "dataset", r.Dataset, "error", err)
			continue
		}
		m.logger.Info("finished retained data after a crash", "dataset", r.Dataset)
		changed = true
	}
	return changed
}

// DestroyRetained destroys retained data r, as a scan read it: the plugin's
// hold on its snapshot is released, the snapshot destroyed, then the
// dataset, without -r, so ZFS itself refuses if anything foreign appeared
// below it since. Data with anything foreign below it (model.
// CheckDestroyRetained) is not touched at all. Every step succeeds on what
// is already gone, so the plugin and an operator may race on it.
func DestroyRetained(ctx context.Context, cfg *model.Config, z ZFS, r model.Retained) error {
	if err := model.CheckDestroyRetained(cfg, r); err != nil {
		return err
	}
	for _, snap := range r.OwnSnapshots {
		// @retained, and the @pristine that parked data took along.
		if err := destroySnapshot(ctx, z, snap); err != nil {
			return err
		}
	}
	if err := z.Destroy(ctx, r.Dataset, zfs.DestroyOptions{}); err != nil {
		return fmt.Errorf("destroying %s: %w", r.Dataset, foreignBelow(err, r.Dataset))
	}
	return nil
}
