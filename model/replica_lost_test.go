package model

import (
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

func TestLostPredecessor(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	caller := Alloc{ID: "b", Namespace: "default", JobID: "pg", TaskGroup: "db", Name: "pg.db[0]"}
	lost := func(id string, mod func(*LostAlloc)) LostAlloc {
		l := LostAlloc{ID: id, Namespace: "default", JobID: "pg", TaskGroup: "db", Name: "pg.db[0]", ClientStatus: ClientLost,
			LostAt: at, StopAfter: time.Minute}
		if mod != nil {
			mod(&l)
		}
		return l
	}
	tests := []struct {
		name   string
		caller Alloc
		lost   []LostAlloc
		want   string
	}{
		{name: "the lost allocation of its job, group and name", caller: caller, lost: []LostAlloc{lost("a", nil)}, want: "a"},
		{name: "a caller that names its predecessor: Nomad's link stands", caller: func() Alloc { c := caller; c.PreviousAllocation = "x"; return c }(),
			lost: []LostAlloc{lost("a", nil)}},
		{name: "a caller without a name", caller: func() Alloc { c := caller; c.Name = ""; return c }(), lost: []LostAlloc{lost("a", nil)}},
		{name: "another index of the group", caller: caller, lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.Name = "pg.db[1]" })}},
		{name: "another job", caller: caller, lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.JobID = "web" })}},
		{name: "another namespace", caller: caller, lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.Namespace = "ops" })}},
		{name: "another group", caller: caller, lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.TaskGroup = "cache" })}},
		{name: "not lost: running", caller: caller, lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.ClientStatus = ClientRunning })}},
		{name: "not lost: unknown", caller: caller, lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.ClientStatus = ClientUnknown })}},
		{name: "no stop_after_client_disconnect: Nomad links such a replacement itself", caller: caller,
			lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.StopAfter = 0 })}},
		{name: "max_client_disconnect", caller: caller, lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.MaxClientDisconnect = true })}},
		{name: "itself", caller: caller, lost: []LostAlloc{lost("b", nil)}},
		{name: "the one lost last of two", caller: caller,
			lost: []LostAlloc{lost("a2", func(l *LostAlloc) { l.LostAt = at.Add(time.Hour) }), lost("a1", nil)}, want: "a2"},
		{name: "the one lost last of two, by their ModifyTime where Nomad 1.6.2 kept no AllocStates", caller: caller,
			lost: []LostAlloc{
				lost("a1", func(l *LostAlloc) { l.LostAt, l.ModifiedAt = time.Time{}, at.Add(time.Hour) }),
				lost("a2", func(l *LostAlloc) { l.LostAt, l.ModifiedAt = time.Time{}, at }),
			}, want: "a1"},
		{name: "stopped as lost by the servers, then complete: its node came back and ended it", caller: caller,
			lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.ClientStatus, l.LostByServers = ClientComplete, true })}, want: "a"},
		{name: "stopped as lost by the servers, then failed on its node back", caller: caller,
			lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.ClientStatus, l.LostByServers = ClientFailed, true })}, want: "a"},
		{name: "complete, not stopped as lost: an allocation that ended, which Nomad would have linked", caller: caller,
			lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.ClientStatus = ClientComplete })}},
		{name: "stopped as lost by the servers, running again: not ended", caller: caller,
			lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.ClientStatus, l.LostByServers = ClientRunning, true })}},
		{name: "stopped as lost and complete, of another name", caller: caller,
			lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.ClientStatus, l.LostByServers, l.Name = ClientComplete, true, "pg.db[1]" })}},
		{name: "stopped as lost and complete, its group without stop_after_client_disconnect", caller: caller,
			lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.ClientStatus, l.LostByServers, l.StopAfter = ClientComplete, true, 0 })}},
		{name: "created after the caller", caller: func() Alloc { c := caller; c.CreateIndex = 10; return c }(),
			lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.CreateIndex = 11 })}},
		{name: "created before the caller", caller: func() Alloc { c := caller; c.CreateIndex = 10; return c }(),
			lost: []LostAlloc{lost("a", func(l *LostAlloc) { l.CreateIndex = 9 })}, want: "a"},
		{name: "the newest of two: a replacement lost in its turn, though its predecessor's node reported later", caller: caller,
			lost: []LostAlloc{
				lost("a1", func(l *LostAlloc) {
					l.CreateIndex, l.ClientStatus, l.LostByServers = 5, ClientComplete, true
					l.LostAt, l.ModifiedAt = time.Time{}, at.Add(2*time.Hour)
				}),
				lost("a2", func(l *LostAlloc) { l.CreateIndex = 8 }),
			}, want: "a2"},
		{name: "the same time of loss: the higher ID, whatever the order", caller: caller,
			lost: []LostAlloc{lost("a2", nil), lost("a1", nil)}, want: "a2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := LostPredecessor(tc.caller, tc.lost)
			if ok != (tc.want != "") || got.ID != tc.want {
				t.Fatalf("LostPredecessor = %q, %v; want %q", got.ID, ok, tc.want)
			}
		})
	}
}

// TestLocalReplicaWithADatasetBelow: a replica a replication stream
// brought a dataset below (the pull refused it, left for the operator) is
// no replica to take over (sim seed 9710347: taken over, it was parked
// data with a stranger below, X10).
func TestLocalReplicaWithADatasetBelow(t *testing.T) {
	const cls, name = "tank/nomad/pg", "tank/nomad/pg/replica-a-pg-1"
	own := func(ds string) zfs.Dataset {
		d := zfs.Dataset{Name: ds, Type: "filesystem", User: zfs.UserPropsOf(map[string]string{PropOwner: ds, PropState: string(StateReplica), PropHolder: "a"})}
		return d
	}
	snap := zfs.Dataset{Name: name + "@replica-1", Type: "snapshot"}
	for _, tc := range []struct {
		name string
		rows []zfs.Dataset
		ok   bool
	}{
		{name: "a replica", rows: []zfs.Dataset{own(name), snap}, ok: true},
		{name: "a dataset below it", rows: []zfs.Dataset{own(name), snap, {Name: name + "/from-a-peer", Type: "filesystem"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := LocalReplica(cls, name, tc.rows); ok != tc.ok {
				t.Fatalf("LocalReplica ok = %v, want %v", ok, tc.ok)
			}
		})
	}
}

// TestPlanTakeReplicaAbortsAPartialReceive: a replica whose last pull was
// cut mid-stream (a resume token) has its partial receive abandoned
// before the takeover's mark and rename (sim seed 9710166: the slot it
// became carried the partial receive for good, X4).
func TestPlanTakeReplicaAbortsAPartialReceive(t *testing.T) {
	const name = "tank/nomad/pg/replica-a-pg-1"
	for _, tc := range []struct {
		name, token string
		abort       bool
	}{
		{name: "no partial receive"},
		{name: "a partial receive", token: "1-abc-def", abort: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ReplicaCopy{Local: true, Replica: Replica{Dataset: name, Source: "a", Slot: "pg-1", Newest: 2,
				Info: zfs.Dataset{Name: name, ResumeToken: tc.token}}, Snapshots: []string{name + "@replica-2"}}
			p := PlanTakeReplica(Class{Name: "pg", StickyWait: time.Minute}, Alloc{ID: "a"}, r, time.Unix(1_800_000_000, 0))
			first := p.Ops[0].Command
			if got := first.Verb == zfs.VerbReceiveAbort && first.Name == name; got != tc.abort {
				t.Fatalf("first op %+v; want the partial receive abandoned first: %v", first, tc.abort)
			}
		})
	}
}

// TestLinked: the links this node's Reserves found name the predecessor of
// a replacement that names none, in a copy of the snapshot; a link Nomad
// made itself stands, and the snapshot read is left as it was.
func TestLinked(t *testing.T) {
	snap := &Snapshot{NodeID: "n2", Allocs: []Alloc{{ID: "b"}, {ID: "c", PreviousAllocation: "x"}, {ID: "d"}}}
	tests := []struct {
		name  string
		links map[string]string
		want  map[string]string // ID → PreviousAllocation in the answer
	}{
		{name: "no links: the snapshot itself", want: map[string]string{"b": "", "c": "x", "d": ""}},
		{name: "an unlinked replacement names its predecessor", links: map[string]string{"b": "a"},
			want: map[string]string{"b": "a", "c": "x", "d": ""}},
		{name: "Nomad's own link stands", links: map[string]string{"c": "a"}, want: map[string]string{"b": "", "c": "x", "d": ""}},
		{name: "a link of an allocation not listed changes nothing", links: map[string]string{"z": "a"},
			want: map[string]string{"b": "", "c": "x", "d": ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Linked(snap, tc.links)
			for _, a := range got.Allocs {
				if a.PreviousAllocation != tc.want[a.ID] {
					t.Errorf("%s names %q, want %q", a.ID, a.PreviousAllocation, tc.want[a.ID])
				}
			}
			if snap.Allocs[0].PreviousAllocation != "" {
				t.Fatal("Linked changed the snapshot it read")
			}
		})
	}
	if Linked(nil, map[string]string{"b": "a"}) != nil {
		t.Error("Linked of no snapshot is not nil")
	}
}
