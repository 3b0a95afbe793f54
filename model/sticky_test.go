package model

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

func stickyAlloc(id, client, desired, prev, next, slot string) Alloc {
	return Alloc{ID: id, NodeID: "node", ClientStatus: client, DesiredStatus: desired,
		PreviousAllocation: prev, NextAllocation: next,
		Devices: []Device{{Task: "t", Vendor: Vendor, Type: DeviceType, Name: "pg", IDs: []string{slot}}}}
}

func TestParks(t *testing.T) {
	sticky := Class{Name: "pg", Sticky: true}
	held := Slot{ID: "pg-1"} // A's, as the holder names it
	migrating := sticky
	migrating.Migrate = Migrate{Enabled: true, Timeout: time.Minute, OnTimeout: MigrateFail}
	replicating := migrating
	replicating.Replicate = Replicate{Copies: 1, Every: time.Minute}
	replicatingHere := replicating
	replicatingHere.Migrate = Migrate{}
	// A, stopped as lost by the servers, ended by its node back (complete),
	// its replacement placed without a link (Nomad 1.6.2).
	lostByServers := stickyAlloc("A", "complete", "stop", "", "", "pg-1")
	lostByServers.LostByServers = true
	cases := []struct {
		name    string
		class   Class
		slot    Slot
		holder  Alloc
		outcome string
		named   []Slot
		want    bool
	}{
		{"replaced", sticky, held, stickyAlloc("A", "complete", "stop", "", "B", "pg-1"), OutcomeComplete, nil, true},
		{"job stopped", sticky, held, stickyAlloc("A", "complete", "stop", "", "", "pg-1"), OutcomeComplete, nil, false},
		{"batch done", sticky, held, stickyAlloc("A", "complete", "run", "", "", "pg-1"), OutcomeComplete, nil, false},
		{"failed, may be rescheduled", sticky, held, stickyAlloc("A", "failed", "run", "", "", "pg-1"), OutcomeFailed, nil, true},
		{"failed and stopped", sticky, held, stickyAlloc("A", "failed", "stop", "", "", "pg-1"), OutcomeFailed, nil, false},
		{"lost, replaced", sticky, held, stickyAlloc("A", "lost", "stop", "", "B", "pg-1"), OutcomeLost, nil, true},
		{"gone from Nomad", sticky, Slot{}, Alloc{ID: "A"}, OutcomeGone, nil, false},
		{"operator's release", sticky, held, stickyAlloc("A", "complete", "stop", "", "B", "pg-1"), OutcomeOperator, nil, false},
		{"orphan", sticky, Slot{ID: "pg-1", Orphan: true}, stickyAlloc("A", "complete", "stop", "", "B", "pg-1"), OutcomeComplete, nil, false},
		{"replacement ready for its claim", sticky, held, stickyAlloc("A", "complete", "stop", "", "B", "pg-1"), OutcomeComplete,
			[]Slot{{ID: "pg-2", Exists: true, State: StateReady}}, true},
		{"replacement recorded on its own slot", sticky, held, stickyAlloc("A", "complete", "stop", "", "B", "pg-1"), OutcomeComplete,
			[]Slot{{ID: "pg-2", Exists: true, State: StateHeld, Holder: "B"}}, false},
		{"replacement's own slot releasing", sticky, held, stickyAlloc("A", "failed", "stop", "", "B", "pg-1"), OutcomeFailed,
			[]Slot{{ID: "pg-2", Exists: true, State: StateReleasing, Holder: "B"}}, false},
		{"replacement recorded on a slot it does not name", sticky, held, stickyAlloc("A", "complete", "stop", "", "B", "pg-1"), OutcomeComplete,
			[]Slot{{ID: "pg-3", Exists: true, State: StateHeld, Holder: "B"}}, true},
		{"another allocation on the named slot", sticky, held, stickyAlloc("A", "complete", "stop", "", "B", "pg-1"), OutcomeComplete,
			[]Slot{{ID: "pg-2", Exists: true, State: StateHeld, Holder: "C"}}, true},
		{"not sticky", Class{Name: "pg"}, held, stickyAlloc("A", "complete", "stop", "", "B", "pg-1"), OutcomeComplete, nil, false},
		{"stopped as lost, no replacement named, replicas kept: for the one Nomad does not name", replicating, held, lostByServers,
			OutcomeLost, nil, true},
		{"stopped as lost, no replacement named, no replicas: the policy", migrating, held, lostByServers, OutcomeLost, nil, false},
		{"stopped as lost, no replacement named, replicas kept but no migrate", replicatingHere, held, lostByServers, OutcomeLost, nil, false},
		{"stopped, not as lost, no replacement named, replicas kept: the policy", replicating, held,
			stickyAlloc("A", "complete", "stop", "", "", "pg-1"), OutcomeComplete, nil, false},
		{"stopped as lost, an operator's release", replicating, held, lostByServers, OutcomeOperator, nil, false},
	}
	// B, the replacement, names pg-2; named are the slots as last read.
	snap := &Snapshot{NodeID: "node", Allocs: []Alloc{stickyAlloc("B", "pending", "run", "A", "", "pg-2")}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			slot := func(id string) (Slot, bool) {
				for _, s := range tc.named {
					if s.ID == id {
						return s, true
					}
				}
				return Slot{}, false
			}
			if got := tc.class.Parks(tc.slot, tc.holder, tc.outcome, snap, slot); got != tc.want {
				t.Errorf("Parks = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlanParked(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	class := Class{Name: "pg", Sticky: true, StickyWait: time.Hour}
	migrating := class
	migrating.Migrate = Migrate{Enabled: true, Timeout: time.Minute, OnTimeout: MigrateFail}
	p := Retained{Dataset: "tank/nomad/pg/parked-A-pg-1", State: StateParked, Holder: "A", Expires: now.Add(time.Hour)}
	snapOf := func(as ...Alloc) *Snapshot {
		return &Snapshot{NodeID: "node", Allocs: as}
	}
	heldBy := func(id, holder string) Slot { return Slot{ID: id, Exists: true, State: StateHeld, Holder: holder} }
	remoteA := stickyAlloc("A", "complete", "stop", "", "B", "pg-1") // A, looked up: it ran on another node
	remoteA.NodeID = "other"
	replicating := migrating
	replicating.Replicate = Replicate{Copies: 1, Every: time.Minute}
	lostA := stickyAlloc("A", "lost", "stop", "", "B", "pg-1") // A, lost with this node, which is back
	// A, stopped as lost by the servers and ended by this node, back; its
	// replacement placed without a link (Nomad 1.6.2).
	unlinkedA := stickyAlloc("A", "complete", "stop", "", "", "pg-1")
	unlinkedA.LostByServers = true
	withSnap := func(snap string) Retained { q := p; q.OwnSnapshots = []string{p.Dataset + "@" + snap}; return q }
	cases := []struct {
		name   string
		class  Class
		p      Retained
		snap   *Snapshot
		slots  []Slot
		looked map[string]Alloc
		want   ParkedStepKind
		lookup string
	}{
		{name: "replacement pending here: keep", class: class, p: p,
			snap: snapOf(stickyAlloc("A", "complete", "stop", "", "B", "pg-1"), stickyAlloc("B", "pending", "run", "A", "", "pg-2")),
			want: ParkedKeep},
		{name: "replacement started on a fresh slot: release", class: class, p: p,
			snap:  snapOf(stickyAlloc("A", "complete", "stop", "", "B", "pg-1"), stickyAlloc("B", "running", "run", "A", "", "pg-2")),
			slots: []Slot{heldBy("pg-2", "B")}, want: ParkedRelease},
		{name: "replacement ended without claiming: release", class: class, p: p,
			snap: snapOf(stickyAlloc("A", "complete", "stop", "", "B", "pg-1"), stickyAlloc("B", "failed", "run", "A", "", "pg-2")),
			want: ParkedRelease},
		{name: "replacement not listed: look it up", class: class, p: p,
			snap: snapOf(stickyAlloc("A", "complete", "stop", "", "B", "pg-1")), want: ParkedLookup, lookup: "B"},
		{name: "replacement on another node: release", class: class, p: p,
			snap:   snapOf(stickyAlloc("A", "complete", "stop", "", "B", "pg-1")),
			looked: map[string]Alloc{"B": {ID: "B", NodeID: "other", ClientStatus: "pending"}}, want: ParkedRelease},
		{name: "replacement gone: release", class: class, p: p,
			snap:   snapOf(stickyAlloc("A", "complete", "stop", "", "B", "pg-1")),
			looked: map[string]Alloc{"B": {}}, want: ParkedRelease},
		{name: "failed, no replacement yet: keep", class: class, p: p,
			snap: snapOf(stickyAlloc("A", "failed", "run", "", "", "pg-1")), want: ParkedKeep},
		{name: "job stopped since: release", class: class, p: p,
			snap: snapOf(stickyAlloc("A", "failed", "stop", "", "", "pg-1")), want: ParkedRelease},
		{name: "holder not listed: look it up", class: class, p: p, snap: snapOf(), want: ParkedLookup, lookup: "A"},
		{name: "holder gone: release", class: class, p: p, snap: snapOf(), looked: map[string]Alloc{"A": {}}, want: ParkedRelease},
		{name: "past sticky_wait: release", class: class, p: Retained{Dataset: p.Dataset, State: StateParked, Holder: "A", Expires: now.Add(-time.Second)},
			snap: snapOf(stickyAlloc("A", "failed", "run", "", "", "pg-1")), want: ParkedRelease},
		{name: "class no longer sticky: release", class: Class{Name: "pg"}, p: p,
			snap: snapOf(stickyAlloc("A", "complete", "stop", "", "B", "pg-1"), stickyAlloc("B", "pending", "run", "A", "", "pg-2")),
			want: ParkedRelease},
		{name: "no snapshot yet: keep", class: class, p: p, want: ParkedKeep},
		{name: "migrate: replacement on another node, no copy there yet: keep", class: migrating, p: p,
			snap:   snapOf(stickyAlloc("A", "complete", "stop", "", "B", "pg-1")),
			looked: map[string]Alloc{"B": {ID: "B", NodeID: "other", ClientStatus: "pending"}}, want: ParkedKeep},
		{name: "migrate: the replacement's node holds the final copy: release", class: migrating,
			p:      func() Retained { q := p; q.OwnSnapshots = []string{p.Dataset + "@" + Migrated}; return q }(),
			snap:   snapOf(stickyAlloc("A", "complete", "stop", "", "B", "pg-1")),
			looked: map[string]Alloc{"B": {ID: "B", NodeID: "other", ClientStatus: "pending"}}, want: ParkedRelease},
		{name: "migrate: the final copy sent, not yet confirmed: keep", class: migrating,
			p:      func() Retained { q := p; q.OwnSnapshots = []string{p.Dataset + "@" + MigrateFinal}; return q }(),
			snap:   snapOf(stickyAlloc("A", "complete", "stop", "", "B", "pg-1")),
			looked: map[string]Alloc{"B": {ID: "B", NodeID: "other", ClientStatus: "pending"}}, want: ParkedKeep},
		{name: "migrate: the replacement ended on its node without it: release", class: migrating, p: p,
			snap:   snapOf(stickyAlloc("A", "complete", "stop", "", "B", "pg-1")),
			looked: map[string]Alloc{"B": {ID: "B", NodeID: "other", ClientStatus: "failed"}}, want: ParkedRelease},
		{name: "a copy still being received is never finished as a crash's", class: migrating,
			p:    Retained{Dataset: p.Dataset, State: StateReceiving, Holder: "A", Outcome: OutcomeMigrated, Expires: now.Add(time.Hour)},
			snap: snapOf(stickyAlloc("B", "pending", "run", "A", "", "pg-2")), want: ParkedLookup, lookup: "A"},
		{name: "a copy for a replacement still to start here: keep", class: migrating,
			p:      Retained{Dataset: p.Dataset, State: StateReceiving, Holder: "A", Outcome: OutcomeMigrated, Expires: now.Add(time.Hour)},
			snap:   snapOf(stickyAlloc("B", "pending", "run", "A", "", "pg-2")),
			looked: map[string]Alloc{"A": remoteA}, want: ParkedKeep},
		{name: "a copy whose replacement started here without it: release", class: migrating,
			p:      Retained{Dataset: p.Dataset, State: StateParked, Holder: "A", Outcome: OutcomeMigrated, Expires: now.Add(time.Hour)},
			snap:   snapOf(stickyAlloc("B", "running", "run", "A", "", "pg-2")),
			slots:  []Slot{heldBy("pg-2", "B")},
			looked: map[string]Alloc{"A": remoteA}, want: ParkedRelease},
		{name: "replicate: the replacement started elsewhere without it (a replica taken over): kept aside", class: replicating, p: p,
			snap:   snapOf(lostA),
			looked: map[string]Alloc{"B": {ID: "B", NodeID: "other", ClientStatus: "running"}}, want: ParkedRetain},
		{name: "replicate: the replacement's task runs elsewhere, its client not yet said so: kept aside", class: replicating, p: p,
			snap:   snapOf(lostA),
			looked: map[string]Alloc{"B": {ID: "B", NodeID: "other", ClientStatus: "pending", TaskStates: map[string]string{"t": "running"}}},
			want:   ParkedRetain},
		{name: "replicate: the replacement still waits elsewhere: keep, for its pull", class: replicating, p: p,
			snap:   snapOf(lostA),
			looked: map[string]Alloc{"B": {ID: "B", NodeID: "other", ClientStatus: "pending"}}, want: ParkedKeep},
		{name: "replicate: the final copy sent, the replacement started with it: keep for the confirmation", class: replicating,
			p: withSnap(MigrateFinal), snap: snapOf(lostA),
			looked: map[string]Alloc{"B": {ID: "B", NodeID: "other", ClientStatus: "running"}}, want: ParkedKeep},
		{name: "replicate: the replacement's node holds the final copy: release", class: replicating,
			p: withSnap(Migrated), snap: snapOf(lostA),
			looked: map[string]Alloc{"B": {ID: "B", NodeID: "other", ClientStatus: "running"}}, want: ParkedRelease},
		{name: "replicate: the replacement started here (on_timeout, no copy): not this rule", class: replicating, p: p,
			snap:  snapOf(lostA, stickyAlloc("B", "running", "run", "A", "", "pg-2")),
			slots: []Slot{heldBy("pg-2", "B")}, want: ParkedRelease},
		{name: "migrate without replicas: the replacement started elsewhere: keep until sticky_wait", class: migrating, p: p,
			snap:   snapOf(lostA),
			looked: map[string]Alloc{"B": {ID: "B", NodeID: "other", ClientStatus: "running"}}, want: ParkedKeep},
		{name: "replicate: stopped as lost, no replacement named: keep for the replacement Nomad does not name", class: replicating, p: p,
			snap: snapOf(unlinkedA), want: ParkedKeep},
		{name: "replicate: stopped as lost, no replacement named, the final copy sent: keep for the confirmation", class: replicating,
			p: withSnap(MigrateFinal), snap: snapOf(unlinkedA), want: ParkedKeep},
		{name: "replicate: stopped as lost, no replacement named, its node holds the final copy: release", class: replicating,
			p: withSnap(Migrated), snap: snapOf(unlinkedA), want: ParkedRelease},
		{name: "replicate: stopped as lost, no replacement named, past sticky_wait: release (kept aside by KeepsLost)", class: replicating,
			p: func() Retained { q := p; q.Expires = now.Add(-time.Second); return q }(), snap: snapOf(unlinkedA), want: ParkedRelease},
		{name: "replicate: a copy here for the replacement Nomad does not name: keep for its claim", class: replicating,
			p:      Retained{Dataset: p.Dataset, State: StateParked, Holder: "A", Outcome: OutcomeMigrated, Expires: now.Add(time.Hour)},
			snap:   snapOf(stickyAlloc("B", "pending", "run", "", "", "pg-2")),
			looked: map[string]Alloc{"A": func() Alloc { a := unlinkedA; a.NodeID = "other"; return a }()}, want: ParkedKeep},
		{name: "migrate without replicas: stopped as lost, no replacement named: release", class: migrating, p: p,
			snap: snapOf(unlinkedA), want: ParkedRelease},
		{name: "replicate: stopped, not as lost, no replacement named: release", class: replicating, p: p,
			snap: snapOf(stickyAlloc("A", "complete", "stop", "", "", "pg-1")), want: ParkedRelease},
		{name: "a park a crash interrupted is finished", class: class,
			p:    Retained{Dataset: p.Dataset, State: StateReleasing, Holder: "A"},
			snap: snapOf(), want: ParkedFinish},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := PlanParked(tc.class, tc.p, tc.slots, tc.snap, tc.looked, now)
			if got.Kind != tc.want || got.Lookup != tc.lookup {
				t.Errorf("PlanParked = %+v, want kind %v lookup %q", got, tc.want, tc.lookup)
			}
		})
	}
}

func TestPredecessorPairsByTaskAndPosition(t *testing.T) {
	c := Class{Name: "pg", Sticky: true}
	a := Alloc{ID: "A", Devices: []Device{
		{Task: "main", Vendor: Vendor, Type: DeviceType, Name: "pg", IDs: []string{"pg-1", "pg-3"}},
		{Task: "side", Vendor: Vendor, Type: DeviceType, Name: "pg", IDs: []string{"pg-2"}}}}
	b := Alloc{ID: "B", PreviousAllocation: "A", Devices: []Device{
		{Task: "main", Vendor: Vendor, Type: DeviceType, Name: "pg", IDs: []string{"pg-2", "pg-4"}},
		{Task: "side", Vendor: Vendor, Type: DeviceType, Name: "pg", IDs: []string{"pg-1"}}}}
	snap := &Snapshot{Allocs: []Alloc{a, b}}
	for slot, want := range map[string]string{"pg-2": "pg-1", "pg-4": "pg-3", "pg-1": "pg-2"} {
		if prev, from, ok := Predecessor(c, b, slot, snap); !ok || prev.ID != "A" || from != want {
			t.Errorf("Predecessor(%s) = %s %s %v, want A %s", slot, prev.ID, from, ok, want)
		}
	}
	if _, _, ok := Predecessor(Class{Name: "pg"}, b, "pg-2", snap); ok {
		t.Error("a class that is not sticky inherits")
	}
}

// TestClaimedSlotIsNotRetained: a claim marks parked data with the slot's
// name before renaming it there; a slot still carrying that mark (a failed
// last write) is a slot, not retained data (found by the simulation, seed
// 7073: it was made "retained" in place and never offered again).
func TestClaimedSlotIsNotRetained(t *testing.T) {
	slot := fsRow("tank/nomad/scratch/scratch-1", map[string]string{PropOwner: "tank/nomad/scratch/scratch-1",
		PropState: string(StateHeld), PropGeneration: "1", PropRetainAs: "tank/nomad/scratch/scratch-1", PropHolder: "B"})
	aside := fsRow("tank/nomad/scratch/retained-A", map[string]string{PropOwner: "tank/nomad/scratch/scratch-2",
		PropState: string(StateReleasing), PropRetainAs: "tank/nomad/scratch/retained-A"})
	v := BuildView(testCfg, Scan{Pools: onlinePool(), Sets: []zfs.Dataset{
		fsRow("tank/nomad", nil), ownedRow("tank/nomad/scratch", ""), slot, aside,
		ownedRow("tank/nomad/scratch/scratch-2", StateReady)}}, nil)
	cv := v.Classes[0]
	if len(cv.Retained) != 1 || cv.Retained[0].Dataset != aside.Name {
		t.Fatalf("retained: %+v", cv.Retained)
	}
	if s := cv.Slots[0]; s.State != StateHeld || s.Holder != "B" || !s.Healthy {
		t.Fatalf("scratch-1: %s by %s healthy %v (%s)", s.State, s.Holder, s.Healthy, s.Reason)
	}
}

// TestClaimedOrphanIsAnOrphan: a claimed slot the configuration then drops
// still carries its own name in PropRetainAs; it is an orphan, released
// when its holder ends (simulation, seed 210060: it was skipped and stayed
// held for ever).
func TestClaimedOrphanIsAnOrphan(t *testing.T) {
	cfg := &Config{Parent: "tank/nomad", Classes: []Class{{Name: "scratch", Slots: 1, MountPath: "/data"}}}
	claimed := fsRow("tank/nomad/scratch/scratch-2", map[string]string{PropOwner: "tank/nomad/scratch/scratch-2",
		PropState: string(StateHeld), PropGeneration: "2", PropRetainAs: "tank/nomad/scratch/scratch-2", PropHolder: "B"})
	v := BuildView(cfg, Scan{Pools: onlinePool(), Sets: []zfs.Dataset{
		fsRow("tank/nomad", nil), ownedRow("tank/nomad/scratch", ""), ownedRow("tank/nomad/scratch/scratch-1", StateReady), claimed}}, nil)
	if o := v.Classes[0].Orphans; len(o) != 1 || o[0].ID != "scratch-2" || o[0].Holder != "B" {
		t.Fatalf("orphans: %+v", o)
	}
}

// TestMigratedReleaseSurvivesABusyDestroy: node 1 releases A's parked data
// because B's node holds the final copy (@migrated). The release drops the
// snapshots, @migrated with them, then destroys the data; a destroy
// refused as busy (seen on real agents right after the last send) left
// data that no longer showed why it was to go, kept until sticky_wait
// ended. The release now records its decision first (an expiry passed),
// so the next pass releases it again.
func TestMigratedReleaseSurvivesABusyDestroy(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := Class{Name: "pg", Sticky: true, StickyWait: time.Hour, Migrate: Migrate{Enabled: true, Timeout: time.Minute, OnTimeout: MigrateFail}}
	name := "tank/nomad/pg/parked-A-pg-1"
	p := Retained{Dataset: name, State: StateParked, Holder: "A", Outcome: OutcomeComplete, Expires: now.Add(time.Hour),
		OwnSnapshots: []string{name + "@" + Migrated}}
	a := stickyAlloc("A", "complete", "stop", "", "B", "pg-1")
	b := stickyAlloc("B", "running", "run", "A", "", "pg-1")
	b.NodeID = "node-2"
	snap := &Snapshot{NodeID: "node", Allocs: []Alloc{a}}
	looked := map[string]Alloc{"B": b}
	if st := PlanParked(c, p, nil, snap, looked, now); st.Kind != ParkedRelease {
		t.Fatalf("migrated: %v %q, want a release", st.Kind, st.Reason)
	}
	plan, err := PlanReleaseParked(&Config{Parent: "tank/nomad"}, c, p, "its replacement's node holds its final copy", now)
	if err != nil {
		t.Fatal(err)
	}
	// Every command up to the destroy ran; the destroy was refused.
	after := p
	after.OwnSnapshots = nil
	for _, op := range plan.Ops[:len(plan.Ops)-1] {
		if op.Command.Verb == zfs.VerbSet {
			if secs, err := strconv.ParseInt(op.Command.Props[PropExpires], 10, 64); err == nil {
				after.Expires = time.Unix(secs, 0)
			}
		}
	}
	if st := PlanParked(c, after, nil, snap, looked, now.Add(time.Second)); st.Kind != ParkedRelease {
		t.Fatalf("after a busy destroy (plan %v): %v %q, want the release again", plan.Ops, st.Kind, st.Reason)
	}
}

// TestPlansAfterAMigration: the commands that drop a migration's snapshots,
// one zfs release and one zfs destroy per dataset however many there are
// (the sender leaves its pre-copies to the policy, the receiver to the
// claim: DecideSend, hooks' pull), and only the migration's.
func TestPlansAfterAMigration(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	const orig = "tank/nomad/pg/parked-A-pg-1"
	const copyName = "tank/nomad/pg/parked-A-pg-1"
	sticky := Class{Name: "pg", Sticky: true, StickyWait: time.Hour, Migrate: Migrate{Enabled: true, Timeout: time.Minute, OnTimeout: MigrateFail}}
	keep := sticky
	keep.Release = Release{Policy: PolicySnapshot, Retain: time.Hour}
	original := Retained{Dataset: orig, State: StateParked, Holder: "A", Outcome: OutcomeComplete,
		OwnSnapshots: []string{orig + "@migrate-1", orig + "@migrated", orig + "@pristine"}}
	received := Retained{Dataset: copyName, State: StateParked, Holder: "A", Outcome: OutcomeMigrated,
		OwnSnapshots: []string{copyName + "@migrate-1", copyName + "@migrate-final"}}
	slot := Slot{ID: "pg-1", Class: "pg", Dataset: "tank/nomad/pg/pg-1", Exists: true, State: StateReady, Generation: 1}
	// The copy as its pull's mark left it (PlanReceived), read back.
	marked := received
	marked.Info = zfs.Dataset{Name: copyName, User: zfs.UserPropsOf(PlanReceived(copyName, slot.Dataset, now, now.Add(time.Hour)).Ops[0].Props)}
	forOther := received
	forOther.Info = zfs.Dataset{Name: copyName, User: zfs.UserPropsOf(PlanReceived(copyName, "tank/nomad/pg/pg-2", now, now.Add(time.Hour)).Ops[0].Props)}
	const tag = " " + HoldTag
	cases := []struct {
		name string
		plan func() (Plan, error)
		want []string
	}{
		{name: "the original, copied whole, destroyed by the policy with every snapshot of it",
			plan: func() (Plan, error) {
				return PlanReleaseParked(&Config{Parent: "tank/nomad"}, sticky, original, "copied", now)
			},
			want: []string{"set " + orig + " {nomad-device-zfs:expires}",
				"release " + orig + "@migrate-1,migrated,pristine" + tag, "destroy " + orig + "@migrate-1,migrated,pristine", "destroy " + orig}},
		{name: "the original kept by the snapshot policy: the migration's snapshots go after the mark, @pristine stays",
			plan: func() (Plan, error) {
				return PlanReleaseParked(&Config{Parent: "tank/nomad"}, keep, original, "copied", now)
			},
			want: []string{"snapshot " + orig + "@retained", "hold " + orig + "@retained" + tag,
				"set " + orig + " {nomad-device-zfs:expires,nomad-device-zfs:owner,nomad-device-zfs:since,nomad-device-zfs:state}",
				"release " + orig + "@migrate-1,migrated" + tag, "destroy " + orig + "@migrate-1,migrated"}},
		{name: "the copy claimed: the transfer's snapshots, held by no one, in one destroy before the rename",
			plan: func() (Plan, error) { return PlanClaim(slot, Alloc{ID: "B"}, received, now), nil },
			want: []string{"destroy " + copyName + "@migrate-1,migrate-final",
				"destroy tank/nomad/pg/pg-1",
				"set " + copyName + " {nomad-device-zfs:owner,nomad-device-zfs:retain_as,nomad-device-zfs:state}",
				"rename " + copyName + " tank/nomad/pg/pg-1",
				"set tank/nomad/pg/pg-1 {nomad-device-zfs:generation,nomad-device-zfs:holder,nomad-device-zfs:holder_index,nomad-device-zfs:owner,nomad-device-zfs:since,nomad-device-zfs:state}",
				"mount tank/nomad/pg/pg-1"}},
		{name: "the copy claimed as its pull marked it for the slot: renamed without a set before",
			plan: func() (Plan, error) { return PlanClaim(slot, Alloc{ID: "B"}, marked, now), nil },
			want: []string{"destroy " + copyName + "@migrate-1,migrate-final",
				"destroy tank/nomad/pg/pg-1",
				"rename " + copyName + " tank/nomad/pg/pg-1",
				"set tank/nomad/pg/pg-1 {nomad-device-zfs:generation,nomad-device-zfs:holder,nomad-device-zfs:holder_index,nomad-device-zfs:owner,nomad-device-zfs:since,nomad-device-zfs:state}",
				"mount tank/nomad/pg/pg-1"}},
		{name: "the copy marked for another slot: marked for this one first",
			plan: func() (Plan, error) { return PlanClaim(slot, Alloc{ID: "B"}, forOther, now), nil },
			want: []string{"destroy " + copyName + "@migrate-1,migrate-final",
				"destroy tank/nomad/pg/pg-1",
				"set " + copyName + " {nomad-device-zfs:owner,nomad-device-zfs:retain_as,nomad-device-zfs:state}",
				"rename " + copyName + " tank/nomad/pg/pg-1",
				"set tank/nomad/pg/pg-1 {nomad-device-zfs:generation,nomad-device-zfs:holder,nomad-device-zfs:holder_index,nomad-device-zfs:owner,nomad-device-zfs:since,nomad-device-zfs:state}",
				"mount tank/nomad/pg/pg-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.plan()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range p.Commands() {
				got = append(got, c.String())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("commands:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
			for _, c := range p.Commands() {
				if _, err := c.Args(); err != nil {
					t.Errorf("%s: %v", c, err)
				}
			}
		})
	}
}

// TestPlanRetainParked: parked data its replacement started without
// (PlanParked's ParkedRetain: a replica taken over elsewhere) is kept
// aside as retained data, held and marked to expire after the class's
// retain, whatever the class's policy: never destroyed; the migration's
// snapshots go, as when the snapshot policy keeps parked data.
func TestPlanRetainParked(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	name := "tank/nomad/pg/parked-A-pg-1"
	p := Retained{Dataset: name, State: StateParked, Holder: "A", Outcome: OutcomeLost, Expires: now.Add(time.Hour)}
	for _, policy := range []Policy{PolicyDestroy, PolicyRollback, PolicySnapshot} {
		t.Run(string(policy), func(t *testing.T) {
			c := Class{Name: "pg", Sticky: true, StickyWait: time.Hour, Release: Release{Policy: policy, Retain: 72 * time.Hour},
				Migrate: Migrate{Enabled: true, Timeout: time.Minute}, Replicate: Replicate{Copies: 1, Every: time.Minute}}
			plan, err := PlanRetainParked(&Config{Parent: "tank/nomad"}, c, p, "its replacement started without it", now)
			if err != nil {
				t.Fatal(err)
			}
			var verbs []string
			for _, op := range plan.Ops {
				verbs = append(verbs, fmt.Sprint(op.Command.Verb))
				switch op.Command.Verb {
				case zfs.VerbDestroy:
					if !strings.Contains(op.Command.Name, "@") {
						t.Errorf("the data itself destroyed: %+v", op.Command)
					}
				case zfs.VerbSet:
					if st := op.Command.Props[PropState]; st != string(StateRetained) {
						t.Errorf("marked %q, want %s", st, StateRetained)
					}
					if got := op.Command.Props[PropExpires]; got != unix(now.Add(72*time.Hour)) {
						t.Errorf("expires %s, want the class's retain from now", got)
					}
				}
			}
			if len(plan.Ops) < 3 || plan.Ops[0].Command.Verb != zfs.VerbSnapshot || plan.Ops[1].Command.Verb != zfs.VerbHold ||
				plan.Ops[2].Command.Verb != zfs.VerbSet {
				t.Errorf("ops %v, want the snapshot, its hold and the retained marks first", verbs)
			}
		})
	}
}
