package model_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// replicaCfg is one class, pg, that keeps one copy, and one, plain, that
// keeps none.
func replicaCfg() *model.Config {
	return &model.Config{Parent: "tank/nomad", Classes: []model.Class{
		{Name: "pg", Slots: 3, Sticky: true, StickyWait: time.Hour, Replicate: model.Replicate{Copies: 1, Every: time.Minute}},
		{Name: "plain", Slots: 3},
	}}
}

// holding is allocation id on node, running, holding slots of class.
func holding(id, node, class string, slots ...string) model.Alloc {
	return model.Alloc{ID: id, NodeID: node, Namespace: "default", JobID: "db", TaskGroup: "g", ClientStatus: "running",
		DesiredStatus: "run", Devices: []model.Device{{Task: "t", Vendor: model.Vendor, Type: model.DeviceType, Name: class, IDs: slots}}}
}

// TestReplicaTargets: a node keeps a replica of each slot of a class that
// keeps replicas, held by a running allocation of another node, when
// ReplicaNodes picks it; of nothing else.
func TestReplicaTargets(t *testing.T) {
	nodes := []model.ReplicaNode{{ID: "n1", Ready: true, Offers: true}, {ID: "n2", Ready: true, Offers: true}}
	cases := []struct {
		name   string
		self   string
		allocs []model.Alloc
		want   []string // replica names
	}{
		{name: "A on n1 holds pg-1 and pg-2: n2, the only other node, keeps both", self: "n2",
			allocs: []model.Alloc{holding("A", "n1", "pg", "pg-1", "pg-2")},
			want:   []string{"tank/nomad/pg/replica-A-pg-1", "tank/nomad/pg/replica-A-pg-2"}},
		{name: "the holder's own node keeps none of its own", self: "n1", allocs: []model.Alloc{holding("A", "n1", "pg", "pg-1")}},
		{name: "a class that keeps no replicas", self: "n2", allocs: []model.Alloc{holding("A", "n1", "plain", "plain-1")}},
		{name: "a class this node has not", self: "n2", allocs: []model.Alloc{holding("A", "n1", "other", "other-1")}},
		{name: "a slot ID not of the class", self: "n2", allocs: []model.Alloc{holding("A", "n1", "pg", "plain-1")}},
		{name: "A is stopping", self: "n2", allocs: []model.Alloc{func() model.Alloc {
			a := holding("A", "n1", "pg", "pg-1")
			a.DesiredStatus = "stop"
			return a
		}()}},
		{name: "A has ended", self: "n2", allocs: []model.Alloc{func() model.Alloc {
			a := holding("A", "n1", "pg", "pg-1")
			a.ClientStatus = "complete"
			return a
		}()}},
		{name: "A is pending: kept from its start", self: "n2", allocs: []model.Alloc{func() model.Alloc {
			a := holding("A", "n1", "pg", "pg-1")
			a.ClientStatus = "pending"
			return a
		}()}, want: []string{"tank/nomad/pg/replica-A-pg-1"}},
		{name: "a node not in the list is chosen for nothing", self: "n3", allocs: []model.Alloc{holding("A", "n1", "pg", "pg-1")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, r := range model.ReplicaTargets(replicaCfg(), tc.self, tc.allocs, map[string][]model.ReplicaNode{"pg": nodes}) {
				got = append(got, r.Name)
				if r.Class != "pg" || r.Source.ID != "A" || r.Name != "tank/nomad/pg/replica-A-"+r.Slot {
					t.Errorf("target %+v", r)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("targets %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("of three other nodes, exactly ReplicaNodes' pick keeps it", func(t *testing.T) {
		three := []model.ReplicaNode{{ID: "n1", Ready: true, Offers: true}, {ID: "n2", Ready: true, Offers: true},
			{ID: "n3", Ready: true, Offers: true}, {ID: "n4", Ready: true, Offers: true}}
		for i := range 50 {
			id := fmt.Sprintf("alloc-%d", i)
			pick := model.ReplicaNodes(id, "n1", 1, three)
			for _, self := range []string{"n2", "n3", "n4"} {
				got := model.ReplicaTargets(replicaCfg(), self, []model.Alloc{holding(id, "n1", "pg", "pg-1")},
					map[string][]model.ReplicaNode{"pg": three})
				if (len(got) == 1) != (pick[0] == self) {
					t.Fatalf("%s: node %s keeps %v; ReplicaNodes picks %v", id, self, got, pick)
				}
			}
		}
	})
}

// TestReplicasIn: a class dataset's replicas read back from one listing,
// with their newest snapshot and when it was received; a whole copy
// beside a replica is that replica's.
func TestReplicasIn(t *testing.T) {
	const ds = "tank/nomad/pg"
	replica := func(name, holder string, since int64) zfs.Dataset {
		return zfs.Dataset{Name: ds + "/" + name, Type: zfs.DatasetFilesystem, User: zfs.UserPropsOf(map[string]string{
			model.PropOwner: ds + "/" + name, model.PropState: string(model.StateReplica), model.PropHolder: holder,
			model.PropSince: fmt.Sprint(since)})}
	}
	rows := []zfs.Dataset{
		{Name: ds, Type: zfs.DatasetFilesystem},
		replica("replica-A-pg-1", "A", 1000),
		{Name: ds + "/replica-A-pg-1@replica-3", Type: zfs.DatasetSnapshot, GUID: "103"},
		{Name: ds + "/replica-A-pg-1@replica-4", Type: zfs.DatasetSnapshot, GUID: "104"},
		replica("replica-B-pg-2", "B", 2000), // a first receive not finished: no snapshot
		{Name: ds + "/pg-1", Type: zfs.DatasetFilesystem, User: zfs.UserPropsOf(map[string]string{model.PropOwner: ds + "/pg-1",
			model.PropState: string(model.StateHeld)})},
		{Name: ds + "/replica-C-pg-3", Type: zfs.DatasetFilesystem}, // a stranger's, named alike
		replica("replica-A-pg-1.whole", "A", 3000),                  // a whole copy coming beside A's: A's
		// A whole copy of D's, marked for its replica by a swap a crash
		// cut after the replica's drop: it stands for D's replica.
		{Name: ds + "/replica-D-pg-2.whole", Type: zfs.DatasetFilesystem, User: zfs.UserPropsOf(map[string]string{
			model.PropOwner: ds + "/replica-D-pg-2", model.PropState: string(model.StateReplica), model.PropHolder: "D"})},
	}
	got := model.ReplicasIn(ds, rows)
	if len(got) != 3 {
		t.Fatalf("replicas %+v, want A's, B's and D's", got)
	}
	if d := got[2]; d.Dataset != ds+"/replica-D-pg-2" || d.Source != "D" || d.Slot != "pg-2" || d.Newest != 0 {
		t.Errorf("D's replica, by the copy beside it: %+v", d)
	}
	if a := got[0]; a.Source != "A" || a.Slot != "pg-1" || a.Newest != 4 || !a.NewestAt.Equal(time.Unix(1000, 0)) {
		t.Errorf("A's replica %+v", a)
	}
	if b := got[1]; b.Source != "B" || b.Newest != 0 || !b.NewestAt.IsZero() {
		t.Errorf("B's replica %+v: no snapshot, so no age", b)
	}
	if g := model.NewestReplica(ds+"/replica-A-pg-1", rows); g != 104 {
		t.Errorf("NewestReplica = %d, want 104", g)
	}
	if o := model.OlderReplicas(ds+"/replica-A-pg-1", rows); !slices.Equal(o, []string{ds + "/replica-A-pg-1@replica-3"}) {
		t.Errorf("OlderReplicas = %v", o)
	}
}

// TestReplicaWork: each replica's fate in a round, by DecideReplica.
func TestReplicaWork(t *testing.T) {
	now := time.Unix(100000, 0)
	cfg := replicaCfg()
	target := model.ReplicaTarget{Class: "pg", Slot: "pg-1", Name: "tank/nomad/pg/replica-A-pg-1", Source: holding("A", "n1", "pg", "pg-1")}
	heldA := model.Replica{Dataset: target.Name, Source: "A", Slot: "pg-1", Newest: 2, NewestAt: now.Add(-20 * time.Second)}
	heldB := model.Replica{Dataset: "tank/nomad/pg/replica-B-pg-1", Source: "B", Slot: "pg-1", Newest: 5, NewestAt: now.Add(-time.Hour)}
	ended := func(status, next string, at time.Time) model.Alloc {
		a := holding("B", "n1", "pg", "pg-1")
		a.ClientStatus, a.NextAllocation, a.ModifyTime = status, next, at
		return a
	}
	cases := []struct {
		name    string
		targets []model.ReplicaTarget
		held    []model.Replica
		sources map[string]model.Alloc
		want    string // name fate at, ...
	}{
		{name: "a new target: pulled at once", targets: []model.ReplicaTarget{target},
			want: "tank/nomad/pg/replica-A-pg-1 pull +0s"},
		{name: "a target pulled 20s ago: due 40s from now", targets: []model.ReplicaTarget{target}, held: []model.Replica{heldA},
			want: "tank/nomad/pg/replica-A-pg-1 pull +40s"},
		{name: "a replica whose allocation Nomad no longer knows: dropped", held: []model.Replica{heldB},
			want: "tank/nomad/pg/replica-B-pg-1 drop"},
		{name: "its allocation completed, nothing replaces it: dropped", held: []model.Replica{heldB},
			sources: map[string]model.Alloc{"B": ended("complete", "", now.Add(-time.Minute))},
			want:    "tank/nomad/pg/replica-B-pg-1 drop"},
		{name: "its allocation lost a minute ago: kept sticky_wait for a replacement", held: []model.Replica{heldB},
			sources: map[string]model.Alloc{"B": ended("lost", "", now.Add(-time.Minute))},
			want:    "tank/nomad/pg/replica-B-pg-1 keep +59m0s"},
		{name: "its allocation runs, this node no longer chosen: kept", held: []model.Replica{heldB},
			sources: map[string]model.Alloc{"B": holding("B", "n1", "pg", "pg-1")},
			want:    "tank/nomad/pg/replica-B-pg-1 keep"},
		{name: "both, sorted", targets: []model.ReplicaTarget{target}, held: []model.Replica{heldB, heldA},
			want: "tank/nomad/pg/replica-A-pg-1 pull +40s, tank/nomad/pg/replica-B-pg-1 drop"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range model.ReplicaWork(model.ReplicaRound{Config: cfg, Targets: tc.targets, Held: tc.held, Sources: tc.sources, Now: now}) {
				s := a.Name + " " + a.Fate.String()
				if !a.At.IsZero() {
					s += " +" + a.At.Sub(now).String()
				}
				got = append(got, s)
				if a.Target.Name != a.Name || a.Target.Class != "pg" || a.Target.Source.ID == "" {
					t.Errorf("act %s names target %+v", a.Name, a.Target)
				}
			}
			if g := strings.Join(got, ", "); g != tc.want {
				t.Errorf("acts %q, want %q", g, tc.want)
			}
		})
	}
}

// TestDecideReplicaPullMove: one replica's round, step by step, as
// hooks' actOnReplica drives it.
func TestDecideReplicaPullMove(t *testing.T) {
	const name = "tank/nomad/pg/replica-A-pg-1"
	now := time.Unix(5000, 0)
	class := replicaCfg().Classes[0]
	target := model.ReplicaTarget{Class: "pg", Slot: "pg-1", Name: name, Source: holding("A", "n1", "pg", "pg-1")}
	ours := zfs.Dataset{Name: name, Type: zfs.DatasetFilesystem, User: zfs.UserPropsOf(map[string]string{
		model.PropOwner: name, model.PropState: string(model.StateReplica), model.PropHolder: "A"})}
	snap := func(n int) zfs.Dataset {
		return zfs.Dataset{Name: name + "@" + model.ReplicaSnapshot(n), Type: zfs.DatasetSnapshot, GUID: replicaGUID(n)}
	}
	// fetchesInto checks a fetch into target: the replica, or the copy
	// beside it for a first snapshot.
	fetchesInto := func(target string, have uint64, token string) func(*testing.T, model.Move) {
		return func(t *testing.T, mv model.Move) {
			f := mv.Fetch
			if !f.Replica || f.Alloc != "A" || f.Replacement != "" || f.Slot != "pg-1" || f.Target != target ||
				f.HaveGUID != have || f.ResumeToken != token {
				t.Fatalf("fetch %+v, want into %s from %d, token %q", f, target, have, token)
			}
			if f.Props[model.PropState] != string(model.StateReplica) || f.Props["canmount"] != "noauto" ||
				f.Props[model.PropHolder] != "A" || f.Props[model.PropReplicaSlot] != "pg-1" || f.Props[model.PropOwner] != target {
				t.Errorf("props %v", f.Props)
			}
			for _, p := range []string{model.PropGeneration, model.PropHolderIndex, "readonly"} {
				if !slices.Contains(f.Exclude, p) {
					t.Errorf("%s is taken from the stream (-x %v)", p, f.Exclude)
				}
			}
		}
	}
	fetches := func(have uint64, token string) func(*testing.T, model.Move) { return fetchesInto(name, have, token) }
	planIs := func(want ...string) func(*testing.T, model.Move) {
		return func(t *testing.T, mv model.Move) {
			var got []string
			for _, op := range mv.Plan.Ops {
				got = append(got, op.Command.String())
			}
			if !slices.Equal(got, want) {
				t.Errorf("plan %q, want %q", got, want)
			}
		}
	}
	cut := fmt.Errorf("receiving: %w", zfs.ErrInterrupted)
	const beside = name + ".whole"
	besideRow := zfs.Dataset{Name: beside, Type: zfs.DatasetFilesystem, User: zfs.UserPropsOf(map[string]string{
		model.PropOwner: beside, model.PropState: string(model.StateReplica), model.PropHolder: "A"})}
	besideSnap := zfs.Dataset{Name: beside + "@replica-1", Type: zfs.DatasetSnapshot, GUID: "201"}
	swapped := planIs("set "+beside+" {nomad-device-zfs:owner}", "receive -A "+name, "release "+name+"@replica-2 nomad-device-zfs",
		"destroy "+name+"@replica-2", "destroy "+name, "rename "+beside+" "+name)
	discarded := planIs("receive -A "+beside, "release "+beside+"@replica-1 nomad-device-zfs", "destroy "+beside+"@replica-1",
		"destroy "+beside)
	none := moveBeat{want: "list list-beside", err: zfs.ErrNotExist}
	noneAfter := moveBeat{want: "list relist-beside", err: zfs.ErrNotExist}
	cases := []struct {
		name  string
		drop  bool
		beats []moveBeat
	}{
		{name: "the first pull: whole, beside, no token read; swapped in once verified", beats: []moveBeat{
			{want: "list list", err: zfs.ErrNotExist}, none,
			{want: "fetch fetch", check: fetchesInto(beside, 0, "")},
			{want: "list relist", err: zfs.ErrNotExist},
			{want: "list relist-beside", rows: []zfs.Dataset{besideRow, besideSnap}},
			{want: "run swap", check: planIs("set "+beside+" {nomad-device-zfs:owner}", "rename "+beside+" "+name)},
			{want: "done"},
		}},
		{name: "a first snapshot beside a crash left unverified: discarded, pulled again", beats: []moveBeat{
			{want: "list list", err: zfs.ErrNotExist},
			{want: "list list-beside", rows: []zfs.Dataset{besideRow, besideSnap}},
			{want: "run discard", check: discarded}, none,
			{want: "fetch fetch", check: fetchesInto(beside, 0, "")},
			{want: "list relist", err: zfs.ErrNotExist},
			{want: "list relist-beside", rows: []zfs.Dataset{besideRow, besideSnap}},
			{want: "run swap", check: planIs("set "+beside+" {nomad-device-zfs:owner}", "rename "+beside+" "+name)},
			{want: "done"},
		}},
		{name: "a whole copy beside a crash left unverified: discarded, the increment pulled", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{ours, snap(2)}},
			{want: "list list-beside", rows: []zfs.Dataset{besideRow, besideSnap}},
			{want: "run discard", check: discarded}, none,
			{want: "fetch fetch", check: fetches(102, "")},
			{want: "list relist", rows: []zfs.Dataset{ours, snap(2), snap(3)}}, noneAfter,
			{want: "run drop-older"},
			{want: "done"},
		}},
		{name: "a complete copy beside with no replica snapshot (a lie's, its discard cut by a crash): discarded, pulled again", beats: []moveBeat{
			{want: "list list", err: zfs.ErrNotExist},
			{want: "list list-beside", rows: []zfs.Dataset{besideRow, {Name: beside + "@foreign", Type: zfs.DatasetSnapshot, GUID: "666"}}},
			{want: "run discard", check: planIs("receive -A "+beside, "release "+beside+"@foreign nomad-device-zfs",
				"destroy "+beside+"@foreign", "destroy "+beside)}, none,
			{want: "fetch fetch", check: fetchesInto(beside, 0, "")},
			{want: "list relist", err: zfs.ErrNotExist},
			{want: "list relist-beside", rows: []zfs.Dataset{besideRow, besideSnap}},
			{want: "run swap"},
			{want: "done"},
		}},
		{name: "a first snapshot that came unverified (a lie): discarded in the round, which fails", beats: []moveBeat{
			{want: "list list", err: zfs.ErrNotExist}, none,
			{want: "fetch fetch", err: errors.Join(model.ErrStartOver, errors.New("not verified"))},
			{want: "list unverified", rows: []zfs.Dataset{besideRow, besideSnap}},
			{want: "run discard", check: discarded},
			{want: "fail", check: isErr(model.ErrStartOver)},
		}},
		{name: "a whole stream that came unverified beside: discarded, the replica rolled back to its base and kept", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{ours, snap(2)}}, none,
			{want: "fetch fetch", err: model.ErrStartOver},
			{want: "list unverified", rows: []zfs.Dataset{besideRow, besideSnap}},
			{want: "run discard", check: discarded},
			{want: "list rebase", rows: []zfs.Dataset{ours, snap(2)}},
			{want: "run rollback", check: planIs("rollback " + name + "@replica-2")},
			{want: "fail", check: isErr(model.ErrStartOver)},
		}},
		{name: "a first snapshot cut beside: resumed there", beats: []moveBeat{
			{want: "list list", err: zfs.ErrNotExist},
			{want: "list list-beside", rows: []zfs.Dataset{withToken(besideRow, "1-def")}},
			{want: "fetch fetch", check: fetchesInto(beside, 0, "1-def")},
			{want: "list relist", err: zfs.ErrNotExist},
			{want: "list relist-beside", rows: []zfs.Dataset{besideRow, besideSnap}},
			{want: "run swap", check: planIs("set "+beside+" {nomad-device-zfs:owner}", "rename "+beside+" "+name)},
			{want: "done"},
		}},
		{name: "a first receive into the replica's own name (an older plugin's): discarded, pulled beside", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{withToken(ours, "1-abc")}},
			{want: "list list-beside", err: zfs.ErrNotExist},
			{want: "run discard", check: planIs("receive -A "+name, "destroy "+name)}, none,
			{want: "fetch fetch", check: fetchesInto(beside, 0, "")},
			{want: "list relist", err: zfs.ErrNotExist},
			{want: "list relist-beside", rows: []zfs.Dataset{besideRow, besideSnap}},
			{want: "run swap", check: planIs("set "+beside+" {nomad-device-zfs:owner}", "rename "+beside+" "+name)},
			{want: "done"},
		}},
		{name: "an increment from the newest, the older dropped after", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{ours, snap(2)}}, none,
			{want: "fetch fetch", check: fetches(102, "")},
			{want: "list relist", rows: []zfs.Dataset{ours, snap(2), snap(3)}}, noneAfter,
			{want: "run drop-older", check: planIs("release "+name+"@replica-2 nomad-device-zfs", "destroy "+name+"@replica-2")},
			{want: "done"},
		}},
		{name: "a cut stream: the round fails, the next resumes", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{ours, snap(2)}}, none,
			{want: "fetch fetch", err: cut},
			{want: "fail", check: isErr(zfs.ErrInterrupted)},
		}},
		{name: "a partial receive resumed from the token its listing carries", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{withToken(ours, "1-abc"), snap(2)}}, none,
			{want: "fetch fetch", check: fetches(102, "1-abc")},
			{want: "list relist", rows: []zfs.Dataset{ours, snap(2), snap(3)}}, noneAfter,
			{want: "run drop-older"},
			{want: "done"},
		}},
		{name: "a token the holder refuses: the partial receive discarded, asked again at once", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{withToken(ours, "1-abc"), snap(2)}}, none,
			{want: "fetch fetch", err: model.ErrResumeRefused},
			{want: "run abort", check: planIs("receive -A "+name, "receive -A "+beside)},
			{want: "list list", rows: []zfs.Dataset{ours, snap(2)}}, none,
			{want: "fetch fetch", check: fetches(102, "")},
			{want: "list relist", rows: []zfs.Dataset{ours, snap(2), snap(3)}}, noneAfter,
			{want: "run drop-older"},
			{want: "done"},
		}},
		{name: "a second refusal in the round ends it", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{withToken(ours, "1-abc"), snap(2)}}, none,
			{want: "fetch fetch", err: model.ErrResumeRefused},
			{want: "run abort"},
			{want: "list list", rows: []zfs.Dataset{withToken(ours, "1-abc"), snap(2)}}, none,
			{want: "fetch fetch", err: model.ErrResumeRefused},
			{want: "fail", check: isErr(model.ErrResumeRefused)},
		}},
		{name: "the holder lost the base: the whole stream comes beside, then takes the replica's place", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{ours, snap(2)}}, none,
			{want: "fetch fetch", check: func(t *testing.T, mv model.Move) {
				f := mv.Fetch
				if f.Beside != beside || f.BesideProps[model.PropOwner] != beside || f.BesideProps[model.PropState] != string(model.StateReplica) ||
					!slices.Contains(f.BesideExclude, model.PropGeneration) {
					t.Errorf("fetch beside %q %v -x %v", f.Beside, f.BesideProps, f.BesideExclude)
				}
			}},
			{want: "list relist", rows: []zfs.Dataset{ours, snap(2)}},
			{want: "list relist-beside", rows: []zfs.Dataset{besideRow, besideSnap}},
			{want: "run swap", check: swapped},
			{want: "done"},
		}},
		{name: "a whole copy cut beside: resumed from its own token, not the replica's", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{withToken(ours, "1-abc"), snap(2)}},
			{want: "list list-beside", rows: []zfs.Dataset{withToken(besideRow, "1-def")}},
			{want: "fetch fetch", check: fetches(102, "1-def")},
			{want: "list relist", rows: []zfs.Dataset{ours, snap(2)}},
			{want: "list relist-beside", rows: []zfs.Dataset{besideRow, besideSnap}},
			{want: "run swap", check: swapped},
			{want: "done"},
		}},
		{name: "a swap a crash cut after the replica's drop: renamed at the next round, which then pulls the increment", beats: []moveBeat{
			{want: "list list", err: zfs.ErrNotExist},
			{want: "list list-beside", rows: []zfs.Dataset{{Name: beside, Type: zfs.DatasetFilesystem, User: zfs.UserPropsOf(map[string]string{
				model.PropOwner: name, model.PropState: string(model.StateReplica), model.PropHolder: "A"})}, besideSnap}},
			{want: "run swap-resumed", check: planIs("set "+beside+" {nomad-device-zfs:owner}", "rename "+beside+" "+name)},
			{want: "list list", rows: []zfs.Dataset{ours, snap(2)}}, none,
			{want: "fetch fetch", check: fetches(102, "")},
			{want: "list relist", rows: []zfs.Dataset{ours, snap(2), snap(3)}}, noneAfter,
			{want: "run drop-older"},
			{want: "done"},
		}},
		{name: "a resumed swap that fails fails the round", beats: []moveBeat{
			{want: "list list", err: zfs.ErrNotExist},
			{want: "list list-beside", rows: []zfs.Dataset{{Name: beside, Type: zfs.DatasetFilesystem, User: zfs.UserPropsOf(map[string]string{
				model.PropOwner: name, model.PropState: string(model.StateReplica), model.PropHolder: "A"})}, besideSnap}},
			{want: "run swap-resumed", err: errors.New("zfs: exit status 1")},
			{want: "fail"},
		}},
		{name: "a stranger's dataset beside: refused, untouched", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{ours, snap(2)}},
			{want: "list list-beside", rows: []zfs.Dataset{{Name: beside, Type: zfs.DatasetFilesystem}}},
			{want: "fail refused"},
		}},
		{name: "an increment that came unverified (a lie): rolled back to the base, the replica kept", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{ours, snap(2)}}, none,
			{want: "fetch fetch", err: model.ErrStartOver},
			{want: "list unverified", err: zfs.ErrNotExist},
			{want: "list rebase", rows: []zfs.Dataset{ours, snap(2), {Name: name + "@" + model.ReplicaSnapshot(3), Type: zfs.DatasetSnapshot, GUID: "77"}}},
			{want: "run rollback", check: planIs("release "+name+"@replica-3 nomad-device-zfs", "destroy "+name+"@replica-3",
				"rollback "+name+"@replica-2")},
			{want: "fail", check: isErr(model.ErrStartOver)},
		}},
		{name: "an increment into a replica changed here: rolled back to the base, kept", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{ours, snap(2)}}, none,
			{want: "fetch fetch", err: errors.Join(model.ErrStartOver, zfs.ErrDestinationModified)},
			{want: "list unverified", err: zfs.ErrNotExist},
			{want: "list rebase", rows: []zfs.Dataset{ours, snap(2)}},
			{want: "run rollback", check: planIs("rollback " + name + "@replica-2")},
			{want: "fail", check: isErr(zfs.ErrDestinationModified)},
		}},
		{name: "the base gone after an unverified increment: dropped whole", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{ours, snap(2)}}, none,
			{want: "fetch fetch", err: model.ErrStartOver},
			{want: "list unverified", err: zfs.ErrNotExist},
			{want: "list rebase", rows: []zfs.Dataset{ours}},
			{want: "run start-over"},
			{want: "fail", check: isErr(model.ErrStartOver)},
		}},
		{name: "no longer lined up: dropped whole, pulled whole next round", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{ours, snap(2)}}, none,
			{want: "fetch fetch", err: errors.Join(model.ErrStartOver, zfs.ErrIncrementalMismatch)},
			{want: "list unverified", err: zfs.ErrNotExist},
			{want: "list recount", rows: []zfs.Dataset{ours, snap(2)}},
			{want: "run start-over"},
			{want: "fail", check: isErr(model.ErrStartOver)},
		}},
		{name: "a volume's stream: refused for good", beats: []moveBeat{
			{want: "list list", err: zfs.ErrNotExist}, none,
			{want: "fetch fetch", err: model.ErrNotFilesystem},
			{want: "fail refused"},
		}},
		{name: "datasets below the replica after a receive: refused, left to the operator", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{ours, snap(2)}}, none,
			{want: "fetch fetch"},
			{want: "list relist", rows: []zfs.Dataset{ours, snap(2), snap(3), {Name: name + "/child", Type: zfs.DatasetFilesystem}}},
			{want: "fail refused"},
		}},
		{name: "datasets below a first snapshot beside: refused, left to the operator", beats: []moveBeat{
			{want: "list list", err: zfs.ErrNotExist}, none,
			{want: "fetch fetch"},
			{want: "list relist", err: zfs.ErrNotExist},
			{want: "list relist-beside", rows: []zfs.Dataset{besideRow, besideSnap, {Name: beside + "/child", Type: zfs.DatasetFilesystem}}},
			{want: "fail refused"},
		}},
		{name: "a volume at the name: dropped, refused", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{{Name: name, Type: zfs.DatasetVolume, User: ours.User}, snap(1)}},
			{want: "run drop-refused"},
			{want: "fail refused"},
		}},
		{name: "a stranger's dataset at the name: refused, untouched", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{{Name: name, Type: zfs.DatasetFilesystem}}},
			{want: "fail refused"},
		}},
		{name: "the plugin's parked data at the name: refused, untouched", beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{{Name: name, Type: zfs.DatasetFilesystem, User: zfs.UserPropsOf(map[string]string{
				model.PropOwner: name, model.PropState: string(model.StateParked), model.PropHolder: "A"})}}},
			{want: "fail refused"},
		}},
		{name: "a listing that fails: the round fails", beats: []moveBeat{
			{want: "list list", err: errors.New("zfs: exit status 1")},
			{want: "fail"},
		}},
		{name: "the holder says complete: never of a replica", beats: []moveBeat{
			{want: "list list", err: zfs.ErrNotExist}, none,
			{want: "fetch fetch", complete: true},
			{want: "fail"},
		}},
		{name: "a drop: the replica, its snapshots and the copy beside it destroyed", drop: true, beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{ours, snap(2)}},
			{want: "list list-beside", rows: []zfs.Dataset{besideRow}},
			{want: "run drop", check: planIs("receive -A "+beside, "destroy "+beside, "receive -A "+name,
				"release "+name+"@replica-2 nomad-device-zfs", "destroy "+name+"@replica-2", "destroy "+name)},
			{want: "done"},
		}},
		{name: "a drop of a copy beside whose swap a crash cut before its rename: destroyed", drop: true, beats: []moveBeat{
			{want: "list list", err: zfs.ErrNotExist},
			{want: "list list-beside", rows: []zfs.Dataset{{Name: beside, Type: zfs.DatasetFilesystem, User: zfs.UserPropsOf(map[string]string{
				model.PropOwner: name, model.PropState: string(model.StateReplica), model.PropHolder: "A"})}, besideSnap}},
			{want: "run drop", check: planIs("receive -A "+beside, "release "+beside+"@replica-1 nomad-device-zfs",
				"destroy "+beside+"@replica-1", "destroy "+beside, "receive -A "+name, "destroy "+name)},
			{want: "done"},
		}},
		{name: "a drop of nothing there", drop: true, beats: []moveBeat{
			{want: "list list", err: zfs.ErrNotExist}, none,
			{want: "done"},
		}},
		{name: "a drop of a stranger's dataset: refused, untouched", drop: true, beats: []moveBeat{
			{want: "list list", rows: []zfs.Dataset{{Name: name, Type: zfs.DatasetFilesystem}}},
			{want: "fail refused"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := model.ReplicaPullLoop{Target: target, Class: class, Drop: tc.drop, Now: now}
			playMoves(t, func() model.Move { return model.DecideReplicaPullMove(in) }, func(r model.Result) { in = in.After(r) },
				describePull, tc.beats, true)
		})
	}
}

// withToken is d with a partial receive's token, as a listing reads it.
func withToken(d zfs.Dataset, token string) zfs.Dataset {
	d.ResumeToken = token
	return d
}
