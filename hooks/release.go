package hooks

import (
	"context"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// release gives a slot's data back by its class's policy, as
// model.PlanRelease plans it (in a sticky class it may park the data for
// the holder's replacement instead), re-reading the slot and planning again
// when a command finds a name taken. The caller holds the slot's lock. The
// Observer hears how it ended.
func (m *Manager) release(ctx context.Context, s model.Slot, c model.Class, holder model.Alloc, outcome string) (err error) {
	ev := ReleaseEvent{Slot: s, Holder: holder, Outcome: outcome, Started: time.Now()}
	defer func() { ev.Done, ev.Err = time.Now(), err; m.observer.ReleaseDone(ev) }()
	return m.carryOut(ctx, func(seen model.Seen) (model.Plan, error) {
		p, err := model.PlanRelease(model.ReleaseInput{
			Config: m.cfg, Class: c, Slot: s, Holder: holder, Outcome: outcome,
			Snap: m.snapshot(), SlotOf: m.currentSlot, Seen: seen, Now: m.now(),
		})
		ev.Policy = p.Policy
		return p, err
	}, func(ctx context.Context) (err error) {
		s, err = m.reread(ctx, s.Class, s.Dataset)
		return err
	})
}

// recordHolder records a live allocation as the slot's holder
// (model.PlanRecord). The caller holds the slot's lock.
func (m *Manager) recordHolder(ctx context.Context, s model.Slot, a model.Alloc) error {
	return m.run(ctx, model.PlanRecord(s, a, m.now()))
}
