package model

import (
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// TestDecideInheritTakeover: B's Reserve, the replacement of A lost with
// its node, in a class that keeps replicas, with no copy from A's node
// here: claim the newest replica only once DecideTakeover says A has
// stopped, and only this node's; wait otherwise, and follow on_timeout
// once migrate.timeout has passed.
func TestDecideInheritTakeover(t *testing.T) {
	lostAt := time.Unix(1_800_000_000, 0)
	class := Class{Name: "pg", Sticky: true, StickyWait: time.Hour,
		Migrate:   Migrate{Enabled: true, Timeout: 10 * time.Minute, OnTimeout: MigrateFail},
		Replicate: Replicate{Copies: 2, Every: time.Minute}}
	startEmpty := class
	startEmpty.Migrate.OnTimeout = MigrateStartEmpty
	prev := Alloc{ID: "A", NodeID: "node-1", ClientStatus: ClientLost}
	caller := Alloc{ID: "B", NodeID: "node-2", PreviousAllocation: "A"}
	lost := LostAlloc{ID: "A", ClientStatus: ClientLost, LostAt: lostAt, StopAfter: time.Minute, KillTimeout: 10 * time.Second}
	at, _ := TakeoverAt(lost)
	unknown := lost
	unknown.ClientStatus, unknown.LostAt = ClientUnknown, time.Time{}
	noStop := lost
	noStop.StopAfter = 0
	name := "tank/nomad/pg/replica-A-pg-1"
	copyOf := func(node string, newest int, ago time.Duration) ReplicaCopy {
		return ReplicaCopy{Node: node, Local: node == "node-2", Replica: Replica{Dataset: name, Source: "A", Slot: "pg-1",
			Newest: newest, NewestAt: lostAt.Add(-ago)}}
	}
	local2, local3, remote3, remote4 := copyOf("node-2", 2, 2*time.Minute), copyOf("node-2", 3, time.Minute),
		copyOf("node-3", 3, time.Minute), copyOf("node-3", 4, 10*time.Second)
	firstReceive := copyOf("node-2", 0, 0)
	claiming := copyOf("node-2", 0, 0)
	claiming.Replica.Info = zfs.Dataset{Name: name, User: zfs.UserPropsOf(map[string]string{PropRetainAs: "tank/nomad/pg/parked-A-pg-1"})}
	cases := []struct {
		name   string
		class  Class
		loss   LostAlloc
		copies []ReplicaCopy
		now    time.Time
		waited time.Duration
		parked *Retained
		want   InheritKind
		take   string // the replica taken over, for InheritTakeover
		why    string // in the reason
		unsure string // TakeoverInput.Unsure
	}{
		{name: "A lost and its takeover time passed: claim the local replica", loss: lost, copies: []ReplicaCopy{local3},
			now: at, want: InheritTakeover, take: name},
		{name: "two local readings: the newest", loss: lost, copies: []ReplicaCopy{local2, local3}, now: at.Add(time.Hour),
			want: InheritTakeover, take: name},
		{name: "a local replica this node cannot tell is the newest: wait", loss: lost, copies: []ReplicaCopy{local3},
			now: at, unsure: "the class keeps 2 copies", want: InheritWait, why: "is not claimed: the class keeps 2 copies"},
		{name: "a second before the takeover time: wait", loss: lost, copies: []ReplicaCopy{local3}, now: at.Add(-time.Second),
			want: InheritWait, why: "may be claimed from"},
		{name: "before the takeover time, past migrate.timeout: on_timeout fails the start, no claim", loss: lost,
			copies: []ReplicaCopy{local3}, now: at.Add(-time.Second), waited: 10 * time.Minute, want: InheritFail},
		{name: "A only disconnected (unknown): wait, never claim", loss: unknown, copies: []ReplicaCopy{local3},
			now: at.Add(time.Hour), want: InheritWait, why: "unknown"},
		{name: "A unknown past migrate.timeout, start_empty: start empty, the replica kept", class: startEmpty, loss: unknown,
			copies: []ReplicaCopy{local3}, now: at.Add(time.Hour), waited: time.Hour, want: InheritNone},
		{name: "A lost, nothing stops it (no stop_after_client_disconnect): wait, never claim", loss: noStop,
			copies: []ReplicaCopy{local3}, now: at.Add(time.Hour), want: InheritWait, why: "stop_after_client_disconnect"},
		{name: "no replica anywhere: wait for a copy", loss: lost, now: at, want: InheritWait, why: "no node holds a replica"},
		{name: "no replica anywhere past migrate.timeout: on_timeout (fail)", loss: lost, now: at, waited: 10 * time.Minute,
			want: InheritFail},
		{name: "no replica anywhere past migrate.timeout: on_timeout (start_empty)", class: startEmpty, loss: lost, now: at,
			waited: 10 * time.Minute, want: InheritNone},
		{name: "a first receive not finished holds nothing to claim", loss: lost, copies: []ReplicaCopy{firstReceive}, now: at,
			want: InheritWait, why: "no node holds a replica"},
		{name: "the local replica older than another node's: wait for the newest, not claimed", loss: lost,
			copies: []ReplicaCopy{local3, remote4}, now: at, want: InheritWait, why: "(@replica-4) is on node node-3"},
		{name: "another node's newer replica read first: still not this node's older one", loss: lost,
			copies: []ReplicaCopy{remote4, local3}, now: at, want: InheritWait, why: "(@replica-4) is on node node-3"},
		{name: "as new as another node's: the local one", loss: lost, copies: []ReplicaCopy{remote3, local3}, now: at,
			want: InheritTakeover, take: name},
		{name: "a takeover a crash interrupted (its snapshots dropped): finished first", loss: lost,
			copies: []ReplicaCopy{claiming, remote4}, now: at, want: InheritTakeover, take: name},
		{name: "A runs (a drain): the copy from its node awaited as ever", loss: LostAlloc{ID: "A", ClientStatus: ClientRunning},
			copies: []ReplicaCopy{local3}, now: at, want: InheritWait, why: "no copy has arrived yet"},
		{name: "A stopped as lost, ended by its node back (finding (c)): its final data awaited, the replica not claimed",
			loss:   func() LostAlloc { l := lost; l.ClientStatus, l.LostByServers = ClientComplete, true; return l }(),
			copies: []ReplicaCopy{local3}, now: at.Add(time.Hour), want: InheritWait, why: "no copy has arrived yet"},
		{name: "A stopped as lost, ended by its node back, past migrate.timeout: on_timeout, the replica not claimed",
			loss:   func() LostAlloc { l := lost; l.ClientStatus, l.LostByServers = ClientComplete, true; return l }(),
			copies: []ReplicaCopy{local3}, now: at.Add(time.Hour), waited: 10 * time.Minute, want: InheritFail},
		{name: "a copy from A's node arrived: claimed as ever, no takeover", loss: lost, copies: []ReplicaCopy{local3}, now: at,
			parked: &Retained{Dataset: "tank/nomad/pg/parked-A-pg-1", State: StateParked, Holder: "A", Outcome: OutcomeMigrated},
			want:   InheritClaim},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.class
			if c.Name == "" {
				c = class
			}
			d := DecideInherit(InheritInput{Class: c, Slot: Slot{ID: "pg-2"}, Caller: caller, Prev: prev, Parked: tc.parked,
				NodeID: "node-2", Waited: tc.waited, Takeover: &TakeoverInput{Loss: tc.loss, Copies: tc.copies, Now: tc.now, Unsure: tc.unsure}})
			if d.Kind != tc.want {
				t.Fatalf("DecideInherit = %v (%s), want %v", d.Kind, d.Reason, tc.want)
			}
			if !strings.Contains(d.Reason, tc.why) {
				t.Errorf("reason %q does not say %q", d.Reason, tc.why)
			}
			if tc.want != InheritTakeover {
				if d.Plan != nil {
					t.Errorf("a plan without a takeover: %+v", d.Plan)
				}
				return
			}
			if d.Plan == nil || len(d.Plan.Ops) < 3 || d.Plan.Ops[0].Name != tc.take {
				t.Fatalf("plan %+v, want the takeover of %s", d.Plan, tc.take)
			}
		})
	}
}

// TestNewestCopy: the copy a takeover claims is the newest, whatever the
// order they are read in; a takeover begun first.
func TestNewestCopy(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	c := func(node string, newest int, when time.Time) ReplicaCopy {
		return ReplicaCopy{Node: node, Local: node == "here", Replica: Replica{Dataset: node, Newest: newest, NewestAt: when}}
	}
	cases := []struct {
		name   string
		copies []ReplicaCopy
		want   string
	}{
		{name: "none"},
		{name: "only a first receive", copies: []ReplicaCopy{c("here", 0, time.Time{})}},
		{name: "the highest snapshot", copies: []ReplicaCopy{c("n1", 3, at), c("here", 5, at), c("n2", 4, at)}, want: "here"},
		{name: "a newer one elsewhere, read before this node's", copies: []ReplicaCopy{c("n2", 4, at), c("here", 3, at.Add(time.Hour))},
			want: "n2"},
		{name: "the highest snapshot, last", copies: []ReplicaCopy{c("here", 3, at), c("n2", 4, at.Add(-time.Hour))}, want: "n2"},
		{name: "a tie: the later snapshot time", copies: []ReplicaCopy{c("n1", 4, at), c("n2", 4, at.Add(time.Second))}, want: "n2"},
		{name: "a tie in both: this node's", copies: []ReplicaCopy{c("n1", 4, at), c("here", 4, at)}, want: "here"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := NewestCopy(tc.copies)
			if ok != (tc.want != "") || got.Replica.Dataset != tc.want {
				t.Errorf("NewestCopy = %q (%v), want %q", got.Replica.Dataset, ok, tc.want)
			}
		})
	}
}

// TestReserveMoveTakeover: the Reserve's loop acts on a takeover with the
// plan DecideInherit made, on the replica, under the parked name's lock
// too; and the next reading of the slot (ready still) reads the
// predecessor's data again, which is then parked data to claim.
func TestReserveMoveTakeover(t *testing.T) {
	lostAt := time.Unix(1_800_000_000, 0)
	class := Class{Name: "pg", Slots: 2, Sticky: true, StickyWait: time.Hour,
		Migrate:   Migrate{Enabled: true, Timeout: 10 * time.Minute, OnTimeout: MigrateFail},
		Replicate: Replicate{Copies: 1, Every: time.Minute}}
	prev := Alloc{ID: "A", NodeID: "node-1", ClientStatus: ClientLost}
	caller := Alloc{ID: "B", NodeID: "node-2", PreviousAllocation: "A", DesiredStatus: DesiredRun, ClientStatus: ClientPending,
		Devices: []Device{{Task: "t", Vendor: Vendor, Type: DeviceType, Name: "pg", IDs: []string{"pg-2"}}}}
	slot := Slot{ID: "pg-2", Class: "pg", Dataset: "tank/nomad/pg/pg-2", Exists: true, Healthy: true, State: StateReady}
	loss := LostAlloc{ID: "A", ClientStatus: ClientLost, LostAt: lostAt, StopAfter: time.Minute}
	at, _ := TakeoverAt(loss)
	replica := ReplicaCopy{Local: true, Replica: Replica{Dataset: "tank/nomad/pg/replica-A-pg-1", Source: "A", Slot: "pg-1", Newest: 2}}
	in := ReserveLoop{Class: class, Slot: slot, Snap: &Snapshot{NodeID: "node-2", Allocs: []Alloc{caller}}, Nomad: true,
		Pace: time.Second, Since: Since{Read: true, Asked: true},
		Last: Result{Step: Move{Kind: MoveReadPrev, Alloc: caller}, Inherit: &InheritInput{Class: class, Slot: slot, Caller: caller,
			Prev: prev, NodeID: "node-2", Takeover: &TakeoverInput{Loss: loss, Copies: []ReplicaCopy{replica}, Now: at}}}}
	mv := DecideReserveMove(in)
	if mv.Kind != MoveRun || mv.Act != ActTakeover || mv.Dataset != replica.Replica.Dataset || mv.Plan == nil ||
		mv.Parked == nil || mv.Parked.Dataset != "tank/nomad/pg/parked-A-pg-1" {
		t.Fatalf("after the reading: %v %v %s %+v, want the takeover of the replica into parked-A-pg-1", mv.Kind, mv.Act, mv.Dataset, mv.Parked)
	}
	in.Last, in.Since = Result{Step: mv}, in.Since.After(mv, nil)
	if next := DecideReserveMove(in); next.Kind != MoveReadPrev || next.Alloc.ID != "B" {
		t.Errorf("after the takeover: %v, want B's predecessor's data read again", next.Kind)
	}
	in.Last = Result{Step: Move{Kind: MoveReadPrev, Alloc: caller}, Inherit: &InheritInput{Class: class, Slot: slot, Caller: caller,
		Prev: prev, NodeID: "node-2", Takeover: &TakeoverInput{Loss: loss, Copies: []ReplicaCopy{replica}, Now: at.Add(-time.Second)}}}
	if mv := DecideReserveMove(in); mv.Kind != MoveWait || mv.Awaits != AwaitsData {
		t.Errorf("before the takeover time: %v (%s), want a wait for the data", mv.Kind, mv.Reason)
	}
}
