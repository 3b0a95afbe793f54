package hooks

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// TestReceiverOnTheCutoversPath: the receiving node's zfs commands from
// the final increment to the copy marked claimable (docs/performance.md,
// the cutover against its floor). The round's one listing carries the
// resume token; after the stream the pull decides on the listing the
// fetch verified the snapshot on, and asks for "complete" at once, with no
// resume token (the sender answers it from the base alone); the older
// pre-copy snapshot stays for the claim to drop (one destroy with the
// final one).
func TestReceiverOnTheCutoversPath(t *testing.T) {
	class := model.Class{Name: "pg", Slots: 1, MountPath: "/data", Sticky: true, StickyWait: time.Hour,
		Migrate: model.Migrate{Enabled: true, Timeout: time.Minute, OnTimeout: model.MigrateFail}}
	c := &cluster{}
	n1 := newMigrationNode(t, c, "node-1", class)
	n2 := newMigrationNode(t, c, "node-2", class)
	n2.m.fetcher = directFetcher{source: n1.m.Sender(), from: n1.c, to: n2.c}
	a, b := placeReplacement(t, c, n1, "A's data")
	ctx := t.Context()
	n2.m.storeSnapshot(nodeAllocs{c: c, node: "node-2"}.snap())
	n2.m.lookupPredecessors(ctx)
	migs, _ := model.Migrations(n2.m.cfg, n2.m.snapshot())
	if len(migs) != 1 {
		t.Fatalf("migrations: %v", migs)
	}
	mg := migs[0]
	if got := pullRound(t, n2.m, mg); got.Kind != model.MoveWait || got.For != model.PullEvery || got.Retry != nil {
		t.Fatalf("the pre-copy: the round ends %s (%s) after %s, error %v", got.Kind, got.Phase, got.For, got.Retry)
	}
	a.ClientStatus = "complete"
	c.set(a, b)
	waitUntil(t, 30*time.Second, "A's data parked on node 1", func() bool {
		n1.settle(t, c, "node-1")
		p, _ := n1.m.readParked(ctx, "tank/nomad/pg/parked-A-pg-1")
		return p != nil && p.State == model.StateParked
	})
	const copyName = "tank/nomad/pg/parked-A-pg-1"
	steps := []struct {
		name     string
		want     string // how the round ends
		commands []string
	}{
		{name: "the final increment, then complete: no drop of the pre-copy, no listing of the pull's own", want: "done",
			// The copy with its resume token, the increment, the copy as
			// the fetch verified it, which the pull decides on; "complete"
			// asked at once, and the copy marked parked.
			commands: []string{"list", "receive", "list", "set"}},
		// The pass the mark wakes starts a pull again (Nomad shows B
		// pending until its task runs): it ends without a listing, which
		// the claim would wait for under the copy's lock.
		{name: "the pass's next pull of the claimable copy: no command", want: "done"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			n2.f.ResetCalls()
			end := pullRoundFrom(t, n2.m, mg, n2.f.ResetCalls)
			got := end.Kind.String()
			if end.Kind == model.MoveWait {
				got += " " + end.For.String()
			}
			if got != st.want || end.Retry != nil {
				t.Fatalf("the round ends %s (%s), error %v; want %s", got, end.Phase, end.Retry, st.want)
			}
			var verbs []string
			for _, call := range n2.f.Calls() {
				verbs = append(verbs, call[1])
			}
			if strings.Join(verbs, " ") != strings.Join(st.commands, " ") {
				t.Errorf("zfs commands %q, want %q", n2.f.Calls(), st.commands)
			}
		})
	}
	rows, err := n2.c.List(ctx, copyName, model.UserProps)
	if err != nil {
		t.Fatal(err)
	}
	var snaps []string
	for _, r := range rows[1:] {
		snaps = append(snaps, r.Name)
	}
	if want := []string{copyName + "@migrate-1", copyName + "@migrate-final"}; strings.Join(snaps, " ") != strings.Join(want, " ") {
		t.Errorf("the claimable copy's snapshots: %v, want %v (the claim drops them)", snaps, want)
	}

	// B's Reserve: the copy read, the claim (its snapshots and the fresh
	// slot destroyed, the rename, the held mark, the mount: no set before
	// the rename, the pull's mark named the slot), the slot read back.
	n2.settle(t, c, "node-2")
	n2.f.ResetCalls()
	if _, err := n2.m.Reserve(ctx, []string{"pg-1"}); err != nil {
		t.Fatalf("B's Reserve: %v", err)
	}
	var verbs []string
	for _, call := range n2.f.Calls() {
		verbs = append(verbs, call[1])
	}
	if want := "list destroy destroy rename set mount list"; strings.Join(verbs, " ") != want {
		t.Errorf("B's Reserve: zfs commands %q, want %s", n2.f.Calls(), want)
	}
}

// TestPullAsksWhenAReserveWaits: the driver ends a pull's pause before its
// next increment (model.AwaitsIncrement) when a Reserve waits for a copy
// from another node (model.Move.Kick: its predecessor has ended, the final
// increment may be ready), not at the pull's next tick; a pause after a
// failure (a back-off) is not cut, nor is any pause by a Reserve that
// does not kick (one waiting for data on its own node). The deciders say
// which pause is which (TestDecidePullMove, TestReserveLooksLessOftenForACopy).
func TestPullAsksWhenAReserveWaits(t *testing.T) {
	pace := model.Move{Kind: model.MoveWait, Phase: model.PullNext, For: model.PullEvery, Awaits: model.AwaitsIncrement}
	backoff := model.Move{Kind: model.MoveWait, Phase: model.PullRetry, For: model.PullEvery, Attempt: 4}
	forCopy := model.Move{Kind: model.MoveWait, For: time.Millisecond, Awaits: model.AwaitsData, Kick: true}
	forLocal := model.Move{Kind: model.MoveWait, For: time.Millisecond, Awaits: model.AwaitsData}
	cases := []struct {
		name          string
		pull, reserve model.Move
		woken         bool
	}{
		{name: "between increments, a Reserve waiting for a copy", pull: pace, reserve: forCopy, woken: true},
		{name: "a back-off after a failure", pull: backoff, reserve: forCopy},
		{name: "between increments, a Reserve waiting for data on its node", pull: pace, reserve: forLocal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, z := newFakeZFS(t)
			m := mustManager(t, Config{Slots: &model.Config{Parent: "tank/nomad"}, ZFS: z})
			m.sleep = func(ctx context.Context, d time.Duration) error {
				if d != model.PullEvery {
					return nil // the Reserve's, ended at once
				}
				<-ctx.Done() // the pull's: ended only by a kick (or the test's end)
				return ctx.Err()
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- m.move(ctx, tc.pull, time.Now()).Err }()
			if tc.pull.Awaits == model.AwaitsIncrement {
				waitUntil(t, 10*time.Second, "the pull's pause registered", func() bool {
					m.pulls.mu.Lock()
					defer m.pulls.mu.Unlock()
					return len(m.pulls.napping) == 1
				})
			}
			if r := m.move(ctx, tc.reserve, time.Now()); r.Err != nil {
				t.Fatalf("the Reserve's pause: %v", r.Err)
			}
			select {
			case err := <-done:
				if !tc.woken || err != nil {
					t.Fatalf("the pull's pause ended (%v); woken %v", err, tc.woken)
				}
			case <-time.After(200 * time.Millisecond):
				if tc.woken {
					t.Fatal("the pull's pause was not ended by the Reserve's wait")
				}
				cancel()
				if err := <-done; err == nil {
					t.Fatal("a pause ended by its context returned nil")
				}
			}
		})
	}
}
