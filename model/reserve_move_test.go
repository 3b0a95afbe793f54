package model_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// beat is one move of a loop and what came of it: want is the move
// (describe), the rest is the Result the driver feeds back, and world,
// if set, what changed meanwhile (the slot read back, a new answer).
type beat struct {
	want    string
	err     error
	found   bool
	alloc   model.Alloc
	running bool
	changed bool
	inherit *model.InheritInput
	world   func(*model.ReserveLoop)
}

// describe is a move as a beat names it: its kind, its act, the allocation
// it is about, and, for a wait, whether it is a retry.
func describe(mv model.Move) string {
	out := mv.Kind.String()
	if mv.Kind == model.MoveRun {
		out += " " + mv.Act.String()
	}
	if mv.Alloc.ID != "" {
		out += " " + mv.Alloc.ID
	}
	if mv.Kind == model.MoveWait && mv.Retry != nil {
		out += " retry"
	}
	if mv.Kind == model.MoveFail && mv.Refused {
		out += " refused"
	}
	return out
}

// play runs the beats against DecideReserveMove from in, as the driver
// would (hooks/drive.go): each move, then Since.After, then the Result.
func play(t *testing.T, in model.ReserveLoop, beats []beat) {
	t.Helper()
	var got []string
	for i, b := range beats {
		mv := model.DecideReserveMove(in)
		got = append(got, describe(mv))
		if describe(mv) != b.want {
			t.Fatalf("move %d = %q, want %q (moves so far: %s)", i, describe(mv), b.want, strings.Join(got, ", "))
		}
		if mv.Kind == model.MoveGrant || mv.Kind == model.MoveFail {
			if i != len(beats)-1 {
				t.Fatalf("move %d ends the loop, but %d more beats follow", i, len(beats)-1-i)
			}
			return
		}
		in.Since = in.Since.After(mv, b.err)
		in.Last = model.Result{Step: mv, Err: b.err, Alloc: b.alloc, Found: b.found, Running: b.running,
			Changed: b.changed, Inherit: b.inherit, Dataset: parent + "/pg/pg-1"}
		if b.world != nil {
			b.world(&in)
		}
	}
	t.Fatalf("the loop did not end: %s", strings.Join(got, ", "))
}

func TestDecideReserveMove(t *testing.T) {
	scratch := model.Class{Name: "scratch", Slots: 1}
	sticky := model.Class{Name: "pg", Slots: 2, Sticky: true}
	on := func(id string, index uint64, client, desired string) model.Alloc {
		return alloc(id, index, client, desired, "scratch", "scratch-1")
	}
	held := slotIn(scratch, "scratch-1", model.StateHeld, "A", 10)
	ready := slotIn(scratch, "scratch-1", model.StateReady, "", 10)
	heldByB := slotIn(scratch, "scratch-1", model.StateHeld, "B", 20)
	releasing := slotIn(scratch, "scratch-1", model.StateReleasing, "A", 10)
	ended := snapshot(on("A", 10, "complete", "stop"), on("B", 20, "pending", "run"))
	stopping := snapshot(on("A", 10, "running", "stop"), on("B", 20, "pending", "run"))
	callerB := snapshot(on("B", 20, "pending", "run"))
	lostA := snapshot(on("A", 10, "lost", "stop"), on("B", 20, "pending", "run"))
	goneA := callerB
	fail := errors.New("zfs: exit status 1")

	// The world's answers: the slot as read back, Nomad's answer.
	slot := func(s model.Slot) func(*model.ReserveLoop) { return func(in *model.ReserveLoop) { in.Slot = s } }
	answer := func(snap *model.Snapshot) func(*model.ReserveLoop) {
		return func(in *model.ReserveLoop) { in.Snap = snap }
	}

	cases := []struct {
		name  string
		c     model.Class
		s     model.Slot
		snap  *model.Snapshot
		beats []beat
	}{
		{name: "ready, the caller: ask, read what it may inherit, record it, grant", c: scratch, s: ready, snap: callerB, beats: []beat{
			{want: "ask"}, {want: "read-prev B"}, {want: "run record B", world: slot(heldByB)}, {want: "grant"}}},
		{name: "held, the holder's own task starting: ask, grant", c: scratch, s: held, snap: snapshot(on("A", 10, "running", "run")), beats: []beat{
			{want: "ask"}, {want: "grant"}}},
		{name: "held, the holder ended: read the slot before releasing, then ask again before the grant", c: scratch, s: held, snap: ended, beats: []beat{
			{want: "ask"}, {want: "read"}, {want: "run release A", world: slot(ready)},
			{want: "ask"}, {want: "read-prev B"}, {want: "run record B", world: slot(heldByB)}, {want: "grant"}}},
		{name: "a release a crash interrupted: read, finish it, whatever the answer", c: scratch, s: releasing, snap: nil, beats: []beat{
			{want: "read"}, {want: "run release A", world: func(in *model.ReserveLoop) { in.Slot, in.Snap = ready, callerB }},
			{want: "ask"}, {want: "read-prev B"}, {want: "run record B", world: slot(heldByB)}, {want: "grant"}}},
		{name: "the holder stops: wait, ask again, until it has ended", c: scratch, s: held, snap: stopping, beats: []beat{
			{want: "ask"}, {want: "wait A"}, {want: "ask"}, {want: "wait A", world: answer(ended)},
			{want: "ask"}, {want: "read"}, {want: "run release A", world: slot(ready)},
			{want: "ask"}, {want: "read-prev B"}, {want: "run record B", world: slot(heldByB)}, {want: "grant"}}},
		{name: "the holder lost and still running here: wait, ask again, read again before the release", c: scratch, s: held, snap: lostA, beats: []beat{
			{want: "ask"}, {want: "read"}, {want: "local A", running: true},
			{want: "wait A"}, {want: "ask"}, {want: "read"}, {want: "local A"},
			{want: "run release A", world: slot(ready)}, {want: "read-prev B"},
			{want: "run record B", world: slot(heldByB)}, {want: "grant"}}},
		{name: "the holder gone: a lookup finds it garbage-collected, the client does not run it: release", c: scratch, s: held, snap: goneA, beats: []beat{
			{want: "ask"}, {want: "read"}, {want: "lookup A", alloc: model.Alloc{ID: "A"}}, {want: "local A"},
			{want: "run release A", world: slot(ready)}, {want: "read-prev B"},
			{want: "run record B", world: slot(heldByB)}, {want: "grant"}}},
		{name: "the holder gone: the lookup finds it running: keep, wait, ask again", c: scratch, s: held, snap: goneA, beats: []beat{
			{want: "ask"}, {want: "read"}, {want: "lookup A", alloc: on("A", 10, "running", "run"), found: true},
			{want: "wait A"}, {want: "ask", world: answer(ended)}, {want: "read"}, {want: "run release A", world: slot(ready)},
			{want: "ask"}, {want: "read-prev B"}, {want: "run record B", world: slot(heldByB)}, {want: "grant"}}},
		{name: "a failed lookup is never absence: retry after a pause, reading the slot again", c: scratch, s: held, snap: goneA, beats: []beat{
			{want: "ask"}, {want: "read"}, {want: "lookup A", err: fail}, {want: "wait A retry"},
			{want: "read"}, {want: "lookup A", alloc: model.Alloc{ID: "A"}}, {want: "local A"},
			{want: "run release A", world: slot(ready)}, {want: "read-prev B"},
			{want: "run record B", world: slot(heldByB)}, {want: "grant"}}},
		{name: "Nomad unreachable: retry the question", c: scratch, s: ready, snap: callerB, beats: []beat{
			{want: "ask", err: fail}, {want: "wait retry"}, {want: "ask"}, {want: "read-prev B"},
			{want: "run record B", world: slot(heldByB)}, {want: "grant"}}},
		{name: "a release that fails (busy) is tried again on a new reading and a new answer", c: scratch, s: held, snap: ended, beats: []beat{
			{want: "ask"}, {want: "read"}, {want: "run release A", err: fail}, {want: "wait A retry"},
			{want: "ask"}, {want: "read"}, {want: "run release A", world: slot(ready)},
			{want: "ask"}, {want: "read-prev B"}, {want: "run record B", world: slot(heldByB)}, {want: "grant"}}},
		{name: "the reading a release rests on fails: not ready", c: scratch, s: held, snap: ended, beats: []beat{
			{want: "ask"}, {want: "read", err: fail}, {want: "fail"}}},
		{name: "two live, neither stopping: refuse", c: scratch, s: held,
			snap: snapshot(on("A", 10, "running", "run"), on("B", 20, "pending", "run")), beats: []beat{
				{want: "ask"}, {want: "fail A refused"}}},
		{name: "the slot unhealthy: not ready, before any question", c: scratch, s: func() model.Slot {
			s := ready
			s.Healthy, s.Reason = false, "pool suspended"
			return s
		}(), snap: callerB, beats: []beat{{want: "fail"}}},
		{name: "sticky, holder ended, caller replaces it here: record it as the data's holder", c: sticky,
			s: slotIn(sticky, "pg-1", model.StateHeld, "A", 10), snap: func() *model.Snapshot {
				a, b := alloc("A", 10, "complete", "stop", "pg", "pg-1"), alloc("B", 20, "pending", "run", "pg", "pg-1")
				a.NextAllocation, b.PreviousAllocation = "B", "A"
				return snapshot(a, b)
			}(), beats: []beat{
				{want: "ask"}, {want: "run record B", world: slot(slotIn(sticky, "pg-1", model.StateHeld, "B", 20))}, {want: "grant"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			play(t, model.ReserveLoop{Class: tc.c, Slot: tc.s, Snap: tc.snap, Nomad: true, Pace: time.Second}, tc.beats)
		})
	}
}

// TestDecideReserveMoveInherit: the moves of a ready slot's caller that
// replaces a predecessor (DecideInherit decides each reading).
func TestDecideReserveMoveInherit(t *testing.T) {
	sticky := model.Class{Name: "pg", Slots: 2, Sticky: true}
	migrating := sticky
	migrating.Migrate = model.Migrate{Enabled: true, Timeout: time.Minute, OnTimeout: model.MigrateFail}
	ready := slotIn(sticky, "pg-2", model.StateReady, "", 0)
	prev := alloc("A", 10, "complete", "stop", "pg", "pg-1")
	prev.NextAllocation = "B"
	caller := alloc("B", 20, "pending", "run", "pg", "pg-2")
	caller.PreviousAllocation = "A"
	snap := snapshot(prev, caller)
	prevHeld := slotIn(sticky, "pg-1", model.StateHeld, "A", 10)
	parked := &model.Retained{Dataset: parent + "/pg/pg-1.A", Holder: "A", State: model.StateParked}
	reading := func(c model.Class, prevSlot *model.Slot, p *model.Retained, waited time.Duration) *model.InheritInput {
		return &model.InheritInput{Class: c, Slot: ready, Caller: caller, Prev: prev, PrevSlot: prevSlot,
			Parked: p, NodeID: "node", Waited: waited}
	}
	remote := func(waited time.Duration) *model.InheritInput {
		in := reading(migrating, nil, nil, waited)
		in.Prev.NodeID = "node-2"
		return in
	}
	heldByB := slotIn(sticky, "pg-2", model.StateHeld, "B", 20)
	slot := func(s model.Slot) func(*model.ReserveLoop) { return func(in *model.ReserveLoop) { in.Slot = s } }

	cases := []struct {
		name  string
		c     model.Class
		beats []beat
	}{
		{name: "parked: claim it, then grant", c: sticky, beats: []beat{
			{want: "ask"}, {want: "read-prev B", inherit: reading(sticky, nil, parked, 0)},
			{want: "run claim B", world: slot(heldByB)}, {want: "grant"}}},
		{name: "still in its slot: park it now, read again, claim", c: sticky, beats: []beat{
			{want: "ask"}, {want: "read-prev B", inherit: reading(sticky, &prevHeld, nil, 0)},
			{want: "run park B", changed: true}, {want: "read-prev B", inherit: reading(sticky, nil, parked, 0)},
			{want: "run claim B", world: slot(heldByB)}, {want: "grant"}}},
		{name: "still in its slot and the park did not run (its lock busy): wait, ask again, park once a pause", c: sticky, beats: []beat{
			{want: "ask"}, {want: "read-prev B", inherit: reading(sticky, &prevHeld, nil, 0)},
			{want: "run park B"}, {want: "wait B"},
			{want: "ask"}, {want: "read-prev B", inherit: reading(sticky, &prevHeld, nil, time.Second)},
			{want: "run park B", changed: true}, {want: "read-prev B", inherit: reading(sticky, &prevHeld, nil, time.Second)},
			{want: "wait B"},
			{want: "ask"}, {want: "read-prev B", inherit: reading(sticky, nil, parked, 2*time.Second)},
			{want: "run claim B", world: slot(heldByB)}, {want: "grant"}}},
		{name: "a copy from the predecessor's node not come within the migrate timeout: retried until the deadline", c: migrating, beats: []beat{
			{want: "ask"}, {want: "read-prev B", inherit: remote(0)}, {want: "wait B"},
			{want: "ask"}, {want: "read-prev B", inherit: remote(2 * time.Minute)}, {want: "wait B retry"},
			{want: "read-prev B", inherit: remote(2 * time.Minute)}, {want: "wait B retry"}}},
		{name: "no predecessor here: record the caller", c: sticky, beats: []beat{
			{want: "ask"}, {want: "read-prev B"}, {want: "run record B", world: slot(heldByB)}, {want: "grant"}}},
		{name: "reading the parked data fails: retried after a pause", c: sticky, beats: []beat{
			{want: "ask"}, {want: "read-prev B", err: errors.New("zfs: exit status 1")}, {want: "wait B retry"},
			{want: "read-prev B", inherit: reading(sticky, nil, parked, 0)},
			{want: "run claim B", world: slot(heldByB)}, {want: "grant"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := model.ReserveLoop{Class: tc.c, Slot: ready, Snap: snap, Nomad: true, Pace: time.Second}
			if last := tc.beats[len(tc.beats)-1].want; last != "grant" {
				playUntil(t, in, tc.beats) // a loop that only waits, until the Reserve's deadline
				return
			}
			play(t, in, tc.beats)
		})
	}
}

// TestReserveLooksLessOftenForACopy: a Reserve waiting for its
// predecessor's data waits one pace when the data is on this node, and
// CopyLooks paces when it is a copy still coming from another node (the
// pull wakes it when the copy is claimable); then, and only then, it
// kicks the pulls (the final increment is asked for at once).
func TestReserveLooksLessOftenForACopy(t *testing.T) {
	migrating := model.Class{Name: "pg", Slots: 2, Sticky: true,
		Migrate: model.Migrate{Enabled: true, Timeout: time.Minute, OnTimeout: model.MigrateFail}}
	ready := slotIn(migrating, "pg-2", model.StateReady, "", 0)
	prev := alloc("A", 10, "complete", "stop", "pg", "pg-1")
	prev.NextAllocation = "B"
	caller := alloc("B", 20, "pending", "run", "pg", "pg-2")
	caller.PreviousAllocation = "A"
	held := slotIn(migrating, "pg-1", model.StateHeld, "A", 10)
	cases := []struct {
		name     string
		node     string
		prevSlot *model.Slot
		want     time.Duration
		kick     bool
	}{
		{name: "the predecessor's data on this node, its park already tried", node: "node", prevSlot: &held, want: time.Second},
		{name: "a copy from another node", node: "node-2", want: model.CopyLooks * time.Second, kick: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := prev
			p.NodeID = tc.node
			in := model.ReserveLoop{Class: migrating, Slot: ready, Snap: snapshot(prev, caller), Nomad: true, Pace: time.Second,
				Since: model.Since{Asked: true, Parked: true},
				Last: model.Result{Step: model.Move{Kind: model.MoveReadPrev, Alloc: caller},
					Inherit: &model.InheritInput{Class: migrating, Slot: ready, Caller: caller, Prev: p, PrevSlot: tc.prevSlot, NodeID: "node"}}}
			mv := model.DecideReserveMove(in)
			if mv.Kind != model.MoveWait || mv.For != tc.want || mv.Kick != tc.kick || mv.Awaits != model.AwaitsData {
				t.Fatalf("move %s for %v, kick %v, awaits %v: want a wait for data of %v, kick %v", describe(mv), mv.For, mv.Kick,
					mv.Awaits, tc.want, tc.kick)
			}
		})
	}
}

// playUntil is play for a loop that does not end within its beats.
func playUntil(t *testing.T, in model.ReserveLoop, beats []beat) {
	t.Helper()
	for i, b := range beats {
		mv := model.DecideReserveMove(in)
		if describe(mv) != b.want {
			t.Fatalf("move %d = %q, want %q", i, describe(mv), b.want)
		}
		in.Since = in.Since.After(mv, b.err)
		in.Last = model.Result{Step: mv, Err: b.err, Changed: b.changed, Inherit: b.inherit}
	}
}

func TestSinceAfter(t *testing.T) {
	all := model.Since{Read: true, Asked: true, Parked: true}
	fail := errors.New("x")
	cases := []struct {
		name string
		from model.Since
		mv   model.Move
		err  error
		want model.Since
	}{
		{"a read", model.Since{}, model.Move{Kind: model.MoveRead}, nil, model.Since{Read: true}},
		{"a failed read", model.Since{}, model.Move{Kind: model.MoveRead}, fail, model.Since{}},
		{"an answer", model.Since{}, model.Move{Kind: model.MoveAsk}, nil, model.Since{Asked: true}},
		{"no answer forgets the last", all, model.Move{Kind: model.MoveAsk}, fail, model.Since{Read: true, Parked: true}},
		{"a pause forgets the reading, not the answer", all, model.Move{Kind: model.MoveWait}, nil, model.Since{Asked: true}},
		{"a wait for a holder forgets both", all, model.Move{Kind: model.MoveWait, Stale: true}, nil, model.Since{}},
		{"an act reads the slot back", model.Since{}, model.Move{Kind: model.MoveRun, Act: model.ActRecord}, nil, model.Since{Read: true}},
		{"a release of an ended holder's data: ask again, even when it failed", all,
			model.Move{Kind: model.MoveRun, Act: model.ActRelease, Stale: true}, fail, model.Since{Read: true, Parked: true}},
		{"a park is tried once a pause", model.Since{}, model.Move{Kind: model.MoveRun, Act: model.ActPark}, nil, model.Since{Parked: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.from.After(tc.mv, tc.err); got != tc.want {
				t.Errorf("After = %+v, want %+v", got, tc.want)
			}
		})
	}
}
