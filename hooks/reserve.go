package hooks

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
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
	Slot  Slot
	Class Class
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
			return nil, fmt.Errorf("%w: no scan of %s has finished yet", ErrNotReady, m.cfg.Parent)
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

// reserveOne fences one slot; the caller holds its lock.
func (m *Manager) reserveOne(ctx context.Context, id string) (Grant, error) {
	fresh := false
	for {
		s, cv := m.current(id)
		if !s.Exists || (s.State != StateReleasing && !s.Healthy) {
			return Grant{}, fmt.Errorf("%w: %s (%s): %s", ErrNotReady, id, s.Dataset, s.Reason)
		}
		if m.allocs == nil {
			return Grant{Slot: *s, Class: cv.Class}, nil
		}
		d := decideReserve(*s, cv.Class.Name, m.snapshot(), fresh)
		var err error
		switch d.kind {
		case reserveGrant:
			if s.State != StateReady && s.State != StateHeld {
				break // a release just ran: read the slot again
			}
			if s.State == StateReady && d.alloc.ID != "" {
				// Record the holder now, not at the next reconcile: an
				// allocation that ends and is garbage-collected before
				// then would leave its data in a ready slot that no
				// allocation names, for the next one to read.
				if err = m.recordHolder(ctx, *s, d.alloc); err != nil {
					break
				}
				if _, err = m.reread(ctx, cv.Class.Name, id); err != nil {
					break
				}
				continue
			}
			return Grant{Slot: *s, Class: cv.Class}, nil
		case reserveFail:
			return Grant{}, fmt.Errorf("%w %s (%s): %s", ErrRefused, id, s.Dataset, d.reason)
		case reserveRefresh:
			fresh, err = m.refresh(ctx)
		case reserveWait:
			m.logger.Info("waiting for the previous holder to end", "slot", id, "alloc_id", d.alloc.ID, "reason", d.reason)
			if err = m.sleep(ctx, waitStep); err == nil {
				fresh, err = m.refresh(ctx)
			}
		case reserveReleaseFirst:
			err = m.release(ctx, *s, cv.Class, d.alloc, d.outcome)
			fresh = false
		case reserveCheckLost:
			err = m.releaseIfNotRunningLocally(ctx, *s, cv.Class, d.alloc)
		case reserveCheckGone:
			err = m.releaseIfGone(ctx, *s, cv.Class, d.alloc.ID)
		}
		if d.kind == reserveReleaseFirst || d.kind == reserveCheckLost || d.kind == reserveCheckGone {
			if _, rerr := m.reread(ctx, cv.Class.Name, id); rerr != nil && err == nil {
				err = rerr
			}
			if errors.Is(err, errKeep) {
				// The holder may still run: wait, then decide on a fresh
				// answer, or a holder that has since ended is never seen to.
				err = m.sleep(ctx, waitStep)
				fresh = false
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return Grant{}, fmt.Errorf("%w: %s (%s): gave up waiting: %v (last: %v)", ErrNotReady, id, s.Dataset, ctx.Err(), err)
			}
			m.logger.Warn("reserve: retrying", "slot", id, "error", err)
			if serr := m.sleep(ctx, waitStep); serr != nil {
				return Grant{}, fmt.Errorf("%w: %s (%s): gave up waiting: %v", ErrNotReady, id, s.Dataset, err)
			}
		}
	}
}

// refresh fetches a fresh snapshot from the Nomad API (one non-blocking
// query) for a Reserve the last snapshot cannot explain.
func (m *Manager) refresh(ctx context.Context) (bool, error) {
	snap, err := m.allocs.Refresh(ctx)
	if err != nil {
		return false, fmt.Errorf("cannot reach the Nomad API to check who holds the slot: %w", err)
	}
	m.storeSnapshot(snap)
	return true, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
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
