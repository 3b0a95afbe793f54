package hooks

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

func TestInspectChangesNothing(t *testing.T) {
	r := newRig(t, model.Release{Policy: model.PolicyDestroy})
	r.sync(alloc("A", 10, "running", "run", "scratch-1"))
	r.f.ResetCalls()

	v, err := Inspect(t.Context(), r.m.cfg, r.c)
	if err != nil {
		t.Fatal(err)
	}
	s, cv := v.Slot("scratch-1")
	if s == nil || cv.Class.Name != "scratch" || s.State != model.StateHeld || s.Holder != "A" || !s.Healthy {
		t.Fatalf("slot %+v", s)
	}
	calls := r.f.Calls()
	if len(calls) != 2 || calls[0][1] != "list" || calls[1][1] != "list" {
		t.Fatalf("Inspect ran %q, want one zpool list and one zfs list", calls)
	}
}

func TestInspectProblems(t *testing.T) {
	cases := []struct {
		name   string
		parent string
		setup  func(f *zfstest.Fake)
		want   string
	}{
		{"missing pool", "nopool/nomad", nil, `pool "nopool" not found (parent = "nopool/nomad")`},
		{"missing parent", "tank/nomda", nil, `parent dataset "tank/nomda" does not exist`},
		{"degraded pool", "tank/nomad", func(f *zfstest.Fake) { must(t, f.SetPoolHealth("tank", "DEGRADED")) }, `pool "tank" is DEGRADED`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFakeZFS(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			cfg := &model.Config{Parent: tc.parent, Classes: []model.Class{{Name: "scratch", Slots: 1}}}
			v, err := Inspect(t.Context(), cfg, c)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(v.Problem, tc.want) {
				t.Fatalf("problem %q, want %q", v.Problem, tc.want)
			}
		})
	}
	t.Run("a failing zfs is an error", func(t *testing.T) {
		f, c := newFakeZFS(t)
		f.Inject(zfstest.Fault{Cmd: "zfs", ArgsContain: []string{"list"}, Stderr: "internal error: out of memory\n"})
		cfg := &model.Config{Parent: "tank/nomad", Classes: []model.Class{{Name: "scratch", Slots: 1}}}
		if _, err := Inspect(t.Context(), cfg, c); err == nil || !strings.Contains(err.Error(), "out of memory") {
			t.Fatalf("error %v", err)
		}
	})
}

// TestMarkReleasingIsResumedByThePlugin: an operator's mark is one zfs set,
// and the manager's next pass releases the slot by the class's policy.
func TestMarkReleasingIsResumedByThePlugin(t *testing.T) {
	r := newRig(t, model.Release{Policy: model.PolicyDestroy, OnFailure: model.PolicySnapshot})
	r.sync(alloc("A", 10, "running", "run", "scratch-1"))
	r.write("secret", "A's data")
	seen, err := ReadSlot(t.Context(), r.m.cfg, r.c, "scratch-1")
	must(t, err)
	r.f.ResetCalls()
	must(t, MarkReleasing(t.Context(), r.m.cfg, r.c, seen, time.Now()))
	var sets int
	for _, c := range r.f.Calls() {
		if c[1] != "list" {
			sets++
			if c[1] != "set" {
				t.Errorf("MarkReleasing ran %q", c)
			}
		}
	}
	if sets != 1 {
		t.Fatalf("%d changing commands, want one zfs set: %q", sets, r.f.Calls())
	}
	s, err := ReadSlot(t.Context(), r.m.cfg, r.c, "scratch-1")
	must(t, err)
	if s.State != model.StateReleasing || s.Outcome != model.OutcomeOperator || s.Holder != "A" {
		t.Fatalf("marked slot %+v", s)
	}
	// The holder is complete now; the plugin's pass finishes the release
	// with the class's policy (destroy), not on_failure.
	r.sync(alloc("A", 10, "complete", "run", "scratch-1"))
	r.wantState(model.StateReady, "", 2)
	if r.exists("secret") {
		t.Fatal("A's data survived the release")
	}
	if v, _ := r.m.View(); len(v.Classes[0].Retained) != 0 {
		t.Fatalf("on_failure applied to an operator release: %+v", v.Classes[0].Retained)
	}
}

func TestMarkReleasingRefuses(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(r *lifecycleRig, seen *model.Slot)
		want   error
		text   string
	}{
		{"ready slot", func(r *lifecycleRig, seen *model.Slot) { seen.State = model.StateReady }, nil, "nothing to release"},
		{"foreign dataset", func(r *lifecycleRig, seen *model.Slot) { seen.Foreign, seen.Exists = true, false }, nil, "not owned"},
		{"missing dataset", func(r *lifecycleRig, seen *model.Slot) { seen.Exists = false }, nil, "does not exist"},
		{"released meanwhile", func(r *lifecycleRig, _ *model.Slot) {
			r.sync(alloc("A", 10, "complete", "run", "scratch-1"))
		}, ErrSlotChanged, "generation 2"},
		{"new holder meanwhile", func(r *lifecycleRig, _ *model.Slot) {
			must(r.t, r.c.Set(r.t.Context(), "tank/nomad/scratch/scratch-1", map[string]string{model.PropHolder: "B"}))
		}, ErrSlotChanged, `holder "B"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, model.Release{Policy: model.PolicyDestroy})
			r.sync(alloc("A", 10, "running", "run", "scratch-1"))
			seen, err := ReadSlot(t.Context(), r.m.cfg, r.c, "scratch-1")
			must(t, err)
			tc.mutate(r, &seen)
			before, _ := ReadSlot(t.Context(), r.m.cfg, r.c, "scratch-1")
			err = MarkReleasing(t.Context(), r.m.cfg, r.c, seen, time.Now())
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %v, want %v containing %q", err, tc.want, tc.text)
			}
			after, _ := ReadSlot(t.Context(), r.m.cfg, r.c, "scratch-1")
			if after.State != before.State || after.Outcome != before.Outcome || after.Generation != before.Generation {
				t.Fatalf("a refused mark changed the slot: %+v → %+v", before, after)
			}
		})
	}
	t.Run("unknown slot", func(t *testing.T) {
		r := newRig(t, model.Release{})
		if _, err := ReadSlot(t.Context(), r.m.cfg, r.c, "scratch-2"); !errors.Is(err, ErrUnknownSlot) {
			t.Fatalf("error %v", err)
		}
	})
}

func TestRetainedDue(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	ret := func(name string, expiresIn time.Duration) model.Retained {
		r := model.Retained{Dataset: name}
		if expiresIn != 0 {
			r.Expires = now.Add(expiresIn)
		}
		return r
	}
	// Newest first, as model.ClassView.Retained lists them.
	list := []model.Retained{ret("c", time.Hour), ret("b", -time.Minute), ret("a", time.Hour)}
	cases := []struct {
		name      string
		retainMax int
		want      string // dataset:expired|max, ...
	}{
		{"no limit: only the expired", 0, "b:expired"},
		{"limit above the count", 5, "b:expired"},
		{"limit 1: all but the newest", 1, "b:expired a:max"},
		{"limit 2", 2, "b:expired a:max"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range model.RetainedDue(model.Release{RetainMax: tc.retainMax}, list, now) {
				why := "max"
				if p.Expired {
					why = "expired"
				}
				got = append(got, p.Retained.Dataset+":"+why)
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("due %q, want %q", got, tc.want)
			}
		})
	}
	if due := model.RetainedDue(model.Release{}, []model.Retained{ret("never", 0)}, now); len(due) != 0 {
		t.Fatalf("a retained dataset without expiry is due: %+v", due)
	}
}
