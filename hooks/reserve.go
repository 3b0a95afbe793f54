package hooks

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// ErrUnknownSlot: Reserve got an ID that is not one of the configured slots.
var ErrUnknownSlot = errors.New("unknown device ID")

// ErrNotReady: the slot exists in the configuration but cannot be handed out
// now (not created, releasing and busy, pool unhealthy, Nomad unreachable).
var ErrNotReady = errors.New("slot not ready")

// ErrRefused: handing the slot out could share or wipe live data.
var ErrRefused = errors.New("refusing to hand out slot")

// Grant is one reserved slot: what Reserve hands the task.
type Grant struct {
	Slot  model.Slot
	Class model.Class
}

// waitStep paces Reserve while it waits for a previous holder to end or for
// the Nomad API to answer.
const waitStep = 500 * time.Millisecond

// Reserve resolves device IDs to slots for a task start, fencing each
// against its previous holder. It asks Nomad once (a non-blocking query to
// the local agent) who names the slot; a ready slot costs one zfs set (the
// caller recorded as its holder), a held one none, and a holder's data is
// never touched by its own Reserve. If the previous holder ended and
// its release is pending, Reserve completes it first; if it is still
// stopping (a destructive update gave its replacement the same slot), Reserve
// waits for it; all bounded by ctx. When it cannot be sure, it fails rather
// than share or wipe: Nomad then restarts or reschedules the task.
func (m *Manager) Reserve(ctx context.Context, ids []string) ([]Grant, error) {
	v, updated := m.View()
	for v == nil {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: no scan of %s has finished yet", ErrNotReady, strings.Join(m.cfg.Parents(), ", "))
		case <-updated:
			v, updated = m.View()
		}
	}
	// Lock in a fixed order: two Reserves never deadlock.
	sorted := append([]string(nil), ids...)
	sort.Strings(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return nil, fmt.Errorf("device ID %q requested twice", sorted[i])
		}
	}
	for _, id := range sorted {
		if s, _ := v.Slot(id); s == nil {
			return nil, fmt.Errorf("%w %q: this node's slots are %s", ErrUnknownSlot, id, knownIDs(v))
		}
		lock := m.locks.get(id)
		lock.Lock()
		defer lock.Unlock()
	}
	// What the fence read and changed is published when Reserve returns.
	defer m.publishOverrides()
	grants := make(map[string]Grant, len(ids))
	for _, id := range sorted {
		g, err := m.reserveOne(ctx, id)
		if err != nil {
			return nil, err
		}
		grants[id] = g
	}
	out := make([]Grant, 0, len(ids))
	for _, id := range ids {
		out = append(out, grants[id])
	}
	return out, nil
}

// reserveOne fences one slot, on the driver: model.DecideReserveMove
// decides each move from the slot as last read and Nomad's latest answer.
// The caller holds the slot's lock.
func (m *Manager) reserveOne(ctx context.Context, id string) (Grant, error) {
	var (
		s  *model.Slot
		cv *model.ClassView
	)
	mv, err := m.drive(ctx, driveLoop{logWait: m.logWait, decide: func(since model.Since, last model.Result) model.Move {
		s, cv = m.current(id)
		return model.DecideReserveMove(model.ReserveLoop{Class: cv.Class, Slot: *s, Snap: m.snapshot(),
			Nomad: m.allocs != nil, Pace: waitStep, Since: since, Last: last})
	}})
	switch {
	case err != nil:
		return Grant{}, fmt.Errorf("%w: %s (%s): %v", ErrNotReady, id, s.Dataset, err)
	case mv.Kind == model.MoveFail && mv.Refused:
		return Grant{}, fmt.Errorf("%w %s (%s): %s", ErrRefused, id, s.Dataset, mv.Reason)
	case mv.Kind == model.MoveFail:
		return Grant{}, fmt.Errorf("%w: %s (%s): %s", ErrNotReady, id, s.Dataset, mv.Reason)
	}
	return Grant{Slot: mv.Slot, Class: cv.Class}, nil
}

// refresh fetches a fresh snapshot from the Nomad API (one non-blocking
// query) for a Reserve the last snapshot cannot explain.
func (m *Manager) refresh(ctx context.Context) error {
	snap, err := m.allocs.Refresh(ctx)
	if err != nil {
		return fmt.Errorf("cannot reach the Nomad API to check who holds the slot: %w", err)
	}
	m.storeSnapshot(snap)
	return nil
}

func knownIDs(v *model.View) string {
	var ids []string
	for _, cv := range v.Classes {
		for _, s := range cv.Slots {
			ids = append(ids, s.ID)
		}
	}
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}
