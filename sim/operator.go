package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// editConfig changes the plugin configuration; the agent restarts to
// apply it.
func (w *World) editConfig() {
	cls := w.cfg.Classes
	cfg := model.Config{Parent: w.cfg.Parent, ScanInterval: w.cfg.ScanInterval}
	for _, c := range cls {
		c.Properties = nil
		cfg.Classes = append(cfg.Classes, c)
	}
	i := w.rng.IntN(len(cfg.Classes))
	c := &cfg.Classes[i]
	var what string
	choice := w.rng.IntN(5)
	switch choice {
	case 0:
		if c.Slots < 4 {
			c.Slots++
		}
		what = fmt.Sprintf("%s slots = %d", c.Name, c.Slots)
	case 1:
		if c.Slots > 1 {
			c.Slots--
		}
		what = fmt.Sprintf("%s slots = %d", c.Name, c.Slots)
	case 2:
		policies := []model.Policy{model.PolicyDestroy, model.PolicyRollback, model.PolicySnapshot}
		c.Release.Policy = policies[w.rng.IntN(3)]
		// On failure: the same policy, or one of its own (a class that
		// destroys or rolls back for every outcome marks no release).
		c.Release.OnFailure = append([]model.Policy{""}, policies...)[w.rng.IntN(4)]
		c.Release.Retain = 10 * time.Minute
		what = fmt.Sprintf("%s policy = %s, on_failure = %q", c.Name, c.Release.Policy, c.Release.OnFailure)
	case 4:
		c.Sticky, c.StickyWait = !c.Sticky, 10*time.Minute
		what = fmt.Sprintf("%s sticky = %v", c.Name, c.Sticky)
	case 3:
		if len(cfg.Classes) > 2 {
			cfg.Classes = cfg.Classes[:2]
			what = "class tmp removed"
		} else {
			cfg.Classes = append(cfg.Classes, model.Class{Name: "tmp", Slots: 1, MountPath: "/tmp/x",
				Release: model.Release{Policy: model.PolicyDestroy}})
			what = "class tmp added"
		}
	}
	w.cfg = cfg
	w.noteSticky()
	w.logf("operator: %s; agent restarts", what)
	w.kill("agent restart for a configuration change")
	w.launch("new configuration")
}

// cliZFS is the operator CLI's own zfs client: another process, which a
// plugin crash does not stop.
func (w *World) cliZFS() *zfs.Client { return zfs.NewClient(w.fake) }

// cliRelease is `nomad-device-zfs-ctl release <slot>` in two steps: it reads
// the slot and asks Nomad now, and marks it at its next event, so the
// plugin may act in between (MarkReleasing must then refuse).
func (w *World) cliRelease() {
	ctx := context.Background()
	if w.pending != nil {
		w.zfsChanged = true
		err := hooks.MarkReleasing(ctx, &w.cfg, w.cliZFS(), w.pending.seen, w.now)
		w.logf("cli release %s: mark releasing: %v", w.pending.seen.ID, err)
		w.pending = nil
		return
	}
	var ids []string
	for _, c := range w.cfg.Classes {
		for n := 1; n <= c.Slots; n++ {
			ids = append(ids, model.SlotID(c.Name, n))
		}
	}
	id := ids[w.rng.IntN(len(ids))]
	s, err := hooks.ReadSlot(ctx, &w.cfg, w.cliZFS(), id)
	if err != nil || !s.Exists || s.State == model.StateReady {
		return
	}
	if s.State == model.StateReleasing {
		// The CLI only says so: the plugin finishes the release. (Marking
		// it again would change its outcome, and so maybe its policy,
		// in the middle of it.)
		w.logf("cli release %s: already releasing", id)
		return
	}
	if !w.holderSafe(s) {
		w.logf("cli release %s: refused, holder %s may still run", id, s.Holder)
		return
	}
	w.pending = &cliRelease{seen: s}
	w.logf("cli release %s: holder %s has ended; marking next", id, s.Holder)
}

// cliGC is `nomad-device-zfs-ctl gc`: prune retained data that is due.
func (w *World) cliGC() {
	ctx := context.Background()
	v, err := hooks.Inspect(ctx, &w.cfg, w.cliZFS())
	if err != nil {
		return
	}
	for _, cv := range v.Classes {
		for _, p := range model.RetainedDue(cv.Class.Release, cv.Retained, w.now) {
			w.zfsChanged = true
			err := hooks.DestroyRetained(ctx, &w.cfg, w.cliZFS(), p.Retained)
			w.logf("cli gc %s: %v", p.Retained.Dataset, err)
		}
	}
}
