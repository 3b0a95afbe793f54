package hooks

import (
	"context"
	"fmt"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Prune is one retained dataset that is due for destruction.
type Prune struct {
	Retained Retained
	// Expired: past its expiry; otherwise it is beyond the class's
	// RetainMax (the oldest go first).
	Expired bool
}

// RetainedDue decides which of a class's retained datasets (newest first,
// as ClassView.Retained lists them) are to be destroyed at now: those past
// their expiry, and those beyond r.RetainMax. It is pure; the plugin's
// reconcile and the operator's `gc` both prune by it.
func RetainedDue(r Release, retained []Retained, now time.Time) []Prune {
	var out []Prune
	keep := r.RetainMax
	for i, ret := range retained {
		expired := !ret.Expires.IsZero() && now.After(ret.Expires)
		if !expired && (keep <= 0 || i < keep) {
			continue
		}
		out = append(out, Prune{Retained: ret, Expired: expired})
	}
	return out
}

// DestroyRetained releases the plugin's hold on a retained dataset's
// snapshot and destroys the dataset with its snapshots. Both steps succeed
// on what is already gone, so the plugin and an operator may race on it.
func DestroyRetained(ctx context.Context, z ZFS, dataset string) error {
	snap := dataset + "@" + retainedSnapshot
	if err := z.Release(ctx, holdTag, snap); err != nil {
		return fmt.Errorf("releasing the hold on %s: %w", snap, err)
	}
	if err := z.Destroy(ctx, dataset, zfs.DestroyOptions{Recursive: true}); err != nil {
		return fmt.Errorf("destroying %s: %w", dataset, err)
	}
	return nil
}
