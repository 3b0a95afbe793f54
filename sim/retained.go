package sim

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Retained data (the snapshot policy's, and parked data no replacement
// claimed): kept until its expiry, unless its class keeps more than
// retain_max (the oldest go first), and gone within a pass of it. Both are
// read from ZFS, by the dataset's GUID.

// keptData is one retained dataset as last seen.
type keptData struct {
	name, class string
	since       time.Time
	expires     time.Time
}

// retainedIn lists the retained data in sets (a listing of the parent):
// owned datasets in state retained, or renamed aside as retained by a
// release a crash interrupted, by GUID.
func retainedIn(sets []zfs.Dataset) map[string]keptData {
	out := map[string]keptData{}
	for _, d := range sets {
		if d.IsSnapshot() || !model.Owned(&d) {
			continue
		}
		rel := strings.TrimPrefix(d.Name, parent+"/")
		class, base, ok := strings.Cut(rel, "/")
		if !ok || strings.Contains(base, "/") {
			continue
		}
		state := model.State(d.User.Get(model.PropState))
		if state != model.StateRetained && !(state == model.StateReleasing && strings.HasPrefix(base, "retained-")) {
			continue
		}
		k := keptData{name: d.Name, class: class, since: unixProp(d.User.Get(model.PropSince)), expires: unixProp(d.User.Get(model.PropExpires))}
		out[d.GUID] = k
	}
	return out
}

func unixProp(v string) time.Time {
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(secs, 0)
}

// checkRetainedKept: retained data that disappeared since the last check
// was due: past its expiry, or beyond its class's retain_max among the
// class's retained data, newest first (model.RetainedDue).
func (w *World) checkRetainedKept(sets []zfs.Dataset) {
	now := retainedIn(sets)
	var gone []keptData
	for guid, k := range w.kept {
		if _, ok := now[guid]; !ok {
			gone = append(gone, k)
		}
	}
	for _, k := range gone {
		if k.expires.IsZero() || w.now.After(k.expires) {
			continue
		}
		max := w.cfg.Class(k.class).Release.RetainMax
		if max > 0 && w.rankRetained(k, now, gone) >= max {
			continue
		}
		w.violate("retention", "retained %s went at %s, before its expiry %s, with fewer than retain_max (%d) newer ones in its class",
			k.name, w.now.Sub(epoch).Truncate(time.Second), k.expires.Sub(epoch), max)
	}
	w.kept = now
}

// rankRetained is k's place among its class's retained data, newest
// first, as RetainedDue sees them: those there now and those gone with it.
func (w *World) rankRetained(k keptData, now map[string]keptData, gone []keptData) int {
	var all []keptData
	for _, o := range now {
		if o.class == k.class {
			all = append(all, o)
		}
	}
	for _, o := range gone {
		if o.class == k.class {
			all = append(all, o)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].since.Equal(all[j].since) {
			return all[i].since.After(all[j].since)
		}
		return all[i].name > all[j].name
	})
	for i, o := range all {
		if o.name == k.name {
			return i
		}
	}
	return len(all)
}

// checkPruned: after a pass on a scan taken at scanAt, during which no zfs
// command failed, no retained data that had expired by scanAt is left,
// except what something foreign below keeps.
func (w *World) checkPruned(scanAt time.Time) {
	if w.passErrs > 0 || w.plugin == nil || w.plugin.run.dead {
		return
	}
	sets, err := w.cliZFS().List(context.Background(), parent, model.UserProps)
	if err != nil {
		return
	}
	for _, k := range retainedIn(sets) {
		if k.expires.IsZero() || !scanAt.After(k.expires) || w.strangersBelow(sets, k.name) {
			continue
		}
		w.violate("retention", "retained %s expired at %s and is still there after the pass on the scan of %s",
			k.name, k.expires.Sub(epoch), scanAt.Sub(epoch).Truncate(time.Millisecond))
	}
}
