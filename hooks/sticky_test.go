package hooks

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Sticky data on the fake ZFS: a replacement inherits its predecessor's
// dataset, by rename; nobody else sees it; unclaimed data gets the policy.

func stickyRig(t *testing.T, release model.Release) *lifecycleRig {
	return newRig(t, release, func(c *model.Class) {
		c.Slots, c.Sticky, c.StickyWait = 2, true, time.Hour
	})
}

// replacing returns a copy of a, replaced by next (Nomad links both ways).
func replacing(a model.Alloc, next string) model.Alloc {
	a.NextAllocation = next
	return a
}

// successor is allocation id, replacing prev, on slot.
func successor(id string, createIndex uint64, client, slot, prev string) model.Alloc {
	a := alloc(id, createIndex, client, "run", slot)
	a.PreviousAllocation = prev
	return a
}

func (r *lifecycleRig) readIn(slot, name string) string {
	b, _ := os.ReadFile(filepath.Join(r.f.Mountpoint("tank/nomad/scratch/"+slot), name))
	return string(b)
}

// datasetNames lists the filesystems below the class dataset, by name
// relative to it.
func (r *lifecycleRig) datasetNames() []string {
	var names []string
	for _, n := range r.filesystems("tank/nomad/scratch") {
		names = append(names, strings.TrimPrefix(n, "tank/nomad/scratch/"))
	}
	return names
}

// filesystems lists root and every filesystem below it.
func (r *lifecycleRig) filesystems(root string) []string {
	r.t.Helper()
	sets, err := r.c.List(r.t.Context(), root, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	var names []string
	for _, d := range sets {
		if !d.IsSnapshot() {
			names = append(names, d.Name)
		}
	}
	return names
}

func (r *lifecycleRig) slotByID(id string) model.Slot {
	s, _ := r.m.current(id)
	if s == nil {
		r.t.Fatalf("no slot %s", id)
	}
	return *s
}

func TestStickyHandover(t *testing.T) {
	t.Run("replacement on another slot claims the parked data", func(t *testing.T) {
		r := stickyRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("state", "A's data")
		// A destructive update: A stopped and replaced by B, placed on
		// scratch-2.
		r.sync(replacing(alloc("A", 10, "complete", "stop", "scratch-1"), "B"), successor("B", 20, "pending", "scratch-2", "A"))
		if got := r.datasetNames(); !slices.Contains(got, "parked-A-scratch-1") || r.readIn("scratch-1", "state") != "" {
			t.Fatalf("A's data not parked, or left in scratch-1: %v", got)
		}
		grants, err := r.m.Reserve(t.Context(), []string{"scratch-2"})
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(grants[0].Slot.Mountpoint, "state"))
		if string(b) != "A's data" {
			t.Fatalf("B reads %q, %v", b, err)
		}
		if got := r.datasetNames(); slices.ContainsFunc(got, func(n string) bool { return strings.HasPrefix(n, "parked-") }) {
			t.Errorf("parked data left after the claim: %v", got)
		}
		if s := r.slotByID("scratch-2"); s.State != model.StateHeld || s.Holder != "B" || s.Generation != 2 {
			t.Errorf("scratch-2: %s by %s gen %d", s.State, s.Holder, s.Generation)
		}
		if s := r.slotByID("scratch-1"); s.State != model.StateReady || r.readIn("scratch-1", "state") != "" {
			t.Errorf("scratch-1 after the park: %s, %q", s.State, r.readIn("scratch-1", "state"))
		}
	})

	t.Run("replacement on the same slot inherits in place", func(t *testing.T) {
		r := stickyRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("state", "A's data")
		r.sync(replacing(alloc("A", 10, "complete", "stop", "scratch-1"), "B"), successor("B", 20, "pending", "scratch-1", "A"))
		if s := r.slotByID("scratch-1"); s.State != model.StateHeld || s.Holder != "B" || r.readIn("scratch-1", "state") != "A's data" {
			t.Fatalf("scratch-1: %s by %s, %q", s.State, s.Holder, r.readIn("scratch-1", "state"))
		}
		if _, err := r.m.Reserve(t.Context(), []string{"scratch-1"}); err != nil {
			t.Fatal(err)
		}
		if r.readIn("scratch-1", "state") != "A's data" {
			t.Fatal("the data went at B's Reserve")
		}
	})

	t.Run("Reserve waits for the stopping predecessor's data", func(t *testing.T) {
		r := stickyRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("state", "A's data")
		r.sync(replacing(alloc("A", 10, "running", "stop", "scratch-1"), "B"), successor("B", 20, "pending", "scratch-2", "A"))
		go func() {
			time.Sleep(700 * time.Millisecond)
			// A stops; the watcher's pass parks its data.
			r.sync(replacing(alloc("A", 10, "complete", "stop", "scratch-1"), "B"), successor("B", 20, "pending", "scratch-2", "A"))
		}()
		grants, err := r.m.Reserve(t.Context(), []string{"scratch-2"})
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(grants[0].Slot.Mountpoint, "state")); string(b) != "A's data" {
			t.Fatalf("B reads %q", b)
		}
	})

	t.Run("someone else on the freed slot sees nothing", func(t *testing.T) {
		r := stickyRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("state", "A's data")
		r.sync(replacing(alloc("A", 10, "complete", "stop", "scratch-1"), "B"), successor("B", 20, "pending", "scratch-2", "A"),
			alloc("C", 30, "pending", "run", "scratch-1"))
		grants, err := r.m.Reserve(t.Context(), []string{"scratch-1"})
		if err != nil {
			t.Fatal(err)
		}
		if entries, _ := os.ReadDir(grants[0].Slot.Mountpoint); len(entries) != 0 {
			t.Fatalf("C sees %v", entries)
		}
	})
}

func TestStickyUnclaimed(t *testing.T) {
	cases := []struct {
		name    string
		release model.Release
		// ended is how A ends; then is the state after, and wait how long
		// passes before the last pass.
		ended []model.Alloc
		wait  time.Duration
		// parked: the data is still parked; retained: kept as retained.
		parked, retained bool
	}{
		{name: "job stopped: released at once",
			ended: []model.Alloc{alloc("A", 10, "complete", "stop", "scratch-1")}},
		{name: "batch complete: released at once",
			ended: []model.Alloc{alloc("A", 10, "complete", "run", "scratch-1")}},
		{name: "failed, reschedule pending: parked",
			ended:  []model.Alloc{alloc("A", 10, "failed", "run", "scratch-1")},
			parked: true},
		{name: "failed, no replacement within sticky_wait: released",
			ended: []model.Alloc{alloc("A", 10, "failed", "run", "scratch-1")}, wait: 2 * time.Hour},
		{name: "failed, no replacement, snapshot policy: retained",
			release: model.Release{Policy: model.PolicySnapshot, Retain: 24 * time.Hour},
			ended:   []model.Alloc{alloc("A", 10, "failed", "run", "scratch-1")}, wait: 2 * time.Hour, retained: true},
		{name: "replacement on another node: released",
			ended: []model.Alloc{replacing(alloc("A", 10, "complete", "stop", "scratch-1"), "elsewhere")}},
		{name: "replacement started without it: released",
			ended: []model.Alloc{replacing(alloc("A", 10, "complete", "stop", "scratch-1"), "B"), successor("B", 20, "running", "scratch-2", "A")}},
		{name: "replacement pending: parked",
			ended:  []model.Alloc{replacing(alloc("A", 10, "complete", "stop", "scratch-1"), "B"), successor("B", 20, "pending", "scratch-2", "A")},
			parked: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := stickyRig(t, tc.release)
			now := time.Now()
			r.m.now = func() time.Time { return now }
			r.sync(alloc("A", 10, "running", "run", "scratch-1"))
			r.write("state", "A's data")
			r.allocs.mu.Lock()
			r.allocs.elsewhere = map[string]bool{"elsewhere": true}
			r.allocs.mu.Unlock()
			r.sync(tc.ended...)
			if slices.ContainsFunc(tc.ended, func(a model.Alloc) bool { return a.ID == "B" && a.ClientStatus == "running" }) {
				// B started on scratch-2 (recorded) without claiming.
				r.sync(tc.ended...)
			}
			now = now.Add(tc.wait)
			r.m.Reconcile(t.Context())
			r.m.Reconcile(t.Context())
			v, _ := r.m.View()
			cv := v.Classes[0]
			if got := len(cv.Parked) == 1; got != tc.parked {
				t.Errorf("parked: %v, want %v (%+v)", got, tc.parked, cv.Parked)
			}
			if got := len(cv.Retained) == 1; got != tc.retained {
				t.Errorf("retained: %v, want %v (%+v)", got, tc.retained, cv.Retained)
			}
			if !tc.parked && !tc.retained {
				if got := r.datasetNames(); len(got) != 3 {
					t.Errorf("datasets left: %v", got)
				}
			}
			if r.readIn("scratch-1", "state") != "" {
				t.Error("A's data is still in its slot")
			}
		})
	}
}

// TestStickyClaimInterrupted: a crash between the claim's rename and its
// last write leaves parked data at the slot's name; the replacement still
// gets it, whether the watcher's pass or its Reserve comes first.
func TestStickyClaimInterrupted(t *testing.T) {
	for _, first := range []string{"pass", "reserve"} {
		t.Run(first+" first", func(t *testing.T) {
			r := stickyRig(t, model.Release{})
			r.sync(alloc("A", 10, "running", "run", "scratch-1"))
			r.write("state", "A's data")
			ended := []model.Alloc{replacing(alloc("A", 10, "complete", "stop", "scratch-1"), "B"), successor("B", 20, "pending", "scratch-2", "A")}
			r.allocs.set(ended...)
			r.m.OnAllocs(r.allocs.snap())
			r.m.Settle(t.Context()) // parks, without the pass's scan after
			// The claim, up to its rename.
			ctx := t.Context()
			must(t, r.c.Destroy(ctx, "tank/nomad/scratch/scratch-2", zfs.DestroyOptions{}))
			must(t, r.c.Set(ctx, "tank/nomad/scratch/parked-A-scratch-1", model.ClaimAsProps("tank/nomad/scratch/parked-A-scratch-1", "tank/nomad/scratch/scratch-2")))
			must(t, r.c.Rename(ctx, "tank/nomad/scratch/parked-A-scratch-1", "tank/nomad/scratch/scratch-2"))
			// The plugin restarts.
			r.m = mustManager(t, Config{Slots: r.m.cfg, ZFS: r.c, Allocs: r.allocs, Logger: r.m.logger})
			if first == "pass" {
				r.m.OnAllocs(r.allocs.snap())
				r.m.Reconcile(ctx)
			} else {
				r.m.Reconcile(ctx) // no snapshot yet: scan and publish only
				if _, err := r.m.Reserve(ctx, []string{"scratch-2"}); err != nil {
					t.Fatal(err)
				}
			}
			r.m.Reconcile(ctx)
			s := r.slotByID("scratch-2")
			if s.State != model.StateHeld || s.Holder != "B" || s.Info.User.Get(model.PropOwner) != s.Dataset || r.readIn("scratch-2", "state") != "A's data" {
				t.Fatalf("scratch-2: %s by %s owner %q, %q", s.State, s.Holder, s.Info.User.Get(model.PropOwner), r.readIn("scratch-2", "state"))
			}
		})
	}
}

// TestStickyPairsByTask: each task of the replacement gets the data of the
// same task of its predecessor, even when Nomad swapped their slots.
func TestStickyPairsByTask(t *testing.T) {
	r := stickyRig(t, model.Release{})
	twoTasks := func(id string, idx uint64, client, desired, mainSlot, sideSlot string) model.Alloc {
		a := alloc(id, idx, client, desired, mainSlot)
		a.Devices = []model.Device{
			{Task: "main", Vendor: "zfs", Type: "dataset", Name: "scratch", IDs: []string{mainSlot}},
			{Task: "side", Vendor: "zfs", Type: "dataset", Name: "scratch", IDs: []string{sideSlot}},
		}
		return a
	}
	r.sync(twoTasks("A", 10, "running", "run", "scratch-1", "scratch-2"))
	for slot, who := range map[string]string{"scratch-1": "main", "scratch-2": "side"} {
		must(t, os.WriteFile(filepath.Join(r.f.Mountpoint("tank/nomad/scratch/"+slot), "task"), []byte(who), 0o644))
	}
	b := twoTasks("B", 20, "pending", "run", "scratch-2", "scratch-1")
	b.PreviousAllocation = "A"
	r.sync(replacing(twoTasks("A", 10, "complete", "stop", "scratch-1", "scratch-2"), "B"), b)
	for _, slot := range []string{"scratch-2", "scratch-1"} { // main's, then side's
		if _, err := r.m.Reserve(t.Context(), []string{slot}); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.readIn("scratch-2", "task") + "," + r.readIn("scratch-1", "task"); got != "main,side" {
		t.Fatalf("B's main task (scratch-2) and side task (scratch-1) read %q, want main,side", got)
	}
}

// TestParkedReleaseActsOnTheDataAsItIs: a pass plans from a scan, which
// runs beside the lifecycle. Parked data at a slot's name (a claim a crash
// interrupted) that the scan shows due for release may have been claimed
// since by a Reserve, or be in one: the pass then leaves it, and releases
// it only as it is now (found by the lifecycle simulation, seed 605520: a
// running replacement's slot destroyed as its predecessor's parked data).
func TestParkedReleaseActsOnTheDataAsItIs(t *testing.T) {
	cases := []struct {
		name string
		// meanwhile happens between the scan and its pass.
		meanwhile func(r *lifecycleRig) (unlock func())
		// kept: scratch-2 still holds A's data after the pass.
		kept bool
	}{
		{name: "claimed since the scan", kept: true, meanwhile: func(r *lifecycleRig) func() {
			must(r.t, r.c.Set(r.t.Context(), "tank/nomad/scratch/scratch-2",
				model.ClaimedProps("tank/nomad/scratch/scratch-2", successor("C", 30, "running", "scratch-2", "B"), 3, time.Now())))
			return func() {}
		}},
		{name: "the slot in a Reserve", kept: true, meanwhile: func(r *lifecycleRig) func() {
			l := r.m.locks.get("scratch-2")
			l.Lock()
			return l.Unlock
		}},
		{name: "unchanged: released", kept: false, meanwhile: func(*lifecycleRig) func() { return func() {} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := stickyRig(t, model.Release{})
			r.sync(alloc("A", 10, "running", "run", "scratch-1"))
			r.write("state", "A's data")
			r.allocs.set(replacing(alloc("A", 10, "complete", "stop", "scratch-1"), "B"), successor("B", 20, "pending", "scratch-2", "A"))
			r.m.OnAllocs(r.allocs.snap())
			r.m.Settle(t.Context()) // parks
			// B's claim, up to its rename; then the plugin restarts.
			ctx := t.Context()
			must(t, r.c.Destroy(ctx, "tank/nomad/scratch/scratch-2", zfs.DestroyOptions{}))
			must(t, r.c.Set(ctx, "tank/nomad/scratch/parked-A-scratch-1", model.ClaimAsProps("tank/nomad/scratch/parked-A-scratch-1", "tank/nomad/scratch/scratch-2")))
			must(t, r.c.Rename(ctx, "tank/nomad/scratch/parked-A-scratch-1", "tank/nomad/scratch/scratch-2"))
			r.m = mustManager(t, Config{Slots: r.m.cfg, ZFS: r.c, Allocs: r.allocs, Logger: r.m.logger})
			r.m.Reconcile(ctx) // no snapshot yet: scan and publish only

			// The scan sees the parked data with B failed: due for release.
			stale := r.m.scan(ctx, nil)
			r.allocs.set(replacing(alloc("A", 10, "complete", "stop", "scratch-1"), "B"), successor("B", 20, "failed", "scratch-2", "A"))
			r.m.storeSnapshot(r.allocs.snap())
			unlock := tc.meanwhile(r)
			r.m.reconcileScanned(ctx, stale)
			unlock()

			if got := r.readIn("scratch-2", "state") == "A's data"; got != tc.kept {
				t.Fatalf("A's data in scratch-2: %v, want %v (datasets %v)", got, tc.kept, r.datasetNames())
			}
		})
	}
}

// TestStickyDecidesOnThePredecessorsSlotAsItIs: a replacement's Reserve
// decides whether its predecessor's data can come to it from that slot as
// it is now, not as the last scan saw it. Seed 773: the scan saw a
// stranger's dataset below A's slot (the data stays put while one is
// there); the operator removed it; B's Reserve, before the next scan, took
// the stranger for still there and gave B a fresh slot, and A's data was
// then destroyed by the policy, B having started without it.
func TestStickyDecidesOnThePredecessorsSlotAsItIs(t *testing.T) {
	r := stickyRig(t, model.Release{})
	r.sync(alloc("A", 10, "running", "run", "scratch-1"))
	r.write("state", "A's data")
	stranger := "tank/nomad/scratch/scratch-1/someones"
	must(t, r.c.Create(t.Context(), stranger, nil))
	r.m.Reconcile(t.Context()) // the scan sees the stranger
	if s := r.slotByID("scratch-1"); len(s.Strangers) == 0 {
		t.Fatalf("the scan did not see the stranger: %+v", s)
	}
	must(t, r.c.Destroy(t.Context(), stranger, zfs.DestroyOptions{}))
	// A stopped and replaced by B on scratch-2; no scan since the
	// stranger went.
	r.allocs.set(replacing(alloc("A", 10, "complete", "stop", "scratch-1"), "B"), successor("B", 20, "pending", "scratch-2", "A"))
	r.m.storeSnapshot(r.allocs.snap())
	grants, err := r.m.Reserve(t.Context(), []string{"scratch-2"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(grants[0].Slot.Mountpoint, "state")); string(b) != "A's data" {
		t.Fatalf("B reads %q: it got a fresh slot while A's data could come to it", b)
	}
}

// TestParkedReleasedOnlyAsScanned: a pass decides to release parked data
// from a scan (its sticky_wait ran out), and by the time it holds the
// data's lock the name holds other data than the scan saw: here a copy
// dropped and received again under the same name, with the same marks. The
// pass leaves it (errParkedMoved) and decides again from the next scan; it
// never applies a decision made on one dataset to another (finding 12).
func TestParkedReleasedOnlyAsScanned(t *testing.T) {
	r := stickyRig(t, model.Release{})
	now := time.Now()
	r.m.now = func() time.Time { return now }
	ctx := t.Context()
	r.sync(alloc("A", 10, "running", "run", "scratch-1"))
	r.write("state", "A's data")
	r.sync(alloc("A", 10, "failed", "run", "scratch-1")) // a reschedule may come: parked
	parked := "tank/nomad/scratch/parked-A-scratch-1"
	if !r.zfsHas(parked) {
		t.Fatalf("A's data not parked: %v", r.datasetNames())
	}

	now = now.Add(2 * time.Hour) // past sticky_wait
	stale := r.m.scan(ctx, nil)
	rows, err := r.c.List(ctx, parked, model.UserProps)
	must(t, err)
	props := map[string]string{}
	for k, v := range rows[0].User.All() {
		props[k] = v
	}
	must(t, r.c.Destroy(ctx, parked, zfs.DestroyOptions{}))
	must(t, r.c.Create(ctx, parked, props))
	must(t, os.WriteFile(filepath.Join(r.f.Mountpoint(parked), "state"), []byte("another copy"), 0o644))

	r.m.reconcileScanned(ctx, stale)
	b, _ := os.ReadFile(filepath.Join(r.f.Mountpoint(parked), "state"))
	if string(b) != "another copy" {
		t.Fatalf("the pass released %s as the scan saw it, though other data is there now (datasets %v)", parked, r.datasetNames())
	}
}
