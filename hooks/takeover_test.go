package hooks

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
)

// deadFetcher is the transport to a node that is gone: nothing answers.
type deadFetcher struct{}

func (deadFetcher) Fetch(context.Context, transfer.Request, transfer.Into) (transfer.Result, error) {
	return transfer.Result{}, errors.New("dial tcp: connect: no route to host")
}

// takeoverWorld is A holding pg-1 on its node, the chosen replica node
// keeping a replica of it with two increments (the second holding
// "newest"), then A's node gone: A lost, B placed on the replica node
// in A's place, nothing answering from A's node. at is A's takeover
// time (model.TakeoverAt); c the cluster. unnamed: Nomad places B as it
// does under stop_after_client_disconnect, naming no predecessor (B's
// PreviousAllocation, A's NextAllocation empty), under A's name.
func takeoverWorld(t *testing.T, unnamed ...bool) (n *migrationNode, c *cluster, clock *testClock, at time.Time, b model.Alloc) {
	t.Helper()
	tw := newTakeoverWorld(t, len(unnamed) > 0 && unnamed[0])
	return tw.n, tw.w.c, tw.clock, tw.at, tw.b
}

// takeoverWorldOf is takeoverWorld with the rest of it: the replica
// world (A's node among it), A as the servers stopped it, and the
// replica node's own transport to A's node, which deadFetcher replaces.
type takeoverWorldOf struct {
	w     *replicaWorld
	n     *migrationNode
	clock *testClock
	at    time.Time
	a, b  model.Alloc
	live  transfer.Fetcher
}

func newTakeoverWorld(t *testing.T, unnamed bool) takeoverWorldOf {
	t.Helper()
	w := newReplicaWorld(t)
	ctx := t.Context()
	w.class.Migrate = model.Migrate{Enabled: true, Timeout: 10 * time.Minute, OnTimeout: model.MigrateFail}
	n, _, clock := w.replicaNode(t, w.chosen, repStubs(repNodeA, repNodeB, repNodeC))
	write(t, w.a.f, "tank/nomad/pg/pg-1", "data", "older")
	if _, err := n.m.replicaRound(ctx); err != nil {
		t.Fatal(err)
	}
	write(t, w.a.f, "tank/nomad/pg/pg-1", "data", "newest")
	clock.Advance(2 * time.Minute)
	if _, err := n.m.replicaRound(ctx); err != nil {
		t.Fatal(err)
	}
	name := "tank/nomad/pg/replica-" + repAllocA + "-pg-1"
	replicaHolds(t, n, name, "newest")

	// A's node is lost: Nomad marks A lost and places B on this node.
	live := n.m.fetcher
	n.m.fetcher = deadFetcher{}
	lostAt := clock.Now()
	a := pgAlloc(repAllocA, repNodeA, 10, model.ClientLost, model.DesiredStop)
	a.NextAllocation = "b0b0b0b0-0000-0000-0000-00000000000b"
	b := pgAlloc(a.NextAllocation, w.chosen, 20, model.ClientPending, model.DesiredRun)
	b.PreviousAllocation = a.ID
	a.Name, b.Name = a.JobID+"."+a.TaskGroup+"[0]", a.JobID+"."+a.TaskGroup+"[0]"
	if unnamed {
		a.NextAllocation, b.PreviousAllocation = "", ""
	}
	loss := model.LostAlloc{ID: a.ID, Namespace: a.Namespace, JobID: a.JobID, TaskGroup: a.TaskGroup, Name: a.Name,
		ClientStatus: model.ClientLost, LostAt: lostAt, StopAfter: time.Minute, KillTimeout: 10 * time.Second}
	w.c.mu.Lock()
	w.c.allocs = []model.Alloc{a, b}
	w.c.losses = map[string]model.LostAlloc{a.ID: loss}
	w.c.mu.Unlock()
	n.settle(t, w.c, w.chosen)
	at, _ := model.TakeoverAt(loss)
	return takeoverWorldOf{w: w, n: n, clock: clock, at: at, a: a, b: b, live: live}
}

// TestReserveTakesOverTheLocalReplica: B's Reserve on the node that keeps
// A's replica, once A's takeover time has passed, claims the replica: B
// is granted pg-1 holding A's newest replicated data, mounted; the
// replica and the parked data it became are gone.
func TestReserveTakesOverTheLocalReplica(t *testing.T) {
	for _, unnamed := range []bool{false, true} {
		t.Run(map[bool]string{false: "B names A", true: "B names no predecessor (stop_after_client_disconnect)"}[unnamed], func(t *testing.T) {
			reserveTakesOver(t, unnamed)
		})
	}
}

// reserveTakesOver is TestReserveTakesOverTheLocalReplica's body.
func reserveTakesOver(t *testing.T, unnamed bool) {
	n, _, clock, at, b := takeoverWorld(t, unnamed)
	clock.Set(at)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	grants, err := n.m.Reserve(ctx, []string{"pg-1"})
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	if s := grants[0].Slot; s.State != model.StateHeld || s.Holder != b.ID {
		t.Fatalf("granted %+v, want pg-1 held by B", s)
	}
	if got := read(t, n.f, "tank/nomad/pg/pg-1", "data"); got != "newest" {
		t.Errorf("B's slot holds %q, want A's newest replicated data", got)
	}
	rows, err := n.c.List(ctx, "tank/nomad/pg", model.UserProps)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		switch {
		case r.Name == "tank/nomad/pg/pg-1" && !r.Mounted:
			t.Errorf("B's slot is not mounted")
		case r.IsSnapshot() && r.Name != "tank/nomad/pg/pg-1@pristine":
			t.Errorf("left behind: %s", r.Name)
		case r.Name != "tank/nomad/pg" && r.Name != "tank/nomad/pg/pg-1" && !r.IsSnapshot():
			t.Errorf("left behind: %s (state %s)", r.Name, r.User.Get(model.PropState))
		}
	}
}

// TestReserveBeforeTheTakeoverTimeWaits: B's Reserve a second before A's
// takeover time waits (A may still write on a cut-off node) and does not
// claim: the replica stays as it is, B's slot is not B's.
func TestReserveBeforeTheTakeoverTimeWaits(t *testing.T) {
	n, c, clock, at, b := takeoverWorld(t)
	clock.Set(at.Add(-time.Second))
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := n.m.Reserve(ctx, []string{"pg-1"})
	if !errors.Is(err, ErrNotReady) {
		t.Fatalf("Reserve: %v, want it still waiting when its context ends", err)
	}
	c.mu.Lock()
	asked := c.lossAsked
	c.mu.Unlock()
	if asked == 0 {
		t.Fatal("the Reserve never asked for A's loss: it waited for something else")
	}
	replicaHolds(t, n, "tank/nomad/pg/replica-"+repAllocA+"-pg-1", "newest")
	rows, err := n.c.List(t.Context(), "tank/nomad/pg/pg-1", model.UserProps)
	if err != nil {
		t.Fatal(err)
	}
	if h := rows[0].User.Get(model.PropHolder); h == b.ID {
		t.Errorf("B recorded on pg-1 before the takeover time")
	}
}

// TestReserveAfterAHealedPartition: A's node, cut off, comes back before
// B's takeover time (docs/node-loss.md, finding (c)): its client ends A
// (complete), which the servers stopped as lost, and Nomad names no
// link either way. A's node parks A's data for the replacement it does
// not know; B's Reserve pairs itself with A all the same, takes no
// replica over (A's final data is newer), and B's node pulls that data
// from A's node, which authorizes the unlinked B (transfer.Decide):
// B is granted pg-1 holding what A wrote after the replica. A's node
// then releases its copy by the policy, the copy confirmed.
func TestReserveAfterAHealedPartition(t *testing.T) {
	tw := newTakeoverWorld(t, true)
	w, n, a, b := tw.w, tw.n, tw.a, tw.b
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	// A wrote after its last replica, before its client stopped it.
	write(t, w.a.f, "tank/nomad/pg/pg-1", "data", "final")

	// The partition heals: A's node's class migrates (as B's), its client
	// reports A complete; the servers keep their word that A was lost.
	w.a.m.cfg.Classes[0].Migrate = w.class.Migrate
	a.ClientStatus, a.LostByServers = model.ClientComplete, true
	w.c.mu.Lock()
	w.c.allocs = []model.Alloc{a, b}
	l := w.c.losses[a.ID]
	l.ClientStatus, l.LostByServers, l.CreateIndex = model.ClientComplete, true, a.CreateIndex
	w.c.losses[a.ID] = l
	w.c.mu.Unlock()
	w.nomad.SetAlloc(transfer.Alloc{ID: a.ID, NodeID: a.NodeID, Namespace: a.Namespace, JobID: a.JobID, TaskGroup: a.TaskGroup,
		Name: a.Name, DesiredStatus: model.DesiredStop, ClientStatus: model.ClientComplete, LostByServers: true, CreateIndex: a.CreateIndex})
	w.nomad.SetAlloc(transfer.Alloc{ID: b.ID, NodeID: b.NodeID, Namespace: b.Namespace, JobID: b.JobID, TaskGroup: b.TaskGroup,
		Name: b.Name, DesiredStatus: model.DesiredRun, ClientStatus: model.ClientPending, CreateIndex: b.CreateIndex})
	parked := "tank/nomad/pg/parked-" + a.ID + "-pg-1"
	waitUntil(t, 30*time.Second, "A's data parked on A's node for the replacement Nomad does not name", func() bool {
		w.a.settle(t, w.c, repNodeA)
		rows, _ := w.a.c.List(ctx, parked, model.UserProps)
		return len(rows) > 0 && rows[0].User.Get(model.PropState) == string(model.StateParked)
	})

	// Past the takeover time: it does not matter, A has ended.
	n.m.fetcher = tw.live
	tw.clock.Set(tw.at.Add(time.Minute))
	type reserved struct {
		grants []Grant
		err    error
	}
	done := make(chan reserved, 1)
	go func() {
		g, err := n.m.Reserve(ctx, []string{"pg-1"})
		done <- reserved{g, err}
	}()
	var r reserved
	for waiting := true; waiting; {
		select {
		case r = <-done:
			waiting = false
		case <-time.After(50 * time.Millisecond):
			n.settle(t, w.c, w.chosen) // a pass: the migrations start
		case <-ctx.Done():
			t.Fatal("B's Reserve did not return")
		}
	}
	if r.err != nil {
		t.Fatalf("B's Reserve: %v", r.err)
	}
	if s := r.grants[0].Slot; s.State != model.StateHeld || s.Holder != b.ID {
		t.Fatalf("granted %+v, want pg-1 held by B", s)
	}
	if got := read(t, n.f, "tank/nomad/pg/pg-1", "data"); got != "final" {
		t.Errorf("B's slot holds %q, want A's final data (not its replica's %q)", got, "newest")
	}
	replicaHolds(t, n, "tank/nomad/pg/replica-"+repAllocA+"-pg-1", "newest")
	waitUntil(t, 30*time.Second, "A's data released on A's node once its copy was confirmed", func() bool {
		n.settle(t, w.c, w.chosen) // the pull's next request confirms the copy
		w.a.settle(t, w.c, repNodeA)
		rows, _ := w.a.c.List(ctx, "tank/nomad/pg", model.UserProps)
		for _, row := range rows {
			if strings.HasPrefix(row.Name, parked) || strings.Contains(row.Name, "/retained-") {
				return false
			}
		}
		return true
	})
}

// TestPairingsSayEachPairingOnce: a Reserve looks again every few seconds
// until the takeover time; its pairing with a lost allocation Nomad does
// not name is logged at INFO once (real cluster, docs/node-loss.md
// finding (b): once per look before).
func TestPairingsSayEachPairingOnce(t *testing.T) {
	var p pairings
	steps := []struct {
		name               string
		slot, caller, lost string
		want               bool
	}{
		{name: "the first pairing on a slot", slot: "pg-1", caller: "b", lost: "a", want: true},
		{name: "the same pairing at the next look", slot: "pg-1", caller: "b", lost: "a"},
		{name: "and the look after", slot: "pg-1", caller: "b", lost: "a"},
		{name: "the same pairing on another slot", slot: "pg-2", caller: "b", lost: "a", want: true},
		{name: "another replacement on the first slot", slot: "pg-1", caller: "c", lost: "a", want: true},
		{name: "paired with another lost allocation", slot: "pg-1", caller: "c", lost: "b", want: true},
		{name: "back to a pairing said before it", slot: "pg-1", caller: "b", lost: "a", want: true},
	}
	for _, s := range steps {
		if got := p.note(s.slot, s.caller, s.lost); got != s.want {
			t.Errorf("%s: note = %v, want %v", s.name, got, s.want)
		}
	}
}
