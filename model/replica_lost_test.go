package model

import (
	"testing"
	"time"
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
