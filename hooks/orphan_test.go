package hooks

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Orphans: the operator lowers a class's slots or removes a class while
// allocations hold some of its slots, and the agent restarts the plugin with
// the new configuration. Those slots stay while their holders run, are
// released by policy when they end, and are never offered or made ready
// again; a removed class's dataset goes once nothing is left below it.

// orphanRig runs a manager on two classes (scratch: 2 slots, tmp: 1), with
// A holding scratch-2 and B holding tmp-1, then restarts it on a
// configuration with scratch lowered to 1 slot and tmp removed.
type orphanRig struct {
	*lifecycleRig
}

func newOrphanRig(t *testing.T, release model.Release) *orphanRig {
	t.Helper()
	f, c := newFakeZFS(t)
	scratch := model.Class{Name: "scratch", Slots: 2, MountPath: "/data", Release: release}
	tmp := model.Class{Name: "tmp", Slots: 1, MountPath: "/tmp/x"}
	fa := &fakeAllocs{gone: map[string]bool{}, forbid: map[string]bool{}, running: map[string]bool{}}
	cfg := &model.Config{Parent: "tank/nomad", ScanInterval: time.Hour, Classes: []model.Class{scratch, tmp}}
	r := &lifecycleRig{t: t, f: f, c: c, allocs: fa, m: mustManager(t, Config{Slots: cfg, ZFS: c, Allocs: fa})}
	r.m.Reconcile(t.Context())
	r.sync(holding("A", 10, "running", "scratch", "scratch-2"), holding("B", 11, "running", "tmp", "tmp-1"))
	for _, ds := range []string{"tank/nomad/scratch/scratch-2", "tank/nomad/tmp/tmp-1"} {
		if err := os.WriteFile(filepath.Join(f.Mountpoint(ds), "data"), []byte("holder's"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	scratch.Slots = 1
	lowered := &model.Config{Parent: "tank/nomad", ScanInterval: time.Hour, Classes: []model.Class{scratch}}
	r.m = mustManager(t, Config{Slots: lowered, ZFS: c, Allocs: fa})
	r.m.OnAllocs(fa.snap())
	r.m.Reconcile(t.Context())
	return &orphanRig{r}
}

func holding(id string, createIndex uint64, client, class, slot string) model.Alloc {
	a := alloc(id, createIndex, client, "run", slot)
	a.Devices[0].Name = class
	return a
}

// datasets lists every filesystem below the parent.
func (r *orphanRig) datasets() []string { return r.filesystems("tank/nomad") }

func TestOrphanedSlots(t *testing.T) {
	cases := []struct {
		name    string
		release model.Release
		// want and gone: datasets there, and not there, once A and B ended.
		want, gone []string
	}{
		{name: "destroy policy", release: model.Release{Policy: model.PolicyDestroy},
			want: []string{"tank/nomad/scratch/scratch-1"},
			gone: []string{"tank/nomad/scratch/scratch-2", "tank/nomad/tmp/tmp-1", "tank/nomad/tmp"}},
		{name: "rollback policy destroys an orphan", release: model.Release{Policy: model.PolicyRollback},
			want: []string{"tank/nomad/scratch/scratch-1"},
			gone: []string{"tank/nomad/scratch/scratch-2", "tank/nomad/tmp"}},
		{name: "snapshot policy keeps the data aside, and no slot", release: model.Release{Policy: model.PolicySnapshot, Retain: time.Hour},
			want: []string{"tank/nomad/scratch/scratch-1", "tank/nomad/scratch/retained-A"},
			gone: []string{"tank/nomad/scratch/scratch-2", "tank/nomad/tmp"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newOrphanRig(t, tc.release)
			v, _ := r.m.View()
			if len(v.Classes) != 1 || len(v.Classes[0].Slots) != 1 {
				t.Fatalf("offered: %+v", v.Classes)
			}
			if o := v.Classes[0].Orphans; len(o) != 1 || o[0].ID != "scratch-2" || o[0].Healthy || o[0].State != model.StateHeld {
				t.Fatalf("scratch orphans: %+v", o)
			}
			if len(v.Removed) != 1 || v.Removed[0].Dataset != "tank/nomad/tmp" || len(v.Removed[0].Orphans) != 1 {
				t.Fatalf("removed classes: %+v", v.Removed)
			}
			if _, _, ok := v.SlotIndex("scratch-2"); ok {
				t.Fatal("an orphan is in the view's index: Reserve would hand it out")
			}
			if _, err := r.m.Reserve(t.Context(), []string{"scratch-2"}); err == nil {
				t.Fatal("Reserve of an orphan succeeded")
			}

			// While the holders run, their data stays.
			r.m.Reconcile(t.Context())
			for _, ds := range []string{"tank/nomad/scratch/scratch-2", "tank/nomad/tmp/tmp-1"} {
				if !slices.Contains(r.datasets(), ds) {
					t.Fatalf("%s was destroyed while its holder runs", ds)
				}
			}

			r.sync(holding("A", 10, "complete", "scratch", "scratch-2"), holding("B", 11, "failed", "tmp", "tmp-1"))
			r.m.Reconcile(t.Context())
			got := r.datasets()
			for _, ds := range tc.want {
				if !slices.Contains(got, ds) {
					t.Errorf("%s is gone; datasets: %v", ds, got)
				}
			}
			for _, ds := range tc.gone {
				if slices.Contains(got, ds) {
					t.Errorf("%s is still there; datasets: %v", ds, got)
				}
			}
			v, _ = r.m.View()
			if len(v.Classes[0].Orphans) != 0 || len(v.Removed) != 0 {
				t.Errorf("after the release: orphans %+v, removed %+v", v.Classes[0].Orphans, v.Removed)
			}
		})
	}
}

// TestIdleOrphanGoesAtOnce: an orphan nobody holds is destroyed on the
// first pass; one with something foreign below it is left alone, with a
// reason.
func TestIdleOrphanGoesAtOnce(t *testing.T) {
	r := newOrphanRig(t, model.Release{})
	r.sync(holding("A", 10, "complete", "scratch", "scratch-2"), holding("B", 11, "running", "tmp", "tmp-1"))
	r.m.Reconcile(t.Context())
	if slices.Contains(r.datasets(), "tank/nomad/scratch/scratch-2") {
		t.Fatal("released orphan still there")
	}

	// The operator raises the slots again: scratch-2 comes back fresh,
	// then lowers them once more with someone's dataset below it.
	f, c, fa := r.f, r.c, r.allocs
	raised := &model.Config{Parent: "tank/nomad", ScanInterval: time.Hour, Classes: []model.Class{{Name: "scratch", Slots: 2, MountPath: "/data"}}}
	r.m = mustManager(t, Config{Slots: raised, ZFS: c, Allocs: fa})
	r.m.OnAllocs(fa.snap())
	r.m.Reconcile(t.Context())
	if _, err := os.ReadDir(f.Mountpoint("tank/nomad/scratch/scratch-2")); err != nil {
		t.Fatalf("scratch-2 not re-created: %v", err)
	}
	must(t, c.Create(t.Context(), "tank/nomad/scratch/scratch-2/mine", nil))
	lowered := &model.Config{Parent: "tank/nomad", ScanInterval: time.Hour, Classes: []model.Class{{Name: "scratch", Slots: 1, MountPath: "/data"}}}
	r.m = mustManager(t, Config{Slots: lowered, ZFS: c, Allocs: fa})
	r.m.OnAllocs(fa.snap())
	r.m.Reconcile(t.Context())
	if !slices.Contains(r.datasets(), "tank/nomad/scratch/scratch-2/mine") {
		t.Fatal("a foreign dataset below an orphan was destroyed")
	}
	v, _ := r.m.View()
	if o := v.Classes[0].Orphans; len(o) != 1 || len(o[0].Strangers) != 1 {
		t.Fatalf("orphan with a stranger: %+v", o)
	}
	must(t, c.Destroy(t.Context(), "tank/nomad/scratch/scratch-2/mine", zfs.DestroyOptions{}))
	r.m.Reconcile(t.Context())
	if slices.Contains(r.datasets(), "tank/nomad/scratch/scratch-2") {
		t.Fatal("idle orphan kept once the stranger left")
	}
}
