package hooks

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownSlot: Reserve got an ID that is not one of the configured slots.
var ErrUnknownSlot = errors.New("unknown device ID")

// ErrNotReady: the slot exists in the configuration but cannot be handed out
// now (not created, releasing, pool unhealthy, ...).
var ErrNotReady = errors.New("slot not ready")

// Grant is one reserved slot: what Reserve hands the task.
type Grant struct {
	Slot  Slot
	Class Class
}

// Reserve resolves device IDs to slots for a task start or restart. It reads
// the published view only: a ready slot costs no zfs process. It is
// idempotent, so a restarted task gets the same dataset, untouched. If no
// view has been published yet it waits for the first one until ctx ends.
func (m *Manager) Reserve(ctx context.Context, ids []string) ([]Grant, error) {
	v, updated := m.View()
	for v == nil {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: no scan of %s has finished yet", ErrNotReady, m.cfg.Parent)
		case <-updated:
			v, updated = m.View()
		}
	}

	grants := make([]Grant, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			return nil, fmt.Errorf("device ID %q requested twice", id)
		}
		seen[id] = true
		s, cv := v.Slot(id)
		if s == nil {
			return nil, fmt.Errorf("%w %q: this node's slots are %s", ErrUnknownSlot, id, knownIDs(v))
		}
		if !s.Exists || !s.Healthy {
			return nil, fmt.Errorf("%w: %s (%s): %s", ErrNotReady, id, s.Dataset, s.Reason)
		}
		grants = append(grants, Grant{Slot: *s, Class: cv.Class})
	}
	return grants, nil
}

func knownIDs(v *View) string {
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
