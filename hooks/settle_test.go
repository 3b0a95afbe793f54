package hooks

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// TestSettleTouchesOnlyTheSlotsItReleases: the watcher's news of an ended
// holder releases its slot and publishes it without a scan of the tree:
// every zfs command names that slot, and there is no zpool list. A release
// whose first change removes the data, whatever the outcome, writes no
// releasing mark first (model.Class.MarksRelease).
func TestSettleTouchesOnlyTheSlotsItReleases(t *testing.T) {
	cases := []struct {
		name    string
		release model.Release
		// verbs are the release's zfs commands, from the slot's re-read
		// to the read back of the ready slot.
		verbs string
	}{
		{name: "destroy", release: model.Release{}, verbs: "list destroy create list"},
		{name: "rollback clears only the holder it recorded", release: model.Release{Policy: model.PolicyRollback}, verbs: "list rollback set inherit list"},
		{name: "keeping failed data marks first", release: model.Release{Policy: model.PolicyRollback, OnFailure: model.PolicySnapshot, Retain: time.Hour},
			verbs: "list set rollback set inherit inherit list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.release, func(c *model.Class) { c.Slots = 3 })
			r.sync(alloc("A", 10, "running", "run", "scratch-2"))
			v, updated := r.m.View()
			if s, _ := v.Slot("scratch-2"); s.State != model.StateHeld {
				t.Fatalf("scratch-2 %s, want held", s.State)
			}
			r.f.ResetCalls()

			r.allocs.set(alloc("A", 10, "complete", "run", "scratch-2"))
			r.m.storeSnapshot(r.allocs.snap())
			r.m.Settle(t.Context())

			select {
			case <-updated:
			default:
				t.Fatal("the release was not published")
			}
			v, _ = r.m.View()
			s, _ := v.Slot("scratch-2")
			if s.State != model.StateReady || s.Generation != 2 {
				t.Fatalf("published scratch-2: %s generation %d, want ready generation 2", s.State, s.Generation)
			}
			for _, p := range []string{model.PropHolder, model.PropOutcome} {
				if v := s.Info.User.Get(p); v != "" {
					t.Errorf("ready scratch-2 still has %s=%s", p, v)
				}
			}
			var verbs []string
			for _, call := range r.f.Calls() {
				if call[0] == "zpool" || !strings.Contains(strings.Join(call, " "), "tank/nomad/scratch/scratch-2") {
					t.Errorf("ran %q: a release touches only its slot", call)
				}
				verbs = append(verbs, call[1])
			}
			if got := strings.Join(verbs, " "); got != tc.verbs {
				t.Errorf("a release ran zfs %s, want %s", got, tc.verbs)
			}
		})
	}
}

// TestBusyReleaseIsRetriedSoon: a release refused because a process still
// has the dataset open is retried within seconds of the dataset's freeing,
// not at the next scan (an hour here).
func TestBusyReleaseIsRetriedSoon(t *testing.T) {
	r := newRig(t, model.Release{})
	r.sync(alloc("A", 10, "running", "run", "scratch-1"))
	must(t, r.f.SetBusy(slot1, true))

	runManager(t, r.m)

	r.allocs.set(alloc("A", 10, "complete", "run", "scratch-1"))
	r.m.OnAllocs(r.allocs.snap())
	waitUntil(t, 30*time.Second, "the release to be tried and refused as busy", func() bool {
		s, _ := r.m.current("scratch-1")
		return s != nil && s.State == model.StateReleasing
	})
	must(t, r.f.SetBusy(slot1, false))
	waitUntil(t, 30*time.Second, "the release to be retried once the dataset is free", func() bool {
		v, _ := r.m.View()
		s, _ := v.Slot("scratch-1")
		return s.State == model.StateReady && s.Generation == 2
	})
}

// runManager runs m.Run until the test ends, and checks that it stops.
func runManager(t *testing.T, m *Manager) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not stop")
		}
	})
}

// waitUntil polls cond every 20 ms until it holds, failing after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slowCreates makes every zfs create take delay, like a slow host, and
// calls before first.
type slowCreates struct {
	zfs.Runner
	delay  time.Duration
	before func()
}

func (s slowCreates) Run(ctx context.Context, cmd string, args ...string) ([]byte, error) {
	if cmd == "zfs" && len(args) > 0 && args[0] == "create" {
		s.before()
		time.Sleep(s.delay)
	}
	return s.Runner.Run(ctx, cmd, args...)
}

// TestNewSlotsAreOfferedAsTheyAreCreated: a node with many new slots
// publishes the slots created so far about every second, each batch read
// back with one zfs list, not the whole set only at the end; and never a
// view in which the class has no healthy slot (Nomad would then mark the
// node's class ineligible for good for a job evaluated in that window).
func TestNewSlotsAreOfferedAsTheyAreCreated(t *testing.T) {
	const slots = 40
	f, _ := newFakeZFS(t)
	var m *Manager
	var mu sync.Mutex
	var seen []int // healthy slots in the published view as each create starts
	c := zfs.NewClient(slowCreates{Runner: f, delay: 200 * time.Millisecond, before: func() {
		v, _ := m.View()
		healthy := -1 // no view published yet
		if v != nil {
			healthy = 0
			for _, s := range v.Classes[0].Slots {
				if s.Healthy {
					healthy++
				}
			}
		}
		mu.Lock()
		seen = append(seen, healthy)
		mu.Unlock()
	}})
	m = newTestManager(t, c, model.Class{Name: "scratch", Slots: slots, MountPath: "/data"})
	start := time.Now()
	m.Reconcile(t.Context())
	batches := int(time.Since(start)/publishEvery) + 1 // at most one read-back per publishEvery

	v, _ := m.View()
	for _, s := range v.Classes[0].Slots {
		if !s.Healthy {
			t.Fatalf("%s not offered after the pass: %s", s.ID, s.Reason)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen[0] != -1 {
		t.Fatalf("healthy slots offered as the first create started: %d, want no view published yet", seen[0])
	}
	partial := false
	for _, n := range seen {
		if n == 0 {
			t.Fatalf("healthy slots offered as each create started: %v; a view with none was published", seen)
		}
		partial = partial || (n > 0 && n < slots)
	}
	if !partial {
		t.Fatalf("healthy slots offered as each create started: %v; no view offered part of the new slots while others were created", seen)
	}
	if lists, creates := zfsCalls(f, "list"), zfsCalls(f, "create"); creates != slots+1 || lists > 2+batches {
		t.Errorf("%d creates and %d lists for %d slots: want a class and %d slot creates, two scans and at most %d read-backs",
			creates, lists, slots, slots, batches)
	}
}

func TestInterleaveTakesClassesInTurn(t *testing.T) {
	act := func(class string, n int) model.Action {
		return model.Action{Kind: model.CreateSlot, Class: class, Dataset: "tank/nomad/" + class + "/" + model.SlotID(class, n)}
	}
	cases := []struct {
		name string
		in   []model.Action
		want string
	}{
		{name: "one class keeps its order", in: []model.Action{act("a", 1), act("a", 2)}, want: "a-1 a-2"},
		{name: "two classes alternate", in: []model.Action{act("a", 1), act("a", 2), act("a", 3), act("b", 1)}, want: "a-1 b-1 a-2 a-3"},
		{name: "none", in: nil, want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range interleave(tc.in) {
				got = append(got, a.Dataset[strings.LastIndex(a.Dataset, "/")+1:])
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOffersEveryClass(t *testing.T) {
	view := func(problem string, healthy ...[]bool) *model.View {
		v := &model.View{Problem: problem}
		for _, h := range healthy {
			cv := model.ClassView{}
			for _, ok := range h {
				cv.Slots = append(cv.Slots, model.Slot{Healthy: ok})
			}
			v.Classes = append(v.Classes, cv)
		}
		return v
	}
	cases := []struct {
		name string
		v    *model.View
		want bool
	}{
		{name: "every class has one", v: view("", []bool{false, true}, []bool{true}), want: true},
		{name: "a class with none", v: view("", []bool{true, true}, []bool{false, false})},
		{name: "a node-wide problem is published", v: view("pool missing", []bool{false}), want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := offersEveryClass(tc.v); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// gatedScans holds the answer of every full scan (`zfs list -r` of the
// parent) while gate is closed, after telling held: the listing is what
// was there when it ran, however late it returns. Other commands run at
// once.
type gatedScans struct {
	zfs.Runner
	parent string
	held   chan struct{}
	mu     sync.Mutex
	gate   chan struct{} // nil: scans run at once
}

func (g *gatedScans) Run(ctx context.Context, cmd string, args ...string) ([]byte, error) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	out, err := g.Runner.Run(ctx, cmd, args...)
	if gate != nil && cmd == "zfs" && len(args) > 0 && args[0] == "list" && args[len(args)-1] == g.parent {
		select {
		case g.held <- struct{}{}:
		default:
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return out, err
}

func (g *gatedScans) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
}

func (g *gatedScans) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gate)
	g.gate = nil
}

// TestReleaseRunsDuringAScan: the periodic scan runs off Run's loop, so a
// release goes on while a scan of the tree is still listing (at thousands
// of slots, seconds in a slow guest); and the scan, which listed the slot
// before the release, does not publish it held again when it ends.
func TestReleaseRunsDuringAScan(t *testing.T) {
	f, _ := newFakeZFS(t)
	g := &gatedScans{Runner: f, parent: "tank/nomad", held: make(chan struct{}, 1)}
	fa := &fakeAllocs{gone: map[string]bool{}, forbid: map[string]bool{}, running: map[string]bool{}}
	class := model.Class{Name: "scratch", Slots: 1, MountPath: "/data"}
	cfg := &model.Config{Parent: "tank/nomad", ScanInterval: 50 * time.Millisecond, Classes: []model.Class{class}}
	m := mustManager(t, Config{Slots: cfg, ZFS: zfs.NewClient(g), Allocs: fa})
	m.Reconcile(t.Context())
	fa.set(alloc("A", 10, "running", "run", "scratch-1"))
	m.OnAllocs(fa.snap())
	m.Reconcile(t.Context())
	if s, _ := m.current("scratch-1"); s.State != model.StateHeld {
		t.Fatalf("scratch-1 %s, want held", s.State)
	}

	g.hold()
	runManager(t, m)
	select {
	case <-g.held:
	case <-time.After(30 * time.Second):
		t.Fatal("no periodic scan started")
	}

	fa.set(alloc("A", 10, "complete", "run", "scratch-1"))
	m.OnAllocs(fa.snap())
	ready := func() bool {
		v, _ := m.View()
		s, _ := v.Slot("scratch-1")
		return s.State == model.StateReady && s.Generation == 2
	}
	waitUntil(t, 30*time.Second, "the release while the scan is held", ready)

	g.open()
}

// TestScanOlderThanARelease: a pass on a scan that listed a slot before a
// release (the scan runs beside Settle) plans and publishes the release's
// re-read, not the stale row: the slot is not released twice, not created
// again, and shown ready.
func TestScanOlderThanARelease(t *testing.T) {
	r := newRig(t, model.Release{})
	r.sync(alloc("A", 10, "running", "run", "scratch-1"))
	stale := r.m.scan(t.Context(), nil)

	r.allocs.set(alloc("A", 10, "complete", "run", "scratch-1"))
	r.m.storeSnapshot(r.allocs.snap())
	r.m.Settle(t.Context())
	r.f.ResetCalls()
	r.m.reconcileScanned(t.Context(), stale)

	v, _ := r.m.View()
	if s, _ := v.Slot("scratch-1"); s.State != model.StateReady || s.Generation != 2 || !s.Healthy {
		t.Fatalf("published scratch-1: %s generation %d healthy %v, want ready generation 2, healthy", s.State, s.Generation, s.Healthy)
	}
	for _, c := range r.f.Calls() {
		if c[0] == "zfs" && c[1] != "list" {
			t.Errorf("ran %q on a stale scan: the release was done already", c)
		}
	}
}
