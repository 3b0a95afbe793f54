package hooks

import (
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// publish makes v current, with the slots re-read since its data was read
// in place of its rows. Overrides older than its data are dropped: v has
// read their datasets since. Its data is as old as v.ScannedAt, not the
// scan's start: a scan that failed keeps the last good set
// (model.BuildView), and a slot re-read after that set but before the
// failed scan is newer than it, so it stays.
func (m *Manager) publish(v *model.View) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, o := range m.overrides {
		if !o.at.After(v.ScannedAt) {
			delete(m.overrides, id)
		}
	}
	v, applied := m.overlayLocked(v, true)
	for _, o := range applied {
		o.published = true
	}
	m.view = v
	close(m.updated)
	m.updated = make(chan struct{})
}

// overlaid returns v with the slots re-read since its scan began in place
// of the scan's rows. A scan runs off Run's loop, so it may have listed a
// slot before a release on the loop changed it; the pass must plan from
// the newer read.
func (m *Manager) overlaid(v *model.View) *model.View {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v, _ = m.overlayLocked(v, true)
	return v
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
// every class.
func (m *Manager) publishOverridesLocked(base *model.View, partial bool) {
	v, applied := m.overlayLocked(base, false)
	if len(applied) == 0 || partial && !offersEveryClass(v) {
		return
	}
	for _, o := range applied {
		o.published = true
	}
	m.view = v
	close(m.updated)
	m.updated = make(chan struct{})
}

// overlayLocked returns base with the overrides newer than its scan in
// place of its slots (with again set, also those published already), and
// the overrides it applied; base itself when none applies. It costs a look
// at each override (slots re-read since the last scan), and a copy of a
// class's slots only when one of them changed. The caller holds mu.
func (m *Manager) overlayLocked(base *model.View, again bool) (*model.View, []*override) {
	type change struct {
		class, slot int
		o           *override
	}
	var changes []change
	for id, o := range m.overrides {
		if o.published && !again || !o.at.After(base.ScannedAt) {
			continue
		}
		if ci, si, ok := base.SlotIndex(id); ok {
			changes = append(changes, change{ci, si, o})
		}
	}
	if len(changes) == 0 {
		return base, nil
	}
	v := *base
	v.Classes = append([]model.ClassView(nil), v.Classes...)
	copied := map[int]bool{}
	applied := make([]*override, len(changes))
	for i, c := range changes {
		if !copied[c.class] {
			v.Classes[c.class].Slots = append([]model.Slot(nil), v.Classes[c.class].Slots...)
			copied[c.class] = true
		}
		v.Classes[c.class].Slots[c.slot] = c.o.slot
		applied[i] = c.o
	}
	return &v, applied
}
