package scheduler

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/nomad/structs"
)

const nodeID = "00000000-0000-4000-8000-000000000001"

// slots builds a node with one class of n instances; unhealthy lists the
// 1-based instances that are not healthy.
func slots(class string, n int, unhealthy ...int) Node {
	g := DeviceGroup{Class: class, Attributes: map[string]string{"pool": "tank"}}
	for i := 1; i <= n; i++ {
		in := Instance{ID: fmt.Sprintf("%s-%d", class, i), Healthy: true}
		for _, u := range unhealthy {
			if u == i {
				in.Healthy, in.HealthDesc = false, "releasing"
			}
		}
		g.Instances = append(g.Instances, in)
	}
	return Node{ID: nodeID, Name: "n1", Devices: []DeviceGroup{g}}
}

func job(id string, count, priority int, asks ...Ask) Job {
	return Job{ID: id, Priority: priority, Groups: []Group{{Name: "g", Count: count,
		Tasks: []Task{{Name: "main", Version: "1", Devices: asks}}}}}
}

func newCluster(t *testing.T, n Node, preempt bool) *Cluster {
	t.Helper()
	ids := 0
	c, err := New(Options{Preemption: preempt, AllocID: func() string {
		ids++
		return fmt.Sprintf("00000000-0000-4000-800a-%012x", ids)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UpsertNode(n); err != nil {
		t.Fatal(err)
	}
	return c
}

func register(t *testing.T, c *Cluster, j Job) Eval {
	t.Helper()
	ev, err := c.Register(j)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func setStatus(t *testing.T, c *Cluster, id, status string) {
	t.Helper()
	if _, err := c.UpdateAllocClient(id, status, map[string]string{"main": "running"}); err != nil {
		t.Fatal(err)
	}
}

// ids lists every instance the placements got, sorted.
func ids(ps []Placement) []string {
	var out []string
	for _, p := range ps {
		for _, d := range p.Devices {
			out = append(out, d...)
		}
	}
	sort.Strings(out)
	return out
}

func reasons(ev Eval) string {
	var out []string
	for _, f := range ev.Failed {
		for r := range f.Reasons {
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// TestDeviceIsFreeOnlyWhenClientTerminal: Nomad frees an instance as soon
// as its holder is client-terminal, and not before (DeviceAccounter).
func TestDeviceIsFreeOnlyWhenClientTerminal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status string
		free   bool
	}{
		{name: "pending holds", status: structs.AllocClientStatusPending},
		{name: "running holds", status: structs.AllocClientStatusRunning},
		{name: "unknown holds", status: structs.AllocClientStatusUnknown},
		{name: "complete frees", status: structs.AllocClientStatusComplete, free: true},
		{name: "failed frees", status: structs.AllocClientStatusFailed, free: true},
		{name: "lost frees", status: structs.AllocClientStatusLost, free: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, slots("pg", 1), false)
			a := register(t, c, Job{ID: "a", Batch: true, Groups: []Group{{Name: "g", Count: 1,
				Tasks: []Task{{Name: "main", Version: "1", Devices: []Ask{{Class: "pg", Count: 1}}}}}}})
			if len(a.Placed) != 1 {
				t.Fatalf("a not placed: %+v", a)
			}
			if tc.status != structs.AllocClientStatusPending {
				setStatus(t, c, a.Placed[0].AllocID, tc.status)
			}
			b := register(t, c, job("b", 1, 50, Ask{Class: "pg", Count: 1}))
			if got := len(b.Placed) == 1; got != tc.free {
				t.Fatalf("b placed = %v, want %v (%s)", got, tc.free, reasons(b))
			}
			if tc.free && ids(b.Placed)[0] != "pg-1" {
				t.Fatalf("b got %v", ids(b.Placed))
			}
			if !tc.free && !strings.Contains(reasons(b), "devices") {
				t.Fatalf("reason = %q, want a devices reason", reasons(b))
			}
		})
	}
}

// TestPlacement covers the plan shapes the plugin must survive.
func TestPlacement(t *testing.T) {
	for _, tc := range []struct {
		name    string
		node    Node
		preempt bool
		run     func(t *testing.T, c *Cluster)
	}{
		{name: "destructive update stops and places on the same slot in one plan", node: slots("pg", 1),
			run: func(t *testing.T, c *Cluster) {
				v1 := register(t, c, job("web", 1, 50, Ask{Class: "pg", Count: 1}))
				setStatus(t, c, v1.Placed[0].AllocID, structs.AllocClientStatusRunning)
				j := job("web", 1, 50, Ask{Class: "pg", Count: 1})
				j.Groups[0].Tasks[0].Version = "2"
				v2 := register(t, c, j)
				if len(v2.Placed) != 1 || len(v2.Stopped) != 1 || v2.Stopped[0] != v1.Placed[0].AllocID {
					t.Fatalf("v2 = %+v, want one stop of %s and one placement", v2, v1.Placed[0].AllocID)
				}
				if got := ids(v2.Placed); got[0] != "pg-1" {
					t.Fatalf("replacement got %v, want pg-1 (its predecessor's)", got)
				}
				old := c.Alloc(v1.Placed[0].AllocID)
				if old.DesiredStatus != structs.AllocDesiredStatusStop || old.ClientStatus != structs.AllocClientStatusRunning {
					t.Fatalf("predecessor is %s/%s, want stop/running", old.DesiredStatus, old.ClientStatus)
				}
			}},
		{name: "in-place update keeps the allocation and its slot", node: slots("pg", 2),
			run: func(t *testing.T, c *Cluster) {
				v1 := register(t, c, job("web", 1, 50, Ask{Class: "pg", Count: 1}))
				j := job("web", 1, 50, Ask{Class: "pg", Count: 1})
				j.Groups[0].Tasks[0].KillTimeout = 42e9
				v2 := register(t, c, j)
				if len(v2.Placed) != 0 || len(v2.Stopped) != 0 {
					t.Fatalf("v2 = %+v, want an in-place update", v2)
				}
				a := c.Alloc(v1.Placed[0].AllocID)
				if a.Job.Version != 1 || a.DesiredStatus != structs.AllocDesiredStatusRun {
					t.Fatalf("alloc at job version %d, %s", a.Job.Version, a.DesiredStatus)
				}
			}},
		{name: "a higher priority job preempts the holder and takes its slot", node: slots("pg", 1), preempt: true,
			run: func(t *testing.T, c *Cluster) {
				low := register(t, c, job("low", 1, 20, Ask{Class: "pg", Count: 1}))
				setStatus(t, c, low.Placed[0].AllocID, structs.AllocClientStatusRunning)
				high := register(t, c, job("high", 1, 90, Ask{Class: "pg", Count: 1}))
				if len(high.Placed) != 1 || len(high.Preempted) != 1 || high.Preempted[0] != low.Placed[0].AllocID {
					t.Fatalf("high = %+v (%s), want it placed preempting %s", high, reasons(high), low.Placed[0].AllocID)
				}
				if got := ids(high.Placed); got[0] != "pg-1" {
					t.Fatalf("high got %v", got)
				}
				if a := c.Alloc(low.Placed[0].AllocID); a.DesiredStatus != structs.AllocDesiredStatusEvict {
					t.Fatalf("preempted alloc desired %s", a.DesiredStatus)
				}
			}},
		{name: "count 2 ask gets two distinct instances", node: slots("pg", 3),
			run: func(t *testing.T, c *Cluster) {
				ev := register(t, c, job("two", 1, 50, Ask{Class: "pg", Count: 2}))
				if got := ids(ev.Placed); len(got) != 2 || got[0] == got[1] {
					t.Fatalf("got %v", got)
				}
			}},
		{name: "two tasks of one group asking one class get distinct instances", node: slots("pg", 2),
			run: func(t *testing.T, c *Cluster) {
				j := job("pair", 1, 50)
				j.Groups[0].Tasks = []Task{
					{Name: "a", Version: "1", Devices: []Ask{{Class: "pg", Count: 1}}},
					{Name: "b", Version: "1", Devices: []Ask{{Class: "pg", Count: 1}}},
					{Name: "init", Version: "1", Prestart: true},
				}
				ev := register(t, c, j)
				if got := ids(ev.Placed); len(got) != 2 || got[0] == got[1] {
					t.Fatalf("got %v (%s)", got, reasons(ev))
				}
			}},
		{name: "offers inside one plan account for each other", node: slots("pg", 3),
			run: func(t *testing.T, c *Cluster) {
				ev := register(t, c, job("many", 4, 50, Ask{Class: "pg", Count: 1}))
				got := ids(ev.Placed)
				if len(got) != 3 || got[0] == got[1] || got[1] == got[2] {
					t.Fatalf("got %v, want pg-1..3 once each", got)
				}
				if f := ev.Failed["g"]; f.Missing != 1 || !strings.Contains(reasons(ev), "devices") {
					t.Fatalf("failed = %+v", ev.Failed)
				}
			}},
		{name: "an unhealthy instance is never offered", node: slots("pg", 2, 1),
			run: func(t *testing.T, c *Cluster) {
				ev := register(t, c, job("one", 2, 50, Ask{Class: "pg", Count: 1}))
				if got := ids(ev.Placed); len(got) != 1 || got[0] != "pg-2" {
					t.Fatalf("got %v", got)
				}
			}},
		{name: "an attribute constraint that no class meets places nothing", node: slots("pg", 2),
			run: func(t *testing.T, c *Cluster) {
				ev := register(t, c, job("c", 1, 50, Ask{Class: "pg", Count: 1, Constraints: [][3]string{{"pool", "=", "other"}}}))
				if len(ev.Placed) != 0 || !strings.Contains(reasons(ev), "missing devices") {
					t.Fatalf("ev = %+v (%s)", ev, reasons(ev))
				}
			}},
		{name: "a class the node lacks places nothing", node: slots("pg", 2),
			run: func(t *testing.T, c *Cluster) {
				ev := register(t, c, job("c", 1, 50, Ask{Class: "scratch", Count: 1}))
				if len(ev.Placed) != 0 || !strings.Contains(reasons(ev), "missing devices") {
					t.Fatalf("ev = %+v (%s)", ev, reasons(ev))
				}
			}},
		{name: "a lost holder's slot goes to its replacement while it may still run", node: slots("pg", 1),
			run: func(t *testing.T, c *Cluster) {
				a := register(t, c, job("web", 1, 50, Ask{Class: "pg", Count: 1}))
				setStatus(t, c, a.Placed[0].AllocID, structs.AllocClientStatusRunning)
				if _, err := c.SetNodeStatus(nodeID, structs.NodeStatusDown); err != nil {
					t.Fatal(err)
				}
				if got := c.Alloc(a.Placed[0].AllocID).ClientStatus; got != structs.AllocClientStatusLost {
					t.Fatalf("holder is %s, want lost", got)
				}
				evs, err := c.SetNodeStatus(nodeID, structs.NodeStatusReady)
				if err != nil {
					t.Fatal(err)
				}
				var placed []Placement
				for _, ev := range evs {
					placed = append(placed, ev.Placed...)
				}
				if got := ids(placed); len(got) != 1 || got[0] != "pg-1" {
					t.Fatalf("replacement got %v", got)
				}
			}},
		{name: "a disconnected holder goes unknown and keeps its slot", node: slots("pg", 1),
			run: func(t *testing.T, c *Cluster) {
				j := job("web", 1, 50, Ask{Class: "pg", Count: 1})
				j.Groups[0].LostAfter = 3600e9
				a := register(t, c, j)
				setStatus(t, c, a.Placed[0].AllocID, structs.AllocClientStatusRunning)
				if _, err := c.SetNodeStatus(nodeID, structs.NodeStatusDisconnected); err != nil {
					t.Fatal(err)
				}
				if got := c.Alloc(a.Placed[0].AllocID).ClientStatus; got != structs.AllocClientStatusUnknown {
					t.Fatalf("holder is %s, want unknown", got)
				}
				b := register(t, c, job("other", 1, 50, Ask{Class: "pg", Count: 1}))
				if len(b.Placed) != 0 {
					t.Fatalf("other placed on %v while the holder is unknown", ids(b.Placed))
				}
			}},
		{name: "garbage-collected allocations are gone", node: slots("pg", 1),
			run: func(t *testing.T, c *Cluster) {
				a := register(t, c, Job{ID: "b", Batch: true, Groups: []Group{{Name: "g", Count: 1,
					Tasks: []Task{{Name: "main", Version: "1", Devices: []Ask{{Class: "pg", Count: 1}}}}}}})
				id := a.Placed[0].AllocID
				if err := c.GC(id); err == nil {
					t.Fatal("GC of a pending allocation succeeded")
				}
				setStatus(t, c, id, structs.AllocClientStatusComplete)
				if err := c.GC(id); err != nil {
					t.Fatal(err)
				}
				if c.Alloc(id) != nil || len(c.Allocs(nodeID)) != 0 {
					t.Fatal("allocation still there after GC")
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newCluster(t, tc.node, tc.preempt))
		})
	}
}
