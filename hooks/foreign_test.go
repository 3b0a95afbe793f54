package hooks

import (
	"strings"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/testrig"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

const slot1 = "tank/nomad/scratch/scratch-1"

// TestForeignBelowASlotIsNeverTouched: a dataset or snapshot someone made
// below a slot survives every release policy. The release stops before it
// changes anything, the slot keeps its holder's data and is not offered,
// its health says what to do, and once the operator moves the foreign thing
// away the release goes on by itself.
func TestForeignBelowASlotIsNeverTouched(t *testing.T) {
	policies := []model.Policy{model.PolicyDestroy, model.PolicyRollback, model.PolicySnapshot}
	foreign := []struct {
		name   string
		create func(r *lifecycleRig) error
		remove func(r *lifecycleRig) error
		what   string
	}{
		{name: "child dataset", what: slot1 + "/mine",
			create: func(r *lifecycleRig) error { return r.c.Create(r.t.Context(), slot1+"/mine", nil) },
			remove: func(r *lifecycleRig) error { return r.c.Destroy(r.t.Context(), slot1+"/mine", zfs.DestroyOptions{}) }},
		{name: "snapshot", what: slot1 + "@mine",
			create: func(r *lifecycleRig) error { return r.c.Snapshot(r.t.Context(), slot1+"@mine", nil) },
			remove: func(r *lifecycleRig) error { return r.c.Destroy(r.t.Context(), slot1+"@mine", zfs.DestroyOptions{}) }},
	}
	for _, p := range policies {
		for _, f := range foreign {
			t.Run(string(p)+" with a "+f.name, func(t *testing.T) {
				r := newRig(t, model.Release{Policy: p, Retain: time.Hour})
				r.sync(alloc("A", 10, "running", "run", "scratch-1"))
				r.write("data", "A's data")
				must(t, f.create(r))

				r.sync(alloc("A", 10, "complete", "run", "scratch-1"))
				s := r.slot()
				if s.State != model.StateHeld || s.Holder != "A" || s.Healthy || !strings.Contains(s.Reason, f.what) {
					t.Fatalf("slot %s, holder %q, healthy %v, reason %q; want held by A, unhealthy, naming %s", s.State, s.Holder, s.Healthy, s.Reason, f.what)
				}
				if !r.exists("data") {
					t.Fatal("the holder's data went although the release was refused")
				}
				if !r.zfsHas(f.what) {
					t.Fatalf("%s did not survive the release", f.what)
				}

				must(t, f.remove(r))
				r.sync(alloc("A", 10, "complete", "run", "scratch-1"))
				r.wantState(model.StateReady, "", 2)
				if r.exists("data") {
					t.Fatal("the release left A's data")
				}
			})
		}
	}
}

// TestZFSRefusesWhatAppearedAfterTheRead: between the read that found
// nothing foreign and the destroy or rollback, someone adds something below
// the slot. The plugin destroys without -r and rolls back without -r, so
// ZFS refuses and the foreign dataset survives.
func TestZFSRefusesWhatAppearedAfterTheRead(t *testing.T) {
	for _, p := range []model.Policy{model.PolicyDestroy, model.PolicyRollback} {
		t.Run(string(p), func(t *testing.T) {
			r := newRig(t, model.Release{Policy: p})
			r.sync(alloc("A", 10, "running", "run", "scratch-1"))
			stale := r.slot() // read: nothing below
			must(t, r.c.Create(t.Context(), slot1+"/late", nil))
			must(t, r.c.Snapshot(t.Context(), slot1+"@late", nil))
			err := r.m.release(t.Context(), stale, r.m.cfg.Class("scratch"), alloc("A", 10, "complete", "run", "scratch-1"), model.OutcomeComplete)
			if err == nil {
				t.Fatal("release went through with something foreign below the slot")
			}
			for _, name := range []string{slot1 + "/late", slot1 + "@late"} {
				if !r.zfsHas(name) {
					t.Fatalf("%s destroyed (release said %v)", name, err)
				}
			}
		})
	}
}

// TestForeignBelowRetainedDataIsNeverDestroyed: pruning (by retain_max here)
// and the operator's gc leave retained data alone while anything foreign is
// below it, and say so.
func TestForeignBelowRetainedDataIsNeverDestroyed(t *testing.T) {
	r := newRig(t, model.Release{Policy: model.PolicySnapshot, Retain: time.Hour, RetainMax: 1})
	r.sync(alloc("A", 10, "running", "run", "scratch-1"))
	r.sync(alloc("A", 10, "complete", "run", "scratch-1"))
	retainedA := "tank/nomad/scratch/retained-A"
	must(t, r.c.Create(t.Context(), retainedA+"/mine", nil))
	must(t, r.c.Snapshot(t.Context(), retainedA+"@mine", nil))

	// B's data is retained too: A's is now beyond retain_max 1.
	logs := &testrig.LockedBuffer{}
	r.m.logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	r.sync(alloc("B", 20, "running", "run", "scratch-1"))
	r.sync(alloc("B", 20, "complete", "run", "scratch-1"))
	r.m.Reconcile(t.Context()) // the pass after the one that retained B's
	// The refusal names the data kept (an operator greps for it, and so
	// does e2e's TestForeignBelowSlotSurvivesEveryPolicy).
	if got := logs.String(); !strings.Contains(got, "cannot prune retained data") || !strings.Contains(got, "dataset="+retainedA) {
		t.Errorf("no refused prune naming dataset=%s in the log:\n%s", retainedA, got)
	}
	v, _ := r.m.View()
	var a *model.Retained
	for i := range v.Classes[0].Retained {
		if v.Classes[0].Retained[i].Dataset == retainedA {
			a = &v.Classes[0].Retained[i]
		}
	}
	if a == nil || len(a.Strangers) != 2 {
		t.Fatalf("retained-A pruned or its strangers not seen: %+v", v.Classes[0].Retained)
	}
	err := DestroyRetained(t.Context(), r.m.cfg, r.c, *a)
	if err == nil || !strings.Contains(err.Error(), retainedA+"/mine") {
		t.Fatalf("gc of retained data with a foreign child: %v", err)
	}
	for _, name := range []string{retainedA, retainedA + "/mine", retainedA + "@mine", retainedA + "@retained"} {
		if !r.zfsHas(name) {
			t.Fatalf("%s destroyed", name)
		}
	}
}

// zfsHas reports whether a dataset or snapshot exists.
func (r *lifecycleRig) zfsHas(name string) bool {
	r.t.Helper()
	ds, _, _ := strings.Cut(name, "@")
	rows, err := r.c.List(r.t.Context(), ds, nil)
	if err != nil {
		return false
	}
	for _, d := range rows {
		if d.Name == name {
			return true
		}
	}
	return false
}

// TestRollbackAfterAnInterruptedRetain: a retain stopped at its rename (the
// pool suspended) leaves the slot releasing with its own held @retained;
// the operator then changes the class to roll back. The rollback removes
// the plugin's own newer snapshot first and completes, rather than being
// refused for ever (found by a 20,000-schedule simulation, seed 101539).
func TestRollbackAfterAnInterruptedRetain(t *testing.T) {
	r := newRig(t, model.Release{Policy: model.PolicyRollback, OnFailure: model.PolicySnapshot, Retain: time.Hour})
	r.sync(alloc("A", 10, "running", "run", "scratch-1"))
	r.write("data", "A's data")
	r.f.Inject(zfstest.Fault{Cmd: "zfs", ArgsContain: []string{"rename"}, Stderr: "cannot rename: pool I/O is currently suspended", Times: 1})
	r.sync(alloc("A", 10, "failed", "run", "scratch-1"))
	if s := r.slot(); s.State != model.StateReleasing || !r.zfsHas(slot1+"@retained") {
		t.Fatalf("after the failed rename: %s, @retained %v", s.State, r.zfsHas(slot1+"@retained"))
	}
	r.m.cfg.Classes[0].Release.OnFailure = "" // the operator's new configuration: rollback only
	r.sync(alloc("A", 10, "failed", "run", "scratch-1"))
	r.wantState(model.StateReady, "", 2)
	if r.exists("data") || r.zfsHas(slot1+"@retained") {
		t.Fatalf("rolled back slot: data %v, @retained %v", r.exists("data"), r.zfsHas(slot1+"@retained"))
	}
	if s := r.slot(); s.Info.User.Get(model.PropRetainAs) != "" {
		t.Errorf("the interrupted retain's name is still recorded: %q", s.Info.User.Get(model.PropRetainAs))
	}
}

// TestReserveReleasesOnlyWhatItReadItself: a Reserve that must release its
// slot's ended holder first reads the slot itself; it never acts on the
// view, which may be older than a stranger below it. ZFS refuses a destroy
// or a rollback over a snapshot or a child the plugin did not read, but a
// rename (the snapshot policy's retain, a sticky class's park) takes them
// along. Seed 1199: a stranger's snapshot made after the last scan was
// parked with the slot's data by a Reserve.
func TestReserveReleasesOnlyWhatItReadItself(t *testing.T) {
	for _, sticky := range []bool{false, true} {
		t.Run(map[bool]string{false: "retained", true: "parked"}[sticky], func(t *testing.T) {
			r := newRig(t, model.Release{Policy: model.PolicySnapshot, Retain: time.Hour}, func(c *model.Class) {
				c.Sticky, c.StickyWait = sticky, time.Hour
			})
			r.sync(alloc("A", 10, "running", "run", "scratch-1"))
			r.write("data", "A's data")
			must(t, r.c.Snapshot(t.Context(), slot1+"@mine", nil)) // after the last scan
			// A failed and Nomad may reschedule it: a sticky class parks it.
			r.allocs.set(alloc("A", 10, "failed", "run", "scratch-1"), alloc("B", 20, "pending", "run", "scratch-1"))
			_, err := r.m.Reserve(t.Context(), []string{"scratch-1"})
			if !r.zfsHas(slot1 + "@mine") {
				t.Fatalf("the stranger's snapshot %s@mine went with the data (Reserve: %v); datasets %v", slot1, err, r.datasetNames())
			}
			if err == nil {
				t.Error("Reserve handed out a slot with a stranger below it")
			}
		})
	}
}
