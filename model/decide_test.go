package model_test

import (
	"strings"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The three decisions every change rests on, by name: Judge (may this
// holder still run?), PlanSlot (what a pass does to one slot) and
// DecideReserve (the fence a Reserve passes).

func TestJudge(t *testing.T) {
	cases := []struct {
		name    string
		a       model.Alloc
		found   bool
		want    model.Liveness
		outcome string
	}{
		{"pending", alloc("A", 10, "pending", "run", "scratch"), true, model.MayRun, ""},
		{"running", alloc("A", 10, "running", "run", "scratch"), true, model.MayRun, ""},
		{"unknown: its node is cut off", alloc("A", 10, "unknown", "run", "scratch"), true, model.MayRun, ""},
		{"stopping: desired stop, still running", alloc("A", 10, "running", "stop", "scratch"), true, model.MayRun, ""},
		{"complete", alloc("A", 10, "complete", "stop", "scratch"), true, model.Ended, model.OutcomeComplete},
		{"failed", alloc("A", 10, "failed", "run", "scratch"), true, model.Ended, model.OutcomeFailed},
		{"lost: may still run on a cut-off node", alloc("A", 10, "lost", "stop", "scratch"), true, model.AskClient, model.OutcomeLost},
		{"gone from the servers", model.Alloc{ID: "A"}, false, model.AskClient, model.OutcomeGone},
		{"lost, then complete as its node came back: ended lost", lostThenComplete(), true, model.Ended, model.OutcomeLost},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, outcome := model.Judge(tc.a, tc.found)
			if got != tc.want || outcome != tc.outcome {
				t.Errorf("Judge = %s, %q; want %s, %q", got, outcome, tc.want, tc.outcome)
			}
		})
	}
}

// lostThenComplete is an allocation the servers stopped as lost with its
// node, which its client, back, then reported complete (e2e
// TestReplicaNodeLoss on Nomad 1.6.2).
func lostThenComplete() model.Alloc {
	a := alloc("A", 10, "complete", "stop", "scratch")
	a.LostByServers = true
	return a
}

// slotIn is slot id of class c as a scan reads it: held by holder
// (recorded at holderIndex) in state, or ready when holder is "".
func slotIn(c model.Class, id string, state model.State, holder string, holderIndex uint64) model.Slot {
	s := model.Slot{ID: id, Class: c.Name, Dataset: parent + "/" + c.Name + "/" + id, Exists: true, State: state,
		Holder: holder, HolderIndex: holderIndex, Generation: 1, Healthy: true}
	s.Info = withUser(map[string]string{model.PropHolder: holder})
	return s
}

// withUser is a scanned row's Info with the plugin's user properties m.
func withUser(m map[string]string) model.Info {
	return model.InfoOf(&zfs.Dataset{User: zfs.UserPropsOf(m)})
}

func TestPlanSlot(t *testing.T) {
	scratch := model.Class{Name: "scratch", Slots: 1}
	rollback := model.Class{Name: "scratch", Slots: 1, Release: model.Release{Policy: model.PolicyRollback}}
	sticky := model.Class{Name: "pg", Slots: 2, Sticky: true}
	a := func(client, desired string) model.Alloc {
		return alloc("A", 10, client, desired, "scratch", "scratch-1")
	}
	b := func(client, desired string) model.Alloc {
		return alloc("B", 20, client, desired, "scratch", "scratch-1")
	}
	held := slotIn(scratch, "scratch-1", model.StateHeld, "A", 10)
	ready := slotIn(scratch, "scratch-1", model.StateReady, "", 10)
	pgA := alloc("A", 10, "complete", "stop", "pg", "pg-1")
	pgA.NextAllocation = "B"
	pgB := alloc("B", 20, "pending", "run", "pg", "pg-1")
	pgB.PreviousAllocation = "A"

	cases := []struct {
		name    string
		c       model.Class
		s       model.Slot
		snap    *model.Snapshot
		want    string // "" when nothing is to be done: "<kind> <alloc> <outcome>"
		mutates func(*model.Slot)
	}{
		{name: "a release under way is finished with its recorded outcome", c: scratch,
			s: func() model.Slot {
				s := slotIn(scratch, "scratch-1", model.StateReleasing, "A", 10)
				s.Outcome = model.OutcomeFailed
				return s
			}(), snap: snapshot(), want: "release A failed"},
		{name: "held, holder missing from the list: look it up", c: scratch, s: held, snap: snapshot(), want: "check vanished holder A"},
		{name: "held, holder running: keep", c: scratch, s: held, snap: snapshot(a("running", "run"))},
		{name: "held, holder stopping: keep", c: scratch, s: held, snap: snapshot(a("running", "stop"))},
		{name: "held, holder unknown (node cut off): keep", c: scratch, s: held, snap: snapshot(a("unknown", "run"))},
		{name: "held, holder complete: release", c: scratch, s: held, snap: snapshot(a("complete", "stop")), want: "release A complete"},
		{name: "held, holder failed: release", c: scratch, s: held, snap: snapshot(a("failed", "run")), want: "release A failed"},
		{name: "held, holder lost: ask the local client", c: scratch, s: held, snap: snapshot(a("lost", "stop")), want: "check lost holder A"},
		{name: "sticky, holder ended, its replacement placed on the same slot: inherits in place", c: sticky,
			s: slotIn(sticky, "pg-1", model.StateHeld, "A", 10), snap: snapshot(pgA, pgB), want: "record holder B"},
		{name: "ready, a newer allocation ended on it unrecorded: release its data", c: scratch, s: ready,
			snap: snapshot(b("complete", "stop")), want: "release B complete"},
		{name: "ready, a newer lost allocation on it: ask the local client first", c: scratch, s: ready,
			snap: snapshot(b("lost", "stop")), want: "check lost holder B"},
		{name: "ready, the recorded holder's own end is not news", c: scratch, s: ready, snap: snapshot(a("complete", "stop"))},
		{name: "ready, a live allocation names it: record it", c: scratch, s: ready, snap: snapshot(b("running", "run")),
			want: "record holder B"},
		{name: "ready, an ended one and a running one on it: never wipe under a running one", c: scratch, s: ready,
			snap: snapshot(b("complete", "stop"), func() model.Alloc { c := alloc("C", 30, "running", "run", "scratch", "scratch-1"); return c }()),
			want: "record holder C"},
		{name: "sticky, ready, the replacement has not started: its Reserve claims, the pass records nothing", c: sticky,
			s: slotIn(sticky, "pg-2", model.StateReady, "", 0),
			snap: snapshot(pgA, func() model.Alloc {
				b := alloc("B", 20, "pending", "run", "pg", "pg-2")
				b.PreviousAllocation = "A"
				return b
			}())},
		{name: "an idle orphan goes", c: scratch, s: func() model.Slot { s := ready; s.Orphan = true; return s }(), snap: snapshot(),
			want: "release  retired"},
		{name: "an orphan an allocation is placed on stays, held by it", c: scratch, s: func() model.Slot { s := ready; s.Orphan = true; return s }(),
			snap: snapshot(b("pending", "run")), want: "record holder B"},
		{name: "ready with a release's leftovers: tidy", c: scratch,
			s: func() model.Slot { s := ready; s.Info = withUser(map[string]string{model.PropHolder: "A"}); return s }(), snap: snapshot(),
			want: "tidy"},
		{name: "ready, clean, its class rolls back and it has no pristine snapshot: take it", c: rollback, s: ready,
			snap: snapshot(), want: "take pristine snapshot"},
		{name: "ready, its class rolls back, no pristine snapshot, but an allocation is placed on it: leave it", c: rollback, s: ready,
			snap: snapshot(b("pending", "run")), want: "record holder B"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, ok := model.PlanSlot(tc.c, tc.s, tc.snap)
			got := ""
			if ok {
				got = strings.TrimSpace(st.Kind.String() + " " + st.Alloc.ID + " " + st.Outcome)
			}
			if got != tc.want {
				t.Errorf("PlanSlot = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDecideReserve(t *testing.T) {
	scratch := model.Class{Name: "scratch", Slots: 1}
	sticky := model.Class{Name: "pg", Slots: 2, Sticky: true}
	on := func(id string, index uint64, client, desired string) model.Alloc {
		return alloc(id, index, client, desired, "scratch", "scratch-1")
	}
	held := slotIn(scratch, "scratch-1", model.StateHeld, "A", 10)
	ready := slotIn(scratch, "scratch-1", model.StateReady, "", 10)
	pgA := alloc("A", 10, "complete", "stop", "pg", "pg-1")
	pgA.NextAllocation = "B"
	pgB := alloc("B", 20, "pending", "run", "pg", "pg-1")
	pgB.PreviousAllocation = "A"

	cases := []struct {
		name  string
		c     model.Class
		s     model.Slot
		snap  *model.Snapshot
		fresh bool
		want  model.ReserveKind
		alloc string // the decision's allocation
		says  string // part of the reason
	}{
		{name: "a release under way goes first, whatever the answer", c: scratch,
			s: slotIn(scratch, "scratch-1", model.StateReleasing, "A", 10), snap: nil, want: model.ReserveReleaseFirst, alloc: "A"},
		{name: "a stale answer: fetch a fresh one", c: scratch, s: ready, snap: snapshot(on("B", 20, "pending", "run")),
			want: model.ReserveRefresh},
		{name: "held, holder gone from the list: look it up", c: scratch, s: held, snap: snapshot(), fresh: true,
			want: model.ReserveCheckGone, alloc: "A"},
		{name: "held, holder lost: ask the local client", c: scratch, s: held, snap: snapshot(on("A", 10, "lost", "stop")), fresh: true,
			want: model.ReserveCheckLost, alloc: "A"},
		{name: "held, holder ended: release its data first", c: scratch, s: held,
			snap: snapshot(on("A", 10, "complete", "stop"), on("B", 20, "pending", "run")), fresh: true, want: model.ReserveReleaseFirst, alloc: "A"},
		{name: "sticky, holder ended, caller replaces it on this slot: inherits", c: sticky,
			s: slotIn(sticky, "pg-1", model.StateHeld, "A", 10), snap: snapshot(pgA, pgB), fresh: true, want: model.ReserveInherit, alloc: "B"},
		{name: "held, holder running and nobody else: its own task starting", c: scratch, s: held,
			snap: snapshot(on("A", 10, "running", "run")), fresh: true, want: model.ReserveGrant},
		{name: "held, holder stopping and nobody else: the caller is hidden", c: scratch, s: held,
			snap: snapshot(on("A", 10, "running", "stop")), fresh: true, want: model.ReserveFail, alloc: "A", says: "read-job"},
		{name: "held, holder stopping, a newer one asks: wait for it", c: scratch, s: held,
			snap: snapshot(on("A", 10, "running", "stop"), on("B", 20, "pending", "run")), fresh: true, want: model.ReserveWait, alloc: "A"},
		{name: "held, holder running and not stopping, another asks: refuse to share", c: scratch, s: held,
			snap: snapshot(on("A", 10, "running", "run"), on("B", 20, "pending", "run")), fresh: true, want: model.ReserveFail, alloc: "A", says: "refusing to share"},
		{name: "ready, one live caller: grant, recording it", c: scratch, s: ready,
			snap: snapshot(on("B", 20, "pending", "run")), fresh: true, want: model.ReserveGrant, alloc: "B"},
		{name: "ready, the only one naming it is stopping: the caller is hidden", c: scratch, s: ready,
			snap: snapshot(on("B", 20, "running", "stop")), fresh: true, want: model.ReserveFail, says: "read-job"},
		{name: "ready, an ended one's data, the caller pending: release it first", c: scratch, s: ready,
			snap: snapshot(on("B", 20, "complete", "stop"), on("C", 30, "pending", "run")), fresh: true, want: model.ReserveReleaseFirst, alloc: "B"},
		{name: "ready, an ended one's data and one already running on it: refuse", c: scratch, s: ready,
			snap: snapshot(on("B", 20, "complete", "stop"), on("C", 30, "running", "run")), fresh: true, want: model.ReserveFail, says: "refusing to wipe or share"},
		{name: "ready, a lost one's data: ask the local client", c: scratch, s: ready,
			snap: snapshot(on("B", 20, "lost", "stop"), on("C", 30, "pending", "run")), fresh: true, want: model.ReserveCheckLost, alloc: "B"},
		{name: "ready, two live, the older stopping: wait for it", c: scratch, s: ready,
			snap: snapshot(on("B", 20, "running", "stop"), on("C", 30, "pending", "run")), fresh: true, want: model.ReserveWait, alloc: "B"},
		{name: "ready, two live, neither stopping: refuse to share", c: scratch, s: ready,
			snap: snapshot(on("B", 20, "running", "run"), on("C", 30, "pending", "run")), fresh: true, want: model.ReserveFail, says: "neither is stopping"},
		{name: "ready, nobody names it: the caller is hidden", c: scratch, s: ready, snap: snapshot(), fresh: true,
			want: model.ReserveFail, says: "read-job"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := model.DecideReserve(tc.c, tc.s, tc.snap, tc.fresh)
			if d.Kind != tc.want || d.Alloc.ID != tc.alloc || !strings.Contains(d.Reason, tc.says) {
				t.Errorf("DecideReserve = kind %d alloc %q reason %q; want kind %d alloc %q reason with %q",
					d.Kind, d.Alloc.ID, d.Reason, tc.want, tc.alloc, tc.says)
			}
		})
	}
}
