package hooks

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// fakeAllocs is the allocation source below the lifecycle's Allocs seam.
type fakeAllocs struct {
	mu      sync.Mutex
	allocs  []model.Alloc
	gone    map[string]bool // Lookup says not found
	forbid  map[string]bool // Lookup says 403
	running map[string]bool // RunningLocally
	// elsewhere: Lookup finds these pending on another node.
	elsewhere map[string]bool
	failNext  int // Refresh fails this many times
	refresh   int
	lookups   int
}

func (f *fakeAllocs) set(as ...model.Alloc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allocs = as
}

func (f *fakeAllocs) snap() model.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return model.Snapshot{NodeID: "node", Index: 100, Allocs: append([]model.Alloc(nil), f.allocs...), At: time.Now()}
}

func (f *fakeAllocs) Refresh(context.Context) (model.Snapshot, error) {
	f.mu.Lock()
	f.refresh++
	fail := f.failNext > 0
	if fail {
		f.failNext--
	}
	f.mu.Unlock()
	if fail {
		return model.Snapshot{}, errors.New("connection refused")
	}
	return f.snap(), nil
}

func (f *fakeAllocs) Lookup(_ context.Context, id string) (model.Alloc, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups++
	if f.forbid[id] {
		return model.Alloc{}, false, errors.New("Unexpected response code: 403 (Permission denied)")
	}
	for _, a := range f.allocs {
		if a.ID == id {
			return a, true, nil
		}
	}
	if f.gone[id] {
		return model.Alloc{}, false, nil
	}
	if f.elsewhere[id] {
		return model.Alloc{ID: id, NodeID: "other", ClientStatus: "pending", DesiredStatus: "run"}, true, nil
	}
	return model.Alloc{}, false, errors.New("unexpected lookup of " + id)
}

func (f *fakeAllocs) RunningLocally(_ context.Context, id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running[id], nil
}

// alloc builds an allocation holding one scratch slot.
func alloc(id string, createIndex uint64, client, desired string, slot string) model.Alloc {
	return model.Alloc{
		ID: id, Namespace: "default", JobID: "job-" + id, CreateIndex: createIndex, ModifyIndex: createIndex,
		ClientStatus: client, DesiredStatus: desired,
		Devices: []model.Device{{Task: "t", Vendor: "zfs", Type: "dataset", Name: "scratch", IDs: []string{slot}}},
	}
}

// lifecycleRig is a manager over the fake ZFS and the fake allocations.
type lifecycleRig struct {
	t      *testing.T
	f      *zfstest.Fake
	c      *zfs.Client
	allocs *fakeAllocs
	m      *Manager
}

func newRig(t *testing.T, release model.Release, mods ...func(*model.Class)) *lifecycleRig {
	t.Helper()
	f, c := newFakeZFS(t)
	class := model.Class{Name: "scratch", Slots: 1, MountPath: "/data", Release: release}
	for _, mod := range mods {
		mod(&class)
	}
	fa := &fakeAllocs{gone: map[string]bool{}, forbid: map[string]bool{}, running: map[string]bool{}}
	cfg := &model.Config{Parent: "tank/nomad", ScanInterval: time.Hour, Classes: []model.Class{class}}
	r := &lifecycleRig{t: t, f: f, c: c, allocs: fa, m: mustManager(t, Config{Slots: cfg, ZFS: c, Allocs: fa})}
	r.m.Reconcile(t.Context())
	return r
}

// sync delivers the current allocations to the manager and reconciles, as
// the watcher's callback and the Run loop would.
func (r *lifecycleRig) sync(as ...model.Alloc) {
	r.allocs.set(as...)
	r.m.OnAllocs(r.allocs.snap())
	r.m.Reconcile(r.t.Context())
}

func (r *lifecycleRig) slot() model.Slot {
	v, _ := r.m.View()
	return v.Classes[0].Slots[0]
}

func (r *lifecycleRig) path(name string) string {
	return filepath.Join(r.f.Mountpoint("tank/nomad/scratch/scratch-1"), name)
}

func (r *lifecycleRig) write(name, data string) {
	r.t.Helper()
	if err := os.WriteFile(r.path(name), []byte(data), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *lifecycleRig) exists(name string) bool {
	_, err := os.Stat(r.path(name))
	return err == nil
}

func (r *lifecycleRig) wantState(state model.State, holder string, gen int) {
	r.t.Helper()
	s := r.slot()
	if s.State != state || s.Holder != holder || s.Generation != gen {
		r.t.Fatalf("slot: state %q holder %q generation %d; want %q %q %d (reason %q)", s.State, s.Holder, s.Generation, state, holder, gen, s.Reason)
	}
}

// TestLifecycleEdges walks each edge of the state machine on the fake ZFS.
func TestLifecycleEdges(t *testing.T) {
	t.Run("seen pending records the holder", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync(alloc("A", 10, "pending", "run", "scratch-1"))
		r.wantState(model.StateHeld, "A", 1)
		if r.slot().HolderIndex != 10 {
			t.Errorf("holder index %d", r.slot().HolderIndex)
		}
	})
	t.Run("complete releases by destroy and replenishes", func(t *testing.T) {
		r := newRig(t, model.Release{Policy: model.PolicyDestroy})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("secret", "A's data")
		r.sync(alloc("A", 10, "complete", "run", "scratch-1"))
		r.wantState(model.StateReady, "", 2)
		if r.exists("secret") || !r.slot().Healthy {
			t.Fatalf("not released: data present %v, slot %+v", r.exists("secret"), r.slot())
		}
	})
	t.Run("failed with on_failure snapshot retains the data aside", func(t *testing.T) {
		r := newRig(t, model.Release{Policy: model.PolicyDestroy, OnFailure: model.PolicySnapshot, Retain: time.Hour})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("crash.log", "why A failed")
		r.sync(alloc("A", 10, "failed", "run", "scratch-1"))
		r.wantState(model.StateReady, "", 2)
		if r.exists("crash.log") {
			t.Fatal("the fresh slot has A's data")
		}
		v, _ := r.m.View()
		ret := v.Classes[0].Retained
		if len(ret) != 1 || ret[0].Dataset != "tank/nomad/scratch/retained-A" || ret[0].Outcome != "failed" {
			t.Fatalf("retained %+v", ret)
		}
		b, err := os.ReadFile(filepath.Join(r.f.Mountpoint(ret[0].Dataset), "crash.log"))
		if err != nil || string(b) != "why A failed" {
			t.Fatalf("retained data: %q %v", b, err)
		}
		holds, err := r.c.Holds(t.Context(), ret[0].Dataset+"@retained")
		if err != nil || len(holds) != 1 || holds[0].Tag != model.HoldTag {
			t.Fatalf("retained snapshot not held: %+v %v", holds, err)
		}
	})
	t.Run("complete with rollback returns to pristine", func(t *testing.T) {
		r := newRig(t, model.Release{Policy: model.PolicyRollback})
		if !r.slot().HasPristine {
			t.Fatal("rollback class slot has no @pristine")
		}
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("secret", "A's data")
		r.sync(alloc("A", 10, "complete", "run", "scratch-1"))
		r.wantState(model.StateReady, "", 2)
		if r.exists("secret") {
			t.Fatal("rollback left A's data")
		}
	})
	t.Run("unknown is kept", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("keep", "x")
		r.sync(alloc("A", 10, "unknown", "run", "scratch-1"))
		r.wantState(model.StateHeld, "A", 1)
		if !r.exists("keep") {
			t.Fatal("data of an unknown allocation was touched")
		}
	})
	t.Run("stopping (desired stop, still running) is kept", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.sync(alloc("A", 10, "running", "stop", "scratch-1"))
		r.wantState(model.StateHeld, "A", 1)
	})
	t.Run("lost but still running locally is kept, then released", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("keep", "x")
		r.allocs.running["A"] = true
		r.sync(alloc("A", 10, "lost", "stop", "scratch-1"))
		r.wantState(model.StateHeld, "A", 1)
		if !r.exists("keep") {
			t.Fatal("a lost allocation still running here lost its data")
		}
		r.allocs.running["A"] = false
		r.sync(alloc("A", 10, "lost", "stop", "scratch-1"))
		r.wantState(model.StateReady, "", 2)
	})
	t.Run("garbage-collected before seen ending is released", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.allocs.gone["A"] = true
		r.sync()
		r.wantState(model.StateReady, "", 2)
	})
	t.Run("garbage-collected after a snapshot showed it failed keeps its outcome", func(t *testing.T) {
		r := newRig(t, model.Release{Policy: model.PolicyDestroy, OnFailure: model.PolicySnapshot, Retain: time.Hour})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("crash.log", "why A failed")
		// The watcher delivers A failed, then A gone, before any pass runs.
		r.allocs.set(alloc("A", 10, "failed", "run", "scratch-1"))
		r.m.OnAllocs(r.allocs.snap())
		r.allocs.gone["A"] = true
		r.sync()
		r.wantState(model.StateReady, "", 2)
		v, _ := r.m.View()
		if ret := v.Classes[0].Retained; len(ret) != 1 || ret[0].Outcome != model.OutcomeFailed {
			t.Fatalf("on_failure did not apply to a failed holder the servers collected early: retained %+v", ret)
		}
	})
	t.Run("an unrecorded holder is released by its own outcome", func(t *testing.T) {
		r := newRig(t, model.Release{Policy: model.PolicyDestroy, OnFailure: model.PolicySnapshot, Retain: time.Hour})
		// B ran and failed on the ready slot before any pass recorded it.
		r.write("crash.log", "why B failed")
		r.sync(alloc("B", 20, "failed", "run", "scratch-1"))
		r.wantState(model.StateReady, "", 2)
		v, _ := r.m.View()
		if ret := v.Classes[0].Retained; len(ret) != 1 || ret[0].Outcome != model.OutcomeFailed || ret[0].Holder != "B" {
			t.Fatalf("retained %+v, want B's data with outcome failed", ret)
		}
	})
	t.Run("invisible to the token is kept", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("keep", "x")
		r.allocs.forbid["A"] = true
		r.sync() // the narrow token's list no longer shows A
		r.wantState(model.StateHeld, "A", 1)
		if !r.exists("keep") {
			t.Fatal("an allocation the token cannot see was taken for deleted")
		}
	})
	t.Run("releasing after a crash is resumed", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("secret", "x")
		// Crash right after the release was recorded: destroy never ran.
		r.f.Inject(zfstest.Fault{Cmd: "zfs", ArgsContain: []string{"destroy"}, Stderr: "killed", ExitCode: 137, Times: 1})
		r.sync(alloc("A", 10, "complete", "run", "scratch-1"))
		if s := r.slot(); s.State != model.StateReleasing {
			t.Fatalf("after the failed step: %+v", s)
		}
		r.sync(alloc("A", 10, "complete", "run", "scratch-1"))
		r.wantState(model.StateReady, "", 2)
		if r.exists("secret") {
			t.Fatal("resumed release left data")
		}
	})
	t.Run("crash between destroy and create is repaired", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.f.Inject(zfstest.Fault{Cmd: "zfs", ArgsContain: []string{"create"}, Stderr: "killed", ExitCode: 137, Times: 1})
		r.sync(alloc("A", 10, "complete", "run", "scratch-1"))
		r.sync(alloc("A", 10, "complete", "run", "scratch-1"))
		if s := r.slot(); !s.Healthy || s.State != model.StateReady {
			t.Fatalf("not repaired: %+v", s)
		}
	})
	t.Run("an allocation that ran unrecorded is released", func(t *testing.T) {
		r := newRig(t, model.Release{})
		// The plugin was down while B ran and ended on the ready slot.
		r.write("secret", "B's data")
		r.sync(alloc("B", 20, "complete", "run", "scratch-1"))
		r.wantState(model.StateReady, "", 2)
		if r.exists("secret") {
			t.Fatal("unrecorded holder's data left in a ready slot")
		}
		// Old allocations are not taken for new ones: no second wipe.
		r.write("fresh", "y")
		r.sync(alloc("B", 20, "complete", "run", "scratch-1"))
		if !r.exists("fresh") || r.slot().Generation != 2 {
			t.Fatal("a released holder was released again")
		}
	})
	t.Run("unrecorded holder's data goes before a pending newcomer gets it", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.write("secret", "D's data")
		r.sync(alloc("D", 20, "complete", "run", "scratch-1"), alloc("B", 30, "pending", "run", "scratch-1"))
		if r.exists("secret") {
			t.Fatal("B was recorded on a slot still holding D's data")
		}
		r.sync(alloc("D", 20, "complete", "run", "scratch-1"), alloc("B", 30, "pending", "run", "scratch-1"))
		r.wantState(model.StateHeld, "B", 2)
	})
	t.Run("nothing is wiped under a running allocation", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.write("live", "B's data")
		r.sync(alloc("D", 20, "complete", "run", "scratch-1"), alloc("B", 30, "running", "run", "scratch-1"))
		if !r.exists("live") {
			t.Fatal("a running allocation's data was wiped")
		}
		r.wantState(model.StateHeld, "B", 1)
	})
	t.Run("busy dataset is retried, not forced", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("open", "held open by a process")
		must(t, r.f.SetBusy("tank/nomad/scratch/scratch-1", true))
		r.sync(alloc("A", 10, "complete", "run", "scratch-1"))
		if s := r.slot(); s.State != model.StateReleasing || !r.exists("open") {
			t.Fatalf("busy: state %q, data present %v", s.State, r.exists("open"))
		}
		must(t, r.f.SetBusy("tank/nomad/scratch/scratch-1", false))
		r.sync(alloc("A", 10, "complete", "run", "scratch-1"))
		r.wantState(model.StateReady, "", 2)
	})
}

// TestReserveFencing covers Reserve's decisions on real (fake) datasets: a
// new holder never sees a byte of the previous holder's data, under every
// policy.
func TestReserveFencing(t *testing.T) {
	for _, policy := range []model.Policy{model.PolicyDestroy, model.PolicyRollback, model.PolicySnapshot} {
		t.Run("pending release completed first ("+string(policy)+")", func(t *testing.T) {
			r := newRig(t, model.Release{Policy: policy, Retain: time.Hour})
			r.sync(alloc("A", 10, "running", "run", "scratch-1"))
			r.write("secret", "A's data")
			// A ended and B was placed on the same slot before the watcher
			// acted (the server frees a device at client-terminal).
			r.allocs.set(alloc("A", 10, "complete", "run", "scratch-1"), alloc("B", 20, "pending", "run", "scratch-1"))
			grants, err := r.m.Reserve(t.Context(), []string{"scratch-1"})
			if err != nil {
				t.Fatal(err)
			}
			entries, _ := os.ReadDir(grants[0].Slot.Mountpoint)
			for _, e := range entries {
				t.Errorf("B sees %s left by A", e.Name())
			}
			r.sync(alloc("A", 10, "complete", "run", "scratch-1"), alloc("B", 20, "running", "run", "scratch-1"))
			r.wantState(model.StateHeld, "B", 2)
		})
	}
	t.Run("destructive update waits for the stopping predecessor", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("secret", "A's data")
		r.allocs.set(alloc("A", 10, "running", "stop", "scratch-1"), alloc("B", 20, "pending", "run", "scratch-1"))
		go func() {
			time.Sleep(700 * time.Millisecond)
			r.allocs.set(alloc("A", 10, "complete", "stop", "scratch-1"), alloc("B", 20, "pending", "run", "scratch-1"))
		}()
		start := time.Now()
		grants, err := r.m.Reserve(t.Context(), []string{"scratch-1"})
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(start) < 500*time.Millisecond {
			t.Error("Reserve did not wait for A to stop")
		}
		if _, err := os.Stat(filepath.Join(grants[0].Slot.Mountpoint, "secret")); err == nil {
			t.Fatal("B sees A's data")
		}
	})
	t.Run("stopping predecessor that never ends: bounded, then refused", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("keep", "A's live data")
		r.allocs.set(alloc("A", 10, "running", "stop", "scratch-1"), alloc("B", 20, "pending", "run", "scratch-1"))
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		if _, err := r.m.Reserve(ctx, []string{"scratch-1"}); !errors.Is(err, ErrNotReady) {
			t.Fatalf("got %v", err)
		}
		if !r.exists("keep") {
			t.Fatal("a live holder's data was wiped")
		}
	})
	t.Run("live holder not stopping and another claimant: refused", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.allocs.set(alloc("A", 10, "running", "run", "scratch-1"), alloc("B", 20, "pending", "run", "scratch-1"))
		_, err := r.m.Reserve(t.Context(), []string{"scratch-1"})
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "refusing to share") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("holder's own task start: its data untouched, no zfs, one query", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync(alloc("A", 10, "pending", "run", "scratch-1")) // recorded while pending
		r.write("keep", "x")
		r.f.ResetCalls()
		before := r.allocs.refresh
		for i := 0; i < 2; i++ { // and a second task start of the same holder
			if _, err := r.m.Reserve(t.Context(), []string{"scratch-1"}); err != nil {
				t.Fatal(err)
			}
		}
		if calls := r.f.Calls(); len(calls) != 0 {
			t.Fatalf("Reserve ran zfs: %q", calls)
		}
		if n := r.allocs.refresh - before; n != 2 {
			t.Errorf("%d queries for 2 Reserves, want 2", n)
		}
		if !r.exists("keep") {
			t.Fatal("the holder's data changed")
		}
	})
	t.Run("stale snapshot: a replacement is not taken for the holder", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync(alloc("A", 10, "running", "run", "scratch-1"))
		r.write("secret", "A's data")
		// The watcher has not seen A end nor B arrive; Nomad has.
		r.allocs.set(alloc("A", 10, "complete", "run", "scratch-1"), alloc("B", 20, "pending", "run", "scratch-1"))
		grants, err := r.m.Reserve(t.Context(), []string{"scratch-1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(grants[0].Slot.Mountpoint, "secret")); err == nil {
			t.Fatal("B was handed A's data on a stale snapshot")
		}
	})
	t.Run("watcher behind: Reserve refreshes once", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync() // the watcher has not seen B yet
		r.allocs.set(alloc("B", 20, "pending", "run", "scratch-1"))
		if _, err := r.m.Reserve(t.Context(), []string{"scratch-1"}); err != nil {
			t.Fatal(err)
		}
		if r.allocs.refresh != 1 {
			t.Errorf("%d refreshes, want 1", r.allocs.refresh)
		}
	})
	t.Run("API down at first: retried until it answers", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.allocs.set(alloc("B", 20, "pending", "run", "scratch-1"))
		r.allocs.failNext = 2
		if _, err := r.m.Reserve(t.Context(), []string{"scratch-1"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("nobody names the slot: refused, not guessed", func(t *testing.T) {
		r := newRig(t, model.Release{})
		r.sync()
		_, err := r.m.Reserve(t.Context(), []string{"scratch-1"})
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "read-job") {
			t.Fatalf("got %v", err)
		}
	})
}

// TestReconcileDoesNotWaitForReserve: a Reserve waiting for a stopping
// predecessor holds its slot; a reconcile pass meanwhile must not block.
func TestReconcileDoesNotWaitForReserve(t *testing.T) {
	r := newRig(t, model.Release{})
	r.sync(alloc("A", 10, "running", "run", "scratch-1"))
	r.allocs.set(alloc("A", 10, "running", "stop", "scratch-1"), alloc("B", 20, "pending", "run", "scratch-1"))
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	go func() { _, _ = r.m.Reserve(ctx, []string{"scratch-1"}) }()
	time.Sleep(200 * time.Millisecond) // Reserve is now waiting, holding the slot
	done := make(chan struct{})
	go func() {
		r.m.OnAllocs(r.allocs.snap())
		r.m.Reconcile(t.Context())
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("a reconcile pass blocked behind a waiting Reserve")
	}
}

func TestRetentionPruned(t *testing.T) {
	r := newRig(t, model.Release{Policy: model.PolicySnapshot, Retain: time.Hour, RetainMax: 1})
	now := time.Now()
	r.m.now = func() time.Time { return now }
	for i, id := range []string{"A", "B"} {
		idx := uint64(10 * (i + 1))
		r.sync(alloc(id, idx, "running", "run", "scratch-1"))
		r.sync(alloc(id, idx, "complete", "run", "scratch-1"))
		now = now.Add(time.Minute)
	}
	r.m.Reconcile(t.Context())
	v, _ := r.m.View()
	if ret := v.Classes[0].Retained; len(ret) != 1 || ret[0].Holder != "B" {
		t.Fatalf("retain_max 1: %+v", ret)
	}
	now = now.Add(2 * time.Hour)
	r.m.Reconcile(t.Context())
	r.m.Reconcile(t.Context())
	if v, _ = r.m.View(); len(v.Classes[0].Retained) != 0 {
		t.Fatalf("expired data kept: %+v", v.Classes[0].Retained)
	}
}

func TestGoldenCloneClass(t *testing.T) {
	f, c := newFakeZFS(t)
	ctx := t.Context()
	must(t, c.Create(ctx, "tank/golden", nil))
	must(t, os.WriteFile(filepath.Join(f.Mountpoint("tank/golden"), "seed.sql"), []byte("seed"), 0o644))
	must(t, c.Snapshot(ctx, "tank/golden@seed", nil))
	fa := &fakeAllocs{}
	cfg := &model.Config{Parent: "tank/nomad", ScanInterval: time.Hour, Classes: []model.Class{{Name: "scratch", Slots: 1, MountPath: "/db", FromSnapshot: "tank/golden@seed"}}}
	m := mustManager(t, Config{Slots: cfg, ZFS: c, Allocs: fa})
	m.Reconcile(ctx)
	v, _ := m.View()
	s := v.Classes[0].Slots[0]
	if s.Info.Origin != "tank/golden@seed" {
		t.Fatalf("slot not a clone: origin %q", s.Info.Origin)
	}
	seed := filepath.Join(s.Mountpoint, "seed.sql")
	must(t, os.WriteFile(seed, []byte("changed by A"), 0o644))
	fa.set(alloc("A", 10, "running", "run", "scratch-1"))
	m.OnAllocs(fa.snap())
	m.Reconcile(ctx)
	fa.set(alloc("A", 10, "complete", "run", "scratch-1"))
	m.OnAllocs(fa.snap())
	m.Reconcile(ctx)
	if b, err := os.ReadFile(seed); err != nil || string(b) != "seed" {
		t.Fatalf("re-cloned slot: %q %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.Mountpoint("tank/golden"), "seed.sql")); string(b) != "seed" {
		t.Fatal("the golden dataset was changed")
	}
}

// TestReconcileLeavesAFencedSlotToReserve: between the destroy and the
// re-create of a release started by Reserve (which holds the slot's lock),
// a reconcile pass must not create the slot itself: that would lose the
// holder index the release records.
func TestReconcileLeavesAFencedSlotToReserve(t *testing.T) {
	r := newRig(t, model.Release{})
	lock := r.m.locks.get("scratch-1")
	lock.Lock()
	must(t, r.c.Destroy(t.Context(), "tank/nomad/scratch/scratch-1", zfs.DestroyOptions{Recursive: true}))
	r.m.Reconcile(t.Context())
	if r.slot().Exists {
		t.Fatal("the reconcile re-created a slot a Reserve is releasing")
	}
	lock.Unlock()
	r.m.Reconcile(t.Context())
	if s := r.slot(); !s.Exists || !s.Healthy {
		t.Fatalf("not re-created once free: %+v", s)
	}
}
