package model_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

func TestReplicaNames(t *testing.T) {
	cfg := &model.Config{Parent: "tank/nomad", Classes: []model.Class{{Name: "pg", Slots: 2}}}
	const a = "aaaaaaaa-0000-0000-0000-000000000001"
	if got, want := cfg.ReplicaName("pg", a, "pg-2"), "tank/nomad/pg/replica-"+a+"-pg-2"; got != want {
		t.Errorf("ReplicaName: %s, want %s", got, want)
	}
	// A replica's name is never a slot's, nor parked data's.
	if _, ok := model.SlotNumber("pg", "replica-"+a+"-pg-2"); ok {
		t.Error("a replica's name reads as a slot")
	}
	if cfg.ReplicaName("pg", a, "pg-2") == cfg.ParkedName("pg", a, "pg-2") {
		t.Error("a replica and parked data of one slot share a name")
	}
	tests := []struct {
		name  string
		short string
		n     int
		ok    bool
	}{
		{name: "the first", short: "replica-1", n: 1, ok: true},
		{name: "a later one", short: "replica-42", n: 42, ok: true},
		{name: "zero is none", short: "replica-0"},
		{name: "a leading zero is another name", short: "replica-07"},
		{name: "no number", short: "replica-"},
		{name: "a migration's", short: "migrate-1"},
		{name: "a sign", short: "replica-+1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, ok := model.ReplicaNumber(tc.short)
			if n != tc.n || ok != tc.ok {
				t.Errorf("ReplicaNumber(%q) = %d, %v; want %d, %v", tc.short, n, ok, tc.n, tc.ok)
			}
			if ok && model.ReplicaSnapshot(n) != tc.short {
				t.Errorf("ReplicaSnapshot(%d) = %s", n, model.ReplicaSnapshot(n))
			}
		})
	}
}

func TestReplicaProps(t *testing.T) {
	c := model.Class{Name: "pg", Properties: map[string]string{"quota": "10G", "encryption": "on", "compression": "zstd"}}
	now := time.Unix(1_800_000_000, 0)
	name := "tank/nomad/pg/replica-a-pg-1"
	got := model.ReplicaProps(c, name, model.Alloc{ID: "a", NodeID: "node-1", Namespace: "default", JobID: "pg", TaskGroup: "db"}, "pg-1", now)
	want := map[string]string{
		model.PropOwner: name, model.PropState: "replica", model.PropHolder: "a", model.PropSince: "1800000000",
		model.PropReplicaNode: "node-1", model.PropReplicaSlot: "pg-1", model.PropReplicaGroup: "default/pg/db", "canmount": "noauto",
		"quota": "10G", "compression": "zstd", // encryption: only a create sets it
	}
	if len(got) != len(want) {
		t.Errorf("props %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	// Every property of the plugin's that the receive does not set is
	// excluded from the stream: a sender plants none.
	for _, p := range model.ReceiveExclude(got) {
		if _, set := got[p]; set {
			t.Errorf("%s both set and excluded", p)
		}
	}
}

func TestDecideReplica(t *testing.T) {
	now := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	cfg := model.Replicate{Copies: 1, Every: time.Minute}
	r := model.Replica{Dataset: "tank/nomad/pg/replica-a-pg-1", Source: "a", Node: "n1", Slot: "pg-1", Newest: 3,
		NewestAt: now.Add(-40 * time.Second)}
	running := model.Alloc{ID: "a", ClientStatus: model.ClientRunning, DesiredStatus: model.DesiredRun}
	in := func(a model.Alloc, f func(*model.ReplicaInput)) model.ReplicaInput {
		i := model.ReplicaInput{Replica: cfg, StickyWait: time.Hour, Source: a, Found: true, Chosen: true, Now: now}
		if f != nil {
			f(&i)
		}
		return i
	}
	ended := func(status, next string, at time.Time) model.Alloc {
		return model.Alloc{ID: "a", ClientStatus: status, DesiredStatus: model.DesiredStop, NextAllocation: next, ModifyTime: at}
	}
	tests := []struct {
		name    string
		replica model.Replica
		in      model.ReplicaInput
		fate    model.ReplicaFate
		at      time.Time
		why     string
	}{
		{name: "running, chosen: the next pull is due every minute from the newest snapshot", replica: r, in: in(running, nil),
			fate: model.ReplicaPull, at: now.Add(20 * time.Second)},
		{name: "running, chosen, nothing received yet: pull now", replica: model.Replica{Source: "a"}, in: in(running, nil),
			fate: model.ReplicaPull, at: now},
		{name: "running, no longer chosen, none newer elsewhere: keep, pull no more", replica: r,
			in: in(running, func(i *model.ReplicaInput) { i.Chosen = false }), fate: model.ReplicaKeep, why: "until one of them"},
		{name: "running, no longer chosen, a chosen node holds one as new: drop", replica: r,
			in:   in(running, func(i *model.ReplicaInput) { i.Chosen, i.NewerElsewhere = false, true }),
			fate: model.ReplicaDrop, why: "holds a copy as new"},
		{name: "unknown (its node disconnected): keep, pull nothing", replica: r,
			in:   in(model.Alloc{ID: "a", ClientStatus: model.ClientUnknown, DesiredStatus: model.DesiredRun}, nil),
			fate: model.ReplicaKeep, why: "is unknown"},
		{name: "stopping (desired stop, still running): keep", replica: r,
			in:   in(model.Alloc{ID: "a", ClientStatus: model.ClientRunning, DesiredStatus: model.DesiredStop}, nil),
			fate: model.ReplicaKeep},
		{name: "lost, replaced: kept for sticky_wait from the takeover time", replica: r,
			in: in(ended(model.ClientLost, "b", now.Add(-2*time.Minute)), func(i *model.ReplicaInput) {
				i.Takeover = model.Takeover{Verdict: model.TakeoverClaim, Until: now.Add(-time.Minute)}
			}), fate: model.ReplicaKeep, at: now.Add(59 * time.Minute), why: "sticky_wait"},
		{name: "lost, still waiting for its takeover time: kept past it", replica: r,
			in: in(ended(model.ClientLost, "b", now), func(i *model.ReplicaInput) {
				i.Takeover = model.Takeover{Verdict: model.TakeoverWait, Until: now.Add(2 * time.Minute)}
			}), fate: model.ReplicaKeep, at: now.Add(62 * time.Minute)},
		{name: "lost, no replacement yet (Nomad delays it): kept", replica: r,
			in: in(ended(model.ClientLost, "", now.Add(-time.Minute)), nil), fate: model.ReplicaKeep, at: now.Add(59 * time.Minute)},
		{name: "lost, sticky_wait over: drop", replica: r,
			in: in(ended(model.ClientLost, "b", now.Add(-2*time.Hour)), func(i *model.ReplicaInput) {
				i.Takeover = model.Takeover{Verdict: model.TakeoverClaim, Until: now.Add(-time.Hour - time.Second)}
			}), fate: model.ReplicaDrop, why: "no replacement claimed"},
		{name: "failed, may be rescheduled: kept for sticky_wait", replica: r,
			in: in(ended(model.ClientFailed, "", now.Add(-time.Minute)), nil), fate: model.ReplicaKeep, at: now.Add(59 * time.Minute)},
		{name: "complete, replaced (moved on purpose): kept for sticky_wait", replica: r,
			in: in(ended(model.ClientComplete, "b", now.Add(-time.Minute)), nil), fate: model.ReplicaKeep, at: now.Add(59 * time.Minute)},
		{name: "complete, nothing replaces it: drop at once (its node releases the data)", replica: r,
			in: in(ended(model.ClientComplete, "", now), nil), fate: model.ReplicaDrop, why: "nothing replaces it"},
		{name: "stopped as lost, complete on its node back, nothing named (Nomad 1.6.2): kept for sticky_wait", replica: r,
			in: in(func() model.Alloc {
				a := ended(model.ClientComplete, "", now.Add(-time.Minute))
				a.LostByServers = true
				return a
			}(), nil),
			fate: model.ReplicaKeep, at: now.Add(59 * time.Minute)},
		{name: "Nomad no longer knows it: drop", replica: r,
			in: in(running, func(i *model.ReplicaInput) { i.Found = false }), fate: model.ReplicaDrop, why: "no longer knows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := model.DecideReplica(tc.replica, tc.in)
			if got.Fate != tc.fate {
				t.Fatalf("fate %s, want %s (%s)", got.Fate, tc.fate, got.Why)
			}
			if !got.At.Equal(tc.at) {
				t.Errorf("at %s, want %s", got.At, tc.at)
			}
			if got.Why == "" || !strings.Contains(got.Why, tc.why) {
				t.Errorf("why %q, want it to say %q", got.Why, tc.why)
			}
		})
	}
}

func TestReplicasAttr(t *testing.T) {
	r := func(group string) model.Replica { return model.Replica{Group: group} }
	tests := []struct {
		name string
		in   []model.Replica
		want string
	}{
		{name: "none", want: ""},
		{name: "one", in: []model.Replica{r("default/pg/db")}, want: "default/pg/db"},
		{name: "sorted, each group once (two slots, or two allocations of a group)",
			in: []model.Replica{r("prod/web/cache"), r("default/pg/db"), r("default/pg/db")}, want: "default/pg/db,prod/web/cache"},
		{name: "a group with a comma in its name is left out", in: []model.Replica{r("default/a,b/db"), r("default/pg/db")},
			want: "default/pg/db"},
		{name: "a replica without its group mark is left out", in: []model.Replica{r(""), r("default/pg/db")}, want: "default/pg/db"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := model.ReplicasAttr(tc.in); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
