package hooks

import (
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// publish makes v current. Overrides older than the scan that built v are
// dropped: v has read their datasets since.
func (m *Manager) publish(v *model.View, scannedAt time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.view = v
	for id, o := range m.overrides {
		if !o.at.After(scannedAt) {
			delete(m.overrides, id)
		}
	}
	close(m.updated)
	m.updated = make(chan struct{})
}

// publishOverrides publishes the current view with the slots re-read since
// it was published in place of its own, so the fingerprint and Stats see a
// release at once; the next scan replaces the view whole.
func (m *Manager) publishOverrides() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.view != nil {
		m.publishOverridesLocked(m.view, false)
	}
}

// publishPartial is publishOverrides while a pass creates slots: over the
// published view, or over base (the pass's scan) before the first publish,
// and only once every class has a slot to offer.
func (m *Manager) publishPartial(base *model.View) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.view != nil {
		base = m.view
	}
	m.publishOverridesLocked(base, true)
}

// publishOverridesLocked publishes base with the unpublished overrides; the
// caller holds mu. With partial set, it publishes only a view that offers
// every class. It costs a look at each override (slots re-read since the
// last scan), and a copy of a class's slots only when one of them changed.
func (m *Manager) publishOverridesLocked(base *model.View, partial bool) {
	type change struct {
		class, slot int
		o           *override
	}
	var changes []change
	for id, o := range m.overrides {
		if o.published || !o.at.After(base.ScannedAt) {
			continue
		}
		if ci, si, ok := base.SlotIndex(id); ok {
			changes = append(changes, change{ci, si, o})
		}
	}
	if len(changes) == 0 {
		return
	}
	v := *base
	v.Classes = append([]model.ClassView(nil), v.Classes...)
	copied := map[int]bool{}
	for _, c := range changes {
		if !copied[c.class] {
			v.Classes[c.class].Slots = append([]model.Slot(nil), v.Classes[c.class].Slots...)
			copied[c.class] = true
		}
		v.Classes[c.class].Slots[c.slot] = c.o.slot
	}
	if partial && !offersEveryClass(&v) {
		return
	}
	for _, c := range changes {
		c.o.published = true
	}
	m.view = &v
	close(m.updated)
	m.updated = make(chan struct{})
}
