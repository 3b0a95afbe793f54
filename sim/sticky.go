package sim

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Sticky classes: a replacement gets its predecessor's data (I6), read
// from the data. Before a task's Reserve, inheritable finds where the data
// of the predecessor's matching slot is, when the plugin is to hand it
// over; after the grant, checkInherited holds the slot given to it.

// inheritable returns, per device of task t of allocation a, the dataset
// that holds a's predecessor's data from the matching slot (the same
// task's, at the same position: model.Predecessor), when it is to be a's:
// the class is sticky and the slot configured, Nomad still knows the
// predecessor, its token is in the data, the data is the plugin's as it
// leaves it (its slot, held or releasing for the predecessor, or parked
// for it), and nothing foreign lies below it (then it stays put, and the
// slot says why). "" where nothing is to be handed over.
func (w *World) inheritable(a *localAlloc, t *localTask) []string {
	out := make([]string, len(t.ids))
	pa, ok := w.localGet(a.prev)
	if a.prev == "" || !ok || w.cluster.Alloc(a.prev) == nil {
		return out
	}
	for i, id := range t.ids {
		class, _, _ := strings.Cut(id, "-")
		c := w.cfg.Class(class)
		if !c.Sticky || !w.cfg.Configured(class, id) {
			continue
		}
		var from string
		for _, pt := range pa.tasks {
			if pt.name == t.name && i < len(pt.ids) {
				from = pt.ids[i]
			}
		}
		if fc, _, _ := strings.Cut(from, "-"); from == "" || fc != class || !w.cfg.Configured(class, from) {
			continue
		}
		if mine := w.readSet(w.cfg.SlotDataset(class, id)); mine != nil && mine.User.Get(model.PropHolder) == a.id &&
			model.State(mine.User.Get(model.PropState)) == model.StateHeld {
			continue // recorded on its own slot already: it inherits nothing more
		}
		for _, ds := range []string{w.cfg.SlotDataset(class, from), w.cfg.ParkedName(class, a.prev, from)} {
			if w.holdsDataOf(ds, a.prev) {
				out[i] = ds
			}
		}
	}
	return out
}

// holdsDataOf reports whether dataset ds holds allocation prev's data as
// the plugin keeps it for a replacement: prev's token in it, prev its
// recorded holder, held, parked, or releasing for an outcome that parks
// (not an operator's release), and nothing foreign below.
func (w *World) holdsDataOf(ds, prev string) bool {
	sets, err := w.cliZFS().List(context.Background(), ds, model.UserProps)
	if err != nil || len(sets) == 0 || !model.Owned(&sets[0]) || w.strangersBelow(sets, ds) {
		return false
	}
	d := sets[0]
	switch model.State(d.User.Get(model.PropState)) {
	case model.StateHeld, model.StateParked:
	case model.StateReleasing:
		switch d.User.Get(model.PropOutcome) {
		case model.OutcomeOperator, model.OutcomeRetired, model.OutcomeGone:
			return false // released by the policy, not parked (model.Class.Parks)
		}
	default:
		return false
	}
	if d.User.Get(model.PropHolder) != prev || !d.Mounted {
		return false
	}
	_, err = os.Stat(filepath.Join(w.fake.Mountpoint(ds), tokenName(prev)))
	return err == nil
}

// readSet reads one dataset's row, nil if it is not there.
func (w *World) readSet(ds string) *zfs.Dataset {
	sets, err := w.cliZFS().List(context.Background(), ds, model.UserProps)
	if err != nil || len(sets) == 0 || sets[0].Name != ds {
		return nil
	}
	return &sets[0]
}

// checkInherited is I6 after a grant: the device at position i of task t
// got the data from was, when its Reserve began, to hand over (from, ""
// when nothing was): the slot given must hold it, and the data must not
// be left parked, where it would never reach it.
func (w *World) checkInherited(a *localAlloc, t *localTask, i int, from string) {
	if from != "" {
		if _, err := os.Stat(filepath.Join(t.paths[i], tokenName(a.prev))); err != nil {
			w.violate("I6", "%s got %s without its predecessor %s's data, which was in %s when its Reserve began", a.short(), t.ids[i], a.prev[len(a.prev)-4:], from)
			return
		}
	}
	pa, ok := w.localGet(a.prev)
	if !ok || a.prev == "" {
		return
	}
	var prevID string
	for _, pt := range pa.tasks {
		if pt.name == t.name && i < len(pt.ids) {
			prevID = pt.ids[i]
		}
	}
	class, _, _ := strings.Cut(t.ids[i], "-")
	prevClass, _, _ := strings.Cut(prevID, "-")
	if prevID == "" || prevClass != class || !w.cfg.Class(class).Sticky {
		return // a class no longer sticky hands nothing over: its parked data goes by its policy
	}
	name := w.cfg.ParkedName(class, a.prev, prevID)
	sets, err := w.cliZFS().List(context.Background(), name, []string{model.PropState})
	if err != nil || len(sets) == 0 || model.State(sets[0].User.Get(model.PropState)) != model.StateParked || w.strangersBelow(sets, name) {
		return
	}
	w.violate("I6", "%s got %s while its predecessor's data from %s is still parked as %s", a.short(), t.ids[i], prevID, name)
}

// strangersBelow reports whether anything below dataset is not the
// plugin's: such data is never handed over.
func (w *World) strangersBelow(sets []zfs.Dataset, dataset string) bool {
	for _, d := range sets {
		if strings.HasPrefix(d.Name, dataset+"/") || (strings.HasPrefix(d.Name, dataset+"@") &&
			!strings.HasSuffix(d.Name, "@"+model.PristineSnapshot) && !strings.HasSuffix(d.Name, "@"+model.RetainedSnapshot)) {
			return true
		}
	}
	return false
}
