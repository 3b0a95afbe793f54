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
		if err := DestroyRetained(ctx, m.zfs, p.Retained.Dataset); err != nil {
			m.logger.Error("cannot prune retained data", "dataset", p.Retained.Dataset, "error", err)
			continue
		}
		m.logger.Info("pruned retained data", "dataset", p.Retained.Dataset, "expired", p.Expired)
		pruned = true
	}
	return pruned
}

// DestroyRetained releases the plugin's hold on a retained dataset's
// snapshot and destroys the dataset with its snapshots. Both steps succeed
// on what is already gone, so the plugin and an operator may race on it.
func DestroyRetained(ctx context.Context, z ZFS, dataset string) error {
	snap := dataset + "@" + model.RetainedSnapshot
	if err := z.Release(ctx, model.HoldTag, snap); err != nil {
		return fmt.Errorf("releasing the hold on %s: %w", snap, err)
	}
	if err := z.Destroy(ctx, dataset, zfs.DestroyOptions{Recursive: true}); err != nil {
		return fmt.Errorf("destroying %s: %w", dataset, err)
	}
	return nil
}
