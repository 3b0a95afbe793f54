package hooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Helpers for a process other than the plugin (the operator CLI) that reads
// the slots and asks the running plugin to act. Such a process holds none of
// the plugin's slot locks, so it never destroys, creates or renames a slot:
// it reads, and at most records one state change that the plugin's own
// reconcile pass then carries out under its lock.

// ErrSlotChanged: the slot is not what the caller saw when it decided; it
// must look again rather than act on a stale reading.
var ErrSlotChanged = errors.New("slot changed since it was read")

// Inspect scans the parents exactly as one reconcile pass does (one zpool
// process, one zfs process per parent) and builds the View the plugin would
// publish, changing nothing. Each parent's Problem says what the plugin
// would report as unhealthy below it; the error is set only when the scan
// could not read the datasets at all: zpool failed, or every parent's
// listing did (not for a missing pool or parent, which are Problems).
func Inspect(ctx context.Context, cfg *model.Config, z ZFS) (*model.View, error) {
	s := scanParents(ctx, cfg, z, time.Now(), nil, nopObserver{})
	v := model.BuildView(cfg, s, nil)
	if s.PoolErr != nil && !errors.Is(s.PoolErr, zfs.ErrNotExist) {
		return v, s.PoolErr
	}
	var first error
	failed := 0
	for _, p := range cfg.Parents() {
		if err := s.ListErrs[p]; err != nil && !errors.Is(err, zfs.ErrNotExist) {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if failed == len(cfg.Parents()) {
		return v, first
	}
	return v, nil
}

// ReadSlot reads one configured slot (one zfs process). An ID that is not
// one of cfg's slots is ErrUnknownSlot; a slot whose dataset is missing
// comes back with Exists false.
func ReadSlot(ctx context.Context, cfg *model.Config, z ZFS, id string) (model.Slot, error) {
	class, ok := cfg.ClassOf(id)
	if !ok {
		return model.Slot{}, fmt.Errorf("%w %q", ErrUnknownSlot, id)
	}
	return readSlot(ctx, cfg, z, class, cfg.SlotDataset(class, id), "")
}

// readSlot lists the dataset of one slot of class with its snapshots and
// anything below it (one zfs process) and builds the slot from them; a
// missing dataset gives Exists false. parentMountpoint is the parent's, ""
// when unknown.
func readSlot(ctx context.Context, cfg *model.Config, z ZFS, class, dataset, parentMountpoint string) (model.Slot, error) {
	rows, err := z.List(ctx, dataset, model.UserProps)
	if err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return model.Slot{}, err
	}
	return model.SlotFromListing(cfg, class, dataset, rows, parentMountpoint), nil
}

// MarkReleasing records, in one `zfs set`, that seen's holder has ended and
// its release is asked for by an operator (model.OperatorReleaseProps). The
// plugin's next reconcile pass (or a Reserve) then releases the slot by its
// class's policy, exactly as it resumes a release interrupted by a crash.
//
// ZFS has no compare-and-set, so the slot is re-read first and nothing is
// written unless it is still the dataset seen (model.Slot.Same); otherwise
// ErrSlotChanged. It refuses what model.CheckMarkReleasing refuses: a slot
// that is not owned, does not exist or is ready.
func MarkReleasing(ctx context.Context, cfg *model.Config, z ZFS, seen model.Slot, now time.Time) error {
	if err := model.CheckMarkReleasing(seen); err != nil {
		return err
	}
	cur, err := ReadSlot(ctx, cfg, z, seen.ID)
	if err != nil {
		return err
	}
	if !cur.Same(seen) {
		return fmt.Errorf("%w: %s was %s (holder %q, generation %d), is now %s (holder %q, generation %d)",
			ErrSlotChanged, seen.Dataset, seen.State, seen.Holder, seen.Generation, cur.State, cur.Holder, cur.Generation)
	}
	return z.Set(ctx, seen.Dataset, model.OperatorReleaseProps(seen, now))
}
