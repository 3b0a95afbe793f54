package hooks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// Classes on two pools: bulk below the block's parent tank/nomad, fast
// below its own, nvme/nomad, released by the snapshot policy.

// twoPoolRig is a Manager over the fake ZFS with both pools, and the fake
// allocations.
type twoPoolRig struct {
	*lifecycleRig
}

func newTwoPoolRig(t *testing.T) *twoPoolRig {
	t.Helper()
	f, c := newFakeZFS(t)
	must(t, f.AddPool("nvme", 1<<30))
	must(t, c.Create(t.Context(), "nvme/nomad", nil))
	f.ResetCalls()
	cfg := &model.Config{Parent: "tank/nomad", ScanInterval: time.Hour, Classes: []model.Class{
		{Name: "bulk", Slots: 1, MountPath: "/bulk"},
		{Name: "fast", Parent: "nvme/nomad", Slots: 1, MountPath: "/fast", Release: model.Release{Policy: model.PolicySnapshot, Retain: time.Hour}},
	}}
	fa := &fakeAllocs{gone: map[string]bool{}, forbid: map[string]bool{}, running: map[string]bool{}}
	r := &twoPoolRig{&lifecycleRig{t: t, f: f, c: c, allocs: fa, m: mustManager(t, Config{Slots: cfg, ZFS: c, Allocs: fa})}}
	r.m.Reconcile(t.Context())
	return r
}

// holding builds an allocation holding slot id of class.
func holdingSlot(id string, createIndex uint64, client, class, slot string) model.Alloc {
	a := alloc(id, createIndex, client, "run", slot)
	a.Devices[0].Name = class
	return a
}

// slotOf is slot id as the published view has it.
func (r *twoPoolRig) slotOf(id string) model.Slot {
	r.t.Helper()
	v, _ := r.m.View()
	s, _ := v.Slot(id)
	if s == nil {
		r.t.Fatalf("no slot %s", id)
	}
	return *s
}

// TestTwoPoolsScanAndCreate: each class is made below its own parent, and
// a scan is one zpool process and one zfs listing per parent.
func TestTwoPoolsScanAndCreate(t *testing.T) {
	r := newTwoPoolRig(t)
	for id, want := range map[string]string{"bulk-1": "tank/nomad/bulk/bulk-1", "fast-1": "nvme/nomad/fast/fast-1"} {
		s := r.slotOf(id)
		if s.Dataset != want || !s.Healthy || s.State != model.StateReady || s.Mountpoint != r.f.Mountpoint(want) {
			t.Errorf("%s: dataset %s healthy %v state %s mountpoint %s (%s)", id, s.Dataset, s.Healthy, s.State, s.Mountpoint, s.Reason)
		}
	}
	r.f.ResetCalls()
	r.m.Reconcile(t.Context())
	var cmds []string
	for _, c := range r.f.Calls() {
		cmds = append(cmds, strings.Join(c[:2], " ")+" "+c[len(c)-1])
	}
	// zpool list names no pool (all of them): one missing pool must not
	// fail the others' listing.
	want := "zpool list name,size,allocated,free,health,readonly zfs list tank/nomad zfs list nvme/nomad"
	if got := strings.Join(cmds, " "); got != want {
		t.Errorf("an idle pass ran\n%s\nwant\n%s", got, want)
	}
}

// TestTwoPoolsRelease: a holder of the second pool's class is recorded,
// released by its class's policy there (the data retained beside the
// slot, a fresh slot in its place), and the slot reserved again.
func TestTwoPoolsRelease(t *testing.T) {
	r := newTwoPoolRig(t)
	a := holdingSlot("A", 10, "running", "fast", "fast-1")
	r.sync(a)
	if s := r.slotOf("fast-1"); s.State != model.StateHeld || s.Holder != "A" {
		t.Fatalf("fast-1 not held by A: %s %q", s.State, s.Holder)
	}
	mine := filepath.Join(r.f.Mountpoint("nvme/nomad/fast/fast-1"), "mine")
	must(t, os.WriteFile(mine, []byte("A's\n"), 0o644))

	a.ClientStatus = "complete"
	r.sync(a)
	s := r.slotOf("fast-1")
	if s.State != model.StateReady || s.Generation != 2 || s.Dataset != "nvme/nomad/fast/fast-1" || !s.Healthy {
		t.Fatalf("fast-1 after the release: %s gen %d at %s healthy %v (%s)", s.State, s.Generation, s.Dataset, s.Healthy, s.Reason)
	}
	if _, err := os.Stat(mine); !os.IsNotExist(err) {
		t.Errorf("A's file is in the fresh slot: %v", err)
	}
	kept := filepath.Join(r.f.Mountpoint("nvme/nomad/fast/retained-A"), "mine")
	if b, err := os.ReadFile(kept); err != nil || string(b) != "A's\n" {
		t.Errorf("A's data not retained below nvme/nomad/fast: %q %v", b, err)
	}

	b := holdingSlot("B", 20, "pending", "fast", "fast-1")
	r.allocs.set(b)
	grants, err := r.m.Reserve(t.Context(), []string{"fast-1"})
	if err != nil {
		t.Fatal(err)
	}
	if g := grants[0]; g.Slot.Dataset != "nvme/nomad/fast/fast-1" || g.Slot.Holder != "B" || g.Slot.Mountpoint != r.f.Mountpoint("nvme/nomad/fast/fast-1") {
		t.Errorf("granted %s (holder %q) at %s", g.Slot.Dataset, g.Slot.Holder, g.Slot.Mountpoint)
	}
}

// TestTwoPoolsHealthIsPerPool: the second pool DEGRADED, or gone, makes its
// class's slot unhealthy and stops its releases until it is back; the
// block's class is offered and released meanwhile.
func TestTwoPoolsHealthIsPerPool(t *testing.T) {
	cases := []struct {
		name       string
		fail, heal func(t *testing.T, f *zfstest.Fake)
		reason     string
	}{
		{"degraded", func(t *testing.T, f *zfstest.Fake) { must(t, f.SetPoolHealth("nvme", "DEGRADED")) },
			func(t *testing.T, f *zfstest.Fake) { must(t, f.SetPoolHealth("nvme", "ONLINE")) }, `pool "nvme" is DEGRADED`},
		{"suspended", func(t *testing.T, f *zfstest.Fake) { must(t, f.SetPoolHealth("nvme", "SUSPENDED")) },
			func(t *testing.T, f *zfstest.Fake) { must(t, f.SetPoolHealth("nvme", "ONLINE")) }, `pool "nvme" is SUSPENDED`},
		{"listing fails", func(t *testing.T, f *zfstest.Fake) {
			f.Inject(zfstest.Fault{Cmd: "zfs", ArgsContain: []string{"list", "nvme/nomad"}, Stderr: "internal error\n"})
		}, func(t *testing.T, f *zfstest.Fake) { f.ClearFaults() }, "zfs list failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newTwoPoolRig(t)
			a, b := holdingSlot("A", 10, "running", "bulk", "bulk-1"), holdingSlot("B", 11, "running", "fast", "fast-1")
			r.sync(a, b)
			tc.fail(t, r.f)
			a.ClientStatus, b.ClientStatus = "complete", "complete"
			r.sync(a, b)
			if s := r.slotOf("bulk-1"); !s.Healthy || s.State != model.StateReady || s.Generation != 2 {
				t.Errorf("bulk-1: healthy %v %s gen %d (%s)", s.Healthy, s.State, s.Generation, s.Reason)
			}
			s := r.slotOf("fast-1")
			if s.Healthy || !strings.Contains(s.Reason, tc.reason) || s.State != model.StateHeld || s.Holder != "B" {
				t.Errorf("fast-1: healthy %v (%q, want %q) %s by %q: released below a parent with a problem?", s.Healthy, s.Reason, tc.reason, s.State, s.Holder)
			}
			tc.heal(t, r.f)
			r.sync(a, b)
			if s := r.slotOf("fast-1"); !s.Healthy || s.State != model.StateReady || s.Generation != 2 {
				t.Errorf("fast-1 once the pool is back: healthy %v %s gen %d (%s)", s.Healthy, s.State, s.Generation, s.Reason)
			}
		})
	}
}

// TestTwoPoolsOneMissing: the second pool exported (or never imported)
// leaves the block's class offered: zpool's listing of several pools
// fails as a whole when one named pool is missing, so the scan names none.
func TestTwoPoolsOneMissing(t *testing.T) {
	r := newTwoPoolRig(t)
	must(t, r.f.RemovePool("nvme"))
	r.m.Reconcile(t.Context())
	if s := r.slotOf("bulk-1"); !s.Healthy {
		t.Errorf("bulk-1 unhealthy with the other pool gone: %s", s.Reason)
	}
	if s := r.slotOf("fast-1"); s.Healthy || !strings.Contains(s.Reason, `pool "nvme" not found (parent = "nvme/nomad")`) {
		t.Errorf("fast-1: healthy %v (%s)", s.Healthy, s.Reason)
	}
	v, err := Inspect(t.Context(), r.m.cfg, r.c)
	if err != nil {
		t.Fatalf("Inspect with one parent's pool gone: %v", err)
	}
	if p := v.Parent("nvme/nomad"); !strings.Contains(p.Problem, "not found") || v.Parent("tank/nomad").Problem != "" {
		t.Errorf("parents %+v", v.Parents)
	}
}

// TestInspectErrorOnlyWhenNothingIsRead: one parent's listing failing is
// that parent's problem; every listing failing is Inspect's error.
func TestInspectErrorOnlyWhenNothingIsRead(t *testing.T) {
	r := newTwoPoolRig(t)
	r.f.Inject(zfstest.Fault{Cmd: "zfs", ArgsContain: []string{"list", "nvme/nomad"}, Stderr: "internal error: out of memory\n"})
	v, err := Inspect(t.Context(), r.m.cfg, r.c)
	if err != nil {
		t.Fatalf("one listing failed: %v", err)
	}
	if p := v.Parent("nvme/nomad").Problem; !strings.Contains(p, "out of memory") {
		t.Errorf("nvme/nomad: problem %q", p)
	}
	r.f.Inject(zfstest.Fault{Cmd: "zfs", ArgsContain: []string{"list", "tank/nomad"}, Stderr: "internal error: out of memory\n"})
	if _, err := Inspect(context.Background(), r.m.cfg, r.c); err == nil || !strings.Contains(err.Error(), "out of memory") {
		t.Errorf("every listing failed: error %v", err)
	}
}
