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

// Inspect scans the parent exactly as one reconcile pass does (one zpool and
// one zfs process) and builds the View the plugin would publish, changing
// nothing. The View's Problem says what the plugin would report as unhealthy;
// the error is set only when the scan could not read the datasets at all
// (not for a missing pool or parent, which are Problems).
func Inspect(ctx context.Context, cfg *model.Config, z ZFS) (*model.View, error) {
	s := scanParent(ctx, cfg, z, time.Now(), nil)
	v := model.BuildView(cfg, s, nil)
	switch {
	case s.PoolErr != nil && !errors.Is(s.PoolErr, zfs.ErrNotExist):
		return v, s.PoolErr
	case s.ListErr != nil && !errors.Is(s.ListErr, zfs.ErrNotExist):
		return v, s.ListErr
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
	return readSlot(ctx, cfg, z, class, id, "")
}

// readSlot lists one slot's dataset with its snapshots and anything below
// it (one zfs process) and builds the slot from them; a missing dataset
// gives Exists false. parentMountpoint is the parent's, "" when unknown.
func readSlot(ctx context.Context, cfg *model.Config, z ZFS, class, id, parentMountpoint string) (model.Slot, error) {
	rows, err := z.List(ctx, cfg.SlotDataset(class, id), model.UserProps)
	if err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return model.Slot{}, err
	}
	return model.SlotFromRows(cfg, class, id, rows, parentMountpoint), nil
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
