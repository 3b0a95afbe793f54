package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Strangers: someone else's datasets and snapshots appear below the
// plugin's own data during a schedule (an operator's zfs create or
// snapshot, an auto-snapshot tool): below a slot, held or ready, below
// retained data and below parked data. The plugin must never destroy,
// rename or roll back what has one below it (I5), and goes on by itself
// once the operator removes it (at settle at the latest).

// stranger makes one: a child dataset with a file, or a snapshot, below an
// owned dataset of a class chosen by the event.
func (w *World) stranger() {
	ctx := context.Background()
	sets, err := w.cliZFS().List(ctx, parent, model.UserProps)
	if err != nil {
		return
	}
	var targets []string
	for _, d := range sets {
		rel := strings.TrimPrefix(d.Name, parent+"/")
		if d.IsSnapshot() || strings.Count(rel, "/") != 1 || !model.Owned(&d) || !d.Mounted {
			continue
		}
		targets = append(targets, d.Name)
	}
	if len(targets) == 0 {
		return
	}
	target := targets[w.rng.IntN(len(targets))]
	w.strangerSeq++
	ft := foreignThing{temp: true}
	if w.rng.IntN(2) == 0 {
		ft.name = fmt.Sprintf("%s@stranger-%d", target, w.strangerSeq)
		if err := w.cliZFS().Snapshot(ctx, ft.name, nil); err != nil {
			return
		}
	} else {
		ft.name = fmt.Sprintf("%s/stranger-%d", target, w.strangerSeq)
		if err := w.cliZFS().Create(ctx, ft.name, nil); err != nil {
			return
		}
		ft.file = filepath.Join(w.fake.Mountpoint(ft.name), "precious")
		if err := os.WriteFile(ft.file, []byte(ft.name), 0o644); err != nil {
			w.violate("harness", "stranger's file: %v", err)
			return
		}
	}
	after, err := w.cliZFS().List(ctx, parent, nil)
	if err != nil {
		w.violate("harness", "zfs list: %v", err)
		return
	}
	for _, d := range after {
		if d.Name == ft.name {
			ft.guid = d.GUID
		}
	}
	w.foreign = append(w.foreign, ft)
	w.zfsChanged = true
	w.logf("someone makes %s", ft.name)
}

// strangerGone is the operator removing one stranger (as the slot's reason
// advises), or every one (allGone: at settle).
func (w *World) strangerGone(allGone bool) {
	var temp []int
	for i, f := range w.foreign {
		if f.temp {
			temp = append(temp, i)
		}
	}
	if len(temp) == 0 {
		return
	}
	if !allGone {
		temp = temp[w.rng.IntN(len(temp)):][:1]
	}
	gone := map[int]bool{}
	for _, i := range temp {
		f := w.foreign[i]
		if err := w.cliZFS().Destroy(context.Background(), f.name, zfs.DestroyOptions{Recursive: true}); err != nil {
			w.violate("harness", "the operator cannot destroy %s: %v", f.name, err)
			continue
		}
		gone[i] = true
		w.zfsChanged = true
		w.logf("the operator destroys %s", f.name)
	}
	kept := w.foreign[:0]
	for i, f := range w.foreign {
		if !gone[i] {
			kept = append(kept, f)
		}
	}
	w.foreign = kept
}

// checkForeign is I5 from the data: each foreign thing below the parent
// (sets lists it) is still there, by name and GUID (not renamed along
// with the dataset above it, not destroyed with it or rolled away), and
// its file unchanged; with outside set, the one outside the parent too
// (every command naming it is checked as it runs: checkTrespass).
func (w *World) checkForeign(sets []zfs.Dataset, outside bool) {
	byName := map[string]string{}
	if outside {
		sets = append(sets, w.outside()...)
	}
	for _, d := range sets {
		byName[d.Name] = d.GUID
	}
	for _, f := range w.foreign {
		if !outside && !strings.HasPrefix(f.name, parent+"/") {
			continue
		}
		if guid, ok := byName[f.name]; !ok || guid != f.guid {
			w.violate("I5", "%s (guid %s) is gone or replaced", f.name, f.guid)
			continue
		}
		if f.file == "" {
			continue
		}
		if b, err := os.ReadFile(f.file); err != nil || string(b) != f.name {
			w.violate("I5", "%s's file is gone or changed: %v", f.name, errText(err))
		}
	}
}
