package hooks

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	hclog "github.com/hashicorp/go-hclog"

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

// reserveOne fences one slot; the caller holds its lock.
func (m *Manager) reserveOne(ctx context.Context, id string) (Grant, error) {
	// read: the slot as current gives it was read by this Reserve, since
	// its last pause. Nothing is released on an older read: something
	// foreign may have appeared below the slot since the scan, and while
	// ZFS refuses a destroy or a rollback over it, a rename (a retain, a
	// park) takes it along.
	fresh, read, start := false, false, m.now()
	// waitedFor is the holder this Reserve last said it waits for: said
	// once, not at every step.
	waitedFor := ""
	for {
		s, cv := m.current(id)
		if !s.Exists || (s.State != model.StateReleasing && !s.Healthy) {
			return Grant{}, fmt.Errorf("%w: %s (%s): %s", ErrNotReady, id, s.Dataset, s.Reason)
		}
		if m.allocs == nil {
			return Grant{Slot: *s, Class: cv.Class}, nil
		}
		d := model.DecideReserve(cv.Class, *s, m.snapshot(), fresh)
		if releases := d.Kind == model.ReserveReleaseFirst || d.Kind == model.ReserveCheckLost || d.Kind == model.ReserveCheckGone; releases && !read {
			if _, err := m.reread(ctx, cv.Class.Name, s.Dataset); err != nil {
				return Grant{}, fmt.Errorf("%w: %s (%s): %v", ErrNotReady, id, s.Dataset, err)
			}
			read = true
			continue
		}
		var err error
		switch d.Kind {
		case model.ReserveInherit:
			// The replacement of the ended holder, in a sticky class: the
			// data is its own now.
			if err = m.recordHolder(ctx, *s, d.Alloc); err == nil {
				_, err = m.reread(ctx, cv.Class.Name, s.Dataset)
			}
			if err == nil {
				continue
			}
		case model.ReserveGrant:
			if s.State != model.StateReady && s.State != model.StateHeld {
				break // a release just ran: read the slot again
			}
			if s.State == model.StateReady && d.Alloc.ID != "" {
				read = false // takeReady may pause
				if fresh, err = m.takeReady(ctx, *s, cv.Class, d.Alloc, fresh, start); err == nil {
					continue
				}
				break
			}
			return Grant{Slot: *s, Class: cv.Class}, nil
		case model.ReserveFail:
			return Grant{}, fmt.Errorf("%w %s (%s): %s", ErrRefused, id, s.Dataset, d.Reason)
		case model.ReserveRefresh:
			fresh, err = m.refresh(ctx)
		case model.ReserveWait:
			level := hclog.Debug
			if d.Alloc.ID != waitedFor {
				level, waitedFor = hclog.Info, d.Alloc.ID
			}
			m.logger.Log(level, "waiting for the previous holder to end", "slot", id, "alloc_id", d.Alloc.ID, "reason", d.Reason)
			read = false
			if err = m.sleep(ctx, waitStep); err == nil {
				fresh, err = m.refresh(ctx)
			}
		case model.ReserveReleaseFirst:
			err = m.release(ctx, *s, cv.Class, d.Alloc, d.Outcome)
			fresh = false
		case model.ReserveCheckLost:
			err = m.releaseIfNotRunningLocally(ctx, *s, cv.Class, d.Alloc, model.OutcomeLost)
		case model.ReserveCheckGone:
			err = m.releaseIfGone(ctx, *s, cv.Class, d.Alloc.ID)
		}
		if d.Kind == model.ReserveReleaseFirst || d.Kind == model.ReserveCheckLost || d.Kind == model.ReserveCheckGone {
			if _, rerr := m.reread(ctx, cv.Class.Name, s.Dataset); rerr != nil && err == nil {
				err = rerr
			}
			if errors.Is(err, errKeep) {
				// The holder may still run: wait, then decide on a fresh
				// answer, or a holder that has since ended is never seen to.
				err = m.sleep(ctx, waitStep)
				fresh, read = false, false
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return Grant{}, fmt.Errorf("%w: %s (%s): gave up waiting: %v (last: %v)", ErrNotReady, id, s.Dataset, ctx.Err(), err)
			}
			m.logger.Warn("reserve: retrying", "slot", id, "error", err)
			read = false
			if serr := m.sleep(ctx, waitStep); serr != nil {
				return Grant{}, fmt.Errorf("%w: %s (%s): gave up waiting: %v", ErrNotReady, id, s.Dataset, err)
			}
		}
	}
}

// takeReady makes ready slot s caller's before the grant: in a sticky
// class its predecessor's parked data is claimed onto it, otherwise caller
// is recorded as its holder now, not at the next pass (an allocation that
// ends and is garbage-collected before then would leave its data in a
// ready slot that no allocation names, for the next one to read). While the
// predecessor's data is still in its own slot, it waits a step and fetches
// a fresh answer instead. It returns whether the snapshot is fresh.
func (m *Manager) takeReady(ctx context.Context, s model.Slot, c model.Class, caller model.Alloc, fresh bool, start time.Time) (bool, error) {
	claimed, err := m.inherit(ctx, s, c, caller, start)
	switch {
	case errors.Is(err, errWaitPark):
		// Woken early when a pull makes a copy claimable: the wait is
		// still bounded by waitStep, the look again is only sooner.
		if err := m.pulls.pause(ctx, m.sleep, waitStep); err != nil {
			return false, err
		}
		return m.refresh(ctx)
	case err != nil:
		return false, err
	case !claimed:
		if err := m.recordHolder(ctx, s, caller); err != nil {
			return false, err
		}
	}
	_, err = m.reread(ctx, c.Name, s.Dataset)
	return fresh, err
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
