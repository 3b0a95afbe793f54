package hooks

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// TestSettleTouchesOnlyTheSlotsItReleases: the watcher's news of an ended
// holder releases its slot and publishes it without a scan of the tree:
// every zfs command names that slot, and there is no zpool list.
func TestSettleTouchesOnlyTheSlotsItReleases(t *testing.T) {
	r := newRig(t, model.Release{}, func(c *model.Class) { c.Slots = 3 })
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
	if s, _ := v.Slot("scratch-2"); s.State != model.StateReady || s.Generation != 2 {
		t.Fatalf("published scratch-2: %s generation %d, want ready generation 2", s.State, s.Generation)
	}
	for _, call := range r.f.Calls() {
		if call[0] == "zpool" || !strings.Contains(strings.Join(call, " "), "tank/nomad/scratch/scratch-2") {
			t.Errorf("ran %q: a release touches only its slot", call)
		}
	}
}

// TestBusyReleaseIsRetriedSoon: a release refused because a process still
// has the dataset open is retried within seconds of the dataset's freeing,
// not at the next scan (an hour here).
func TestBusyReleaseIsRetriedSoon(t *testing.T) {
	r := newRig(t, model.Release{})
	r.sync(alloc("A", 10, "running", "run", "scratch-1"))
	must(t, r.f.SetBusy(slot1, true))

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.m.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not stop")
		}
	}()

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
