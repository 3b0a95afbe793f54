package scheduler

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/hashicorp/nomad/nomad/structs"
)

// liveFixture is a real Nomad 1.11.3 node running the plugin (class
// scratch, slots scratch-1 and scratch-2, quota 1024 MiB) and its one
// allocation, hold.g[0] of job hold, running on scratch-1, as the HTTP API
// answered /v1/node/<id> and /v1/node/<id>/allocations.
func liveFixture(t *testing.T) Live {
	t.Helper()
	var n structs.Node
	var allocs []*structs.Allocation
	for path, v := range map[string]any{"testdata/live-node.json": &n, "testdata/live-allocs.json": &allocs} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if len(allocs) != 1 || allocs[0].JobID != "hold" {
		t.Fatalf("fixture allocations %d, want hold's one", len(allocs))
	}
	return Live{Nodes: []*structs.Node{&n}, Allocs: allocs}
}

// newJob is the fixture's job under another name, count and device
// constraints.
func newJob(l Live, id string, count int, constraints ...*structs.Constraint) *structs.Job {
	j := l.Allocs[0].Job.Copy()
	j.ID, j.Name, j.Version = id, id, 0
	j.TaskGroups[0].Count = count
	j.TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints = constraints
	return j
}

func quotaAtLeast(v string) *structs.Constraint {
	return &structs.Constraint{LTarget: "${device.attr.quota}", Operand: ">=", RTarget: v}
}

func TestPlanLive(t *testing.T) {
	cases := []struct {
		name       string
		count      int
		constraint *structs.Constraint
		placed     []string // slots, in allocation name order
		failed     map[string]int
	}{
		{name: "the free slot", count: 1, placed: []string{"scratch-2"}},
		{name: "a constraint the slots meet", count: 1, constraint: quotaAtLeast("512 MiB"), placed: []string{"scratch-2"}},
		{name: "one more than free", count: 2, placed: []string{"scratch-2"},
			failed: map[string]int{"devices: no devices match request": 1}},
		{name: "a constraint no slot meets", count: 1, constraint: quotaAtLeast("100 GiB"),
			failed: map[string]int{"missing devices": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := liveFixture(t)
			var cs []*structs.Constraint
			if tc.constraint != nil {
				cs = append(cs, tc.constraint)
			}
			res, err := PlanLive(l, newJob(l, "new", tc.count, cs...), nil)
			if err != nil {
				t.Fatal(err)
			}
			var placed []string
			for _, a := range res.Placed {
				if a.NodeID != l.Nodes[0].ID {
					t.Errorf("%s placed on %s", a.Name, a.NodeID)
				}
				placed = append(placed, a.AllocatedResources.Tasks["server"].Devices[0].DeviceIDs...)
			}
			if len(placed) != len(tc.placed) || len(placed) > 0 && placed[0] != tc.placed[0] {
				t.Errorf("placed on %q, want %q", placed, tc.placed)
			}
			m := res.Failed["g"]
			if (m == nil) != (tc.failed == nil) {
				t.Fatalf("failed %+v, want %v", m, tc.failed)
			}
			for k, n := range tc.failed {
				if m.ConstraintFiltered[k]+m.DimensionExhausted[k] != n {
					t.Errorf("Nomad's metrics %v %v lack %q: %d", m.ConstraintFiltered, m.DimensionExhausted, k, n)
				}
			}
		})
	}
}

// The running job planned again unchanged places nothing and stops
// nothing: PlanLive sees it as the servers do, through Live.Current.
func TestPlanLiveUnchangedJob(t *testing.T) {
	l := liveFixture(t)
	l.Current = l.Allocs[0].Job
	res, err := PlanLive(l, l.Allocs[0].Job, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Placed)+len(res.Stopped)+len(res.Failed) != 0 {
		t.Fatalf("plan of the unchanged job: placed %d, stopped %d, failed %v", len(res.Placed), len(res.Stopped), res.Failed)
	}
}

func TestDeviceUse(t *testing.T) {
	cases := []struct {
		name            string
		desired, client string
		want            string // holders, stopping or ended
	}{
		{"running holder", structs.AllocDesiredStatusRun, structs.AllocClientStatusRunning, "holders"},
		{"stopped by a server, still running", structs.AllocDesiredStatusStop, structs.AllocClientStatusRunning, "stopping"},
		{"complete", structs.AllocDesiredStatusRun, structs.AllocClientStatusComplete, "ended"},
		{"lost", structs.AllocDesiredStatusStop, structs.AllocClientStatusLost, "ended"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := liveFixture(t)
			a := l.Allocs[0]
			a.DesiredStatus, a.ClientStatus = tc.desired, tc.client
			use := DeviceUse(l.Nodes[0], l.Allocs)[structs.DeviceIdTuple{Vendor: Vendor, Type: Type, Name: "scratch"}]
			if len(use) != 2 || use[0].ID != "scratch-1" || !use[0].Healthy || len(use[1].Holders)+len(use[1].Stopping)+len(use[1].Ended) != 0 {
				t.Fatalf("use %+v, want scratch-1 used and scratch-2 untouched", use)
			}
			got := map[string]int{"holders": len(use[0].Holders), "stopping": len(use[0].Stopping), "ended": len(use[0].Ended)}
			for k, n := range got {
				if want := map[bool]int{true: 1}[k == tc.want]; n != want {
					t.Errorf("%s: %d, want %d", k, n, want)
				}
			}
		})
	}
}

func TestUnmetConstraints(t *testing.T) {
	cases := []struct {
		name    string
		ask     string
		cs      []*structs.Constraint
		matches bool
		unmet   int
	}{
		{"no constraint", "zfs/dataset/scratch", nil, true, 0},
		{"quota met", "zfs/dataset/scratch", []*structs.Constraint{quotaAtLeast("1 GiB")}, true, 0},
		{"quota unmet", "zfs/dataset/scratch", []*structs.Constraint{quotaAtLeast("100 GiB")}, true, 1},
		{"one of two unmet", "zfs/dataset/scratch", []*structs.Constraint{
			{LTarget: "${device.attr.pool}", Operand: "=", RTarget: "tank"}, quotaAtLeast("2 GiB")}, true, 1},
		{"an attribute the device lacks", "zfs/dataset/scratch", []*structs.Constraint{
			{LTarget: "${device.attr.nvme}", Operand: "is_set"}}, true, 1},
		{"type only matches", "zfs/dataset", nil, true, 0},
		{"another class", "zfs/dataset/fast", nil, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := liveFixture(t).Nodes[0].NodeResources.Devices[0]
			matches, unmet := UnmetConstraints(d, &structs.RequestedDevice{Name: tc.ask, Count: 1, Constraints: tc.cs})
			if matches != tc.matches || len(unmet) != tc.unmet {
				t.Fatalf("matches %v, unmet %v; want %v, %d", matches, unmet, tc.matches, tc.unmet)
			}
		})
	}
}

// A new task config replaces the running allocation: the plan stops it
// and places its replacement. Before PlanLive kept its own indexes above
// the cluster's, the planned job could take the JobModifyIndex the running
// allocation's job had on the cluster, and the reconciler then left that
// allocation alone: nothing replaced, in this very fixture.
func TestPlanLiveDestructiveUpdate(t *testing.T) {
	l := liveFixture(t)
	l.Current = l.Allocs[0].Job
	j := l.Current.Copy()
	j.TaskGroups[0].Tasks[0].Config["args"] = []any{"-c", "exec sleep 601"}
	res, err := PlanLive(l, j, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Placed) != 1 || len(res.Stopped) != 1 || res.Stopped[0].ID != l.Allocs[0].ID {
		t.Fatalf("placed %d, stopped %v; want the running allocation replaced", len(res.Placed), res.Stopped)
	}
}

// Mid-rollout of version 1 (count 2, max_parallel 1): hold.g[1] of
// version 1 runs, not yet healthy, and hold.g[0] still runs version 0.
// The servers replace nothing more until hold.g[1] is healthy; without the
// deployment, the reconciler would replace hold.g[0] now.
func TestPlanLiveRollingDeployment(t *testing.T) {
	l := liveFixture(t)
	v0 := l.Allocs[0]
	v1 := v0.Job.Copy()
	v1.Version, v1.JobModifyIndex = 1, v0.Job.JobModifyIndex+5
	v1.TaskGroups[0].Count = 2
	v1.TaskGroups[0].Tasks[0].Config["args"] = []any{"-c", "exec sleep 601"}
	d := structs.NewDeployment(v1, 50)
	d.TaskGroups = map[string]*structs.DeploymentState{"g": {DesiredTotal: 2, PlacedAllocs: 1}}
	a1 := v0.Copy()
	a1.ID, a1.Name, a1.Job, a1.DeploymentID, a1.DeploymentStatus = "11111111-0000-4000-8000-000000000001", "hold.g[1]", v1, d.ID, nil
	a1.AllocatedResources.Tasks["server"].Devices[0].DeviceIDs = []string{"scratch-2"}
	l.Allocs = append(l.Allocs, a1)
	l.Current = v1

	for _, tc := range []struct {
		name       string
		deployment *structs.Deployment
		placed     int
	}{
		{"with the deployment, as the servers", d, 0},
		{"without it", nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l.Deployment = tc.deployment
			res, err := PlanLive(l, v1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Placed) != tc.placed {
				t.Fatalf("placed %d, want %d", len(res.Placed), tc.placed)
			}
		})
	}
}
