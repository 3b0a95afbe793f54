package hooks

import (
	"context"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// TestWaitingReserveWokenByTheCopy: B's Reserve on node 2, waiting for the
// copy of A's data, claims it as soon as the pull has made it claimable,
// not at its next look: here its pauses never end by themselves (only by
// its context), so it is granted only if the pull wakes it.
func TestWaitingReserveWokenByTheCopy(t *testing.T) {
	class := model.Class{Name: "pg", Slots: 1, MountPath: "/data", Sticky: true, StickyWait: time.Hour,
		Migrate: model.Migrate{Enabled: true, Timeout: time.Hour, OnTimeout: model.MigrateFail}}
	c := &cluster{}
	n1 := newMigrationNode(t, c, "node-1", class)
	n2 := newMigrationNode(t, c, "node-2", class)
	n2.m.fetcher = directFetcher{source: n1.m.Sender(), from: n1.c, to: n2.c}
	pullPause := n2.m.sleep
	n2.m.sleep = func(ctx context.Context, d time.Duration) error {
		if d != model.CopyLooks*waitStep {
			return pullPause(ctx, d) // the pull's, short
		}
		<-ctx.Done() // Reserve's: ended only by a wake (or the test's end)
		return ctx.Err()
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	a, b := placeReplacement(t, c, n1, "before the end")
	n1.settle(t, c, "node-1")
	n2.m.storeSnapshot(nodeAllocs{c: c, node: "node-2"}.snap())
	n2.m.Settle(ctx) // starts the pull
	copyName := "tank/nomad/pg/parked-A-pg-1"
	waitUntil(t, 30*time.Second, "a pre-copy on node 2", func() bool {
		rows, _ := n2.c.List(ctx, copyName, model.UserProps)
		return len(rows) > 1
	})

	type result struct {
		grants []Grant
		err    error
	}
	done := make(chan result, 1)
	go func() {
		g, err := n2.m.Reserve(ctx, []string{"pg-1"})
		done <- result{g, err}
	}()
	waitUntil(t, 30*time.Second, "B's Reserve waiting for the copy", func() bool {
		n2.m.pulls.mu.Lock()
		defer n2.m.pulls.mu.Unlock()
		return len(n2.m.pulls.waiting) > 0
	})

	write(t, n1.f, "tank/nomad/pg/pg-1", "data", "the last write")
	a.ClientStatus = "complete"
	c.set(a, b)
	waitUntil(t, 30*time.Second, "A's data parked on node 1", func() bool {
		n1.settle(t, c, "node-1")
		rows, _ := n1.c.List(ctx, copyName, model.UserProps)
		return len(rows) > 0
	})
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("B's Reserve: %v", r.err)
		}
		if got := read(t, n2.f, r.grants[0].Slot.Dataset, "data"); got != "the last write" {
			t.Fatalf("B's slot holds %q, want A's last write", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("B's Reserve still waits with the copy claimable: the pull did not wake it")
	}
}

// TestPullOfAClaimableCopyIsQuiet: once the copy is parked (claimable), a
// pull a pass starts for it (one does for each migration until Nomad shows
// the replacement running) asks the sending node nothing and asks for no
// further pass: before, each such pull ended with a pass, which started
// the next, over and over beside the replacement's claim.
func TestPullOfAClaimableCopyIsQuiet(t *testing.T) {
	class := model.Class{Name: "pg", Slots: 1, MountPath: "/data", Sticky: true, StickyWait: time.Hour,
		Migrate: model.Migrate{Enabled: true, Timeout: time.Hour, OnTimeout: model.MigrateFail}}
	c := &cluster{}
	n1 := newMigrationNode(t, c, "node-1", class)
	n2 := newMigrationNode(t, c, "node-2", class)
	n2.m.fetcher = directFetcher{source: n1.m.Sender(), from: n1.c, to: n2.c}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	a, b := placeReplacement(t, c, n1, "the data")
	a.ClientStatus = "complete"
	c.set(a, b)
	waitUntil(t, 30*time.Second, "A's data parked on node 1", func() bool {
		n1.settle(t, c, "node-1")
		rows, _ := n1.c.List(ctx, "tank/nomad/pg/parked-A-pg-1", model.UserProps)
		return len(rows) > 0
	})
	n2.m.storeSnapshot(nodeAllocs{c: c, node: "node-2"}.snap())
	n2.m.lookupPredecessors(ctx)
	migs, _ := model.Migrations(n2.m.cfg, n2.m.snapshot())
	if len(migs) != 1 {
		t.Fatalf("migrations: %v, want one", migs)
	}
	n2.m.pull(ctx, migs[0]) // pre-copy, final increment, "complete": parked
	if rows, _ := n2.c.List(ctx, migs[0].ParkedName, model.UserProps); len(rows) == 0 || rows[0].User.Get(model.PropState) != string(model.StateParked) {
		t.Fatalf("the copy after the pull: %+v, want it parked", rows)
	}

	select {
	case <-n2.m.wake: // the first pull's pass, asked for
	default:
	}
	counting := &countingFetcher{next: n2.m.fetcher}
	n2.m.fetcher = counting
	n2.m.pull(ctx, migs[0])
	if n := counting.calls.Load(); n != 0 {
		t.Errorf("a pull of the claimable copy asked node 1 %d times", n)
	}
	select {
	case <-n2.m.wake:
		t.Error("a pull of the claimable copy asked for a pass: the next pass starts the next such pull")
	default:
	}
}
