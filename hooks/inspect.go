package hooks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Helpers for a process other than the plugin (the operator CLI) that reads
// the slots and asks the running plugin to act. Such a process holds none of
// the plugin's slot locks, so it never destroys, creates or renames a slot:
// it reads, and at most records one state change that the plugin's own
// reconcile pass then carries out under its lock.

// OutcomeOperator: an operator asked for the release (nomad-device-zfs
// release). The class's Policy applies, not OnFailure.
const OutcomeOperator = "operator"

// ErrSlotChanged: the slot is not what the caller saw when it decided; it
// must look again rather than act on a stale reading.
var ErrSlotChanged = errors.New("slot changed since it was read")

// Inspect scans the parent exactly as one reconcile pass does (one zpool and
// one zfs process) and builds the View the plugin would publish, changing
// nothing. The View's Problem says what the plugin would report as unhealthy;
// the error is set only when the scan could not read the datasets at all
// (not for a missing pool or parent, which are Problems).
func Inspect(ctx context.Context, cfg *Config, z ZFS) (*View, error) {
	s := scanParent(ctx, cfg, z, time.Now(), nil)
	v := buildView(cfg, s, nil)
	switch {
	case s.poolErr != nil && !errors.Is(s.poolErr, zfs.ErrNotExist):
		return v, s.poolErr
	case s.listErr != nil && !errors.Is(s.listErr, zfs.ErrNotExist):
		return v, s.listErr
	}
	return v, nil
}

// ReadSlot reads one configured slot (one zfs process). An ID that is not
// one of cfg's slots is ErrUnknownSlot; a slot whose dataset is missing
// comes back with Exists false.
func ReadSlot(ctx context.Context, cfg *Config, z ZFS, id string) (Slot, error) {
	class, ok := cfg.classOf(id)
	if !ok {
		return Slot{}, fmt.Errorf("%w %q", ErrUnknownSlot, id)
	}
	return readSlot(ctx, cfg, z, class, id)
}

// readSlot lists one slot's dataset and its snapshots (one zfs process) and
// builds the slot from them; a missing dataset gives Exists false.
func readSlot(ctx context.Context, cfg *Config, z ZFS, class, id string) (Slot, error) {
	rows, err := z.List(ctx, cfg.slotDataset(class, id), userProps)
	if err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return Slot{}, err
	}
	byName := make(map[string]*zfs.Dataset, len(rows))
	for i := range rows {
		byName[rows[i].Name] = &rows[i]
	}
	return slotFromRows(cfg, class, id, byName), nil
}

// MarkReleasing records, in one `zfs set`, that seen's holder has ended and
// its release is asked for by an operator: state releasing, outcome
// operator, the holder as recorded. The plugin's next reconcile pass (or a
// Reserve) then releases the slot by its class's policy, exactly as it
// resumes a release interrupted by a crash.
//
// ZFS has no compare-and-set, so the slot is re-read first and nothing is
// written unless it is still the dataset seen (same GUID, state, holder and
// generation); otherwise ErrSlotChanged. It refuses a slot that is not
// owned, does not exist or is ready.
func MarkReleasing(ctx context.Context, cfg *Config, z ZFS, seen Slot, now time.Time) error {
	switch {
	case seen.Foreign:
		return fmt.Errorf("%s is not owned by nomad-device-zfs; not touching it", seen.Dataset)
	case !seen.Exists:
		return fmt.Errorf("%s does not exist", seen.Dataset)
	case seen.State == StateReady:
		return fmt.Errorf("%s is ready: nothing to release", seen.Dataset)
	}
	cur, err := ReadSlot(ctx, cfg, z, seen.ID)
	if err != nil {
		return err
	}
	if !cur.Exists || cur.Info.GUID != seen.Info.GUID || cur.State != seen.State ||
		cur.Holder != seen.Holder || cur.Generation != seen.Generation {
		return fmt.Errorf("%w: %s was %s (holder %q, generation %d), is now %s (holder %q, generation %d)",
			ErrSlotChanged, seen.Dataset, seen.State, seen.Holder, seen.Generation, cur.State, cur.Holder, cur.Generation)
	}
	props := map[string]string{
		PropState:   string(StateReleasing),
		PropOutcome: OutcomeOperator,
		PropSince:   strconv.FormatInt(now.Unix(), 10),
	}
	if seen.Holder != "" {
		props[PropHolder] = seen.Holder
	}
	return z.Set(ctx, seen.Dataset, props)
}

// RetainedName is where the snapshot policy puts slot s's data when it
// releases it: one dataset per holder, beside the slots.
func RetainedName(cfg *Config, s Slot) string {
	return retainedName(s, cfg.classDataset(s.Class))
}

// classOf finds the class a configured slot ID belongs to.
func (c *Config) classOf(id string) (string, bool) {
	for _, cl := range c.Classes {
		for n := 1; n <= cl.Slots; n++ {
			if SlotID(cl.Name, n) == id {
				return cl.Name, true
			}
		}
	}
	return "", false
}
