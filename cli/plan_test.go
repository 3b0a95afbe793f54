package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/nomad/structs"
	psstructs "github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/scheduler"
)

func TestMetricReasons(t *testing.T) {
	cases := []struct {
		name string
		m    structs.AllocMetric
		want []string
	}{
		{"no node at all", structs.AllocMetric{NodesInPool: 0},
			[]string{"no ready, eligible node in the job's datacenters and node pool (0 node(s) in the pool)"}},
		{"device constraint or health", structs.AllocMetric{NodesEvaluated: 3, ConstraintFiltered: map[string]int{"missing devices": 3}},
			[]string{"3 node(s) have no healthy device instances that match the ask and meet its constraints (missing devices)"}},
		{"all slots held", structs.AllocMetric{NodesEvaluated: 1, DimensionExhausted: map[string]int{"devices: no devices match request": 1}},
			[]string{"1 node(s) have too few free device instances: the others are held or unhealthy (devices: no devices match request)"}},
		{"job constraint and memory, sorted", structs.AllocMetric{NodesEvaluated: 4,
			ConstraintFiltered: map[string]int{"${attr.kernel.name} = windows": 2, "missing drivers": 1},
			DimensionExhausted: map[string]int{"memory": 1}},
			[]string{
				"2 node(s) do not meet the constraint ${attr.kernel.name} = windows",
				"1 node(s) lack a healthy task driver (missing drivers)",
				"1 node(s) have too little memory left",
			}},
		{"class already ineligible", structs.AllocMetric{NodesEvaluated: 2, ConstraintFiltered: map[string]int{"computed class ineligible": 2}},
			[]string{"2 node(s) of a node class Nomad already found ineligible (computed class ineligible)"}},
		{"quota", structs.AllocMetric{NodesEvaluated: 1, QuotaExhausted: []string{"memory exhausted (2048 needed > 1024 limit)"}},
			[]string{"quota exhausted: memory exhausted (2048 needed > 1024 limit)"}},
		{"nothing recognised", structs.AllocMetric{NodesEvaluated: 2, NodesExhausted: 2},
			[]string{"Nomad evaluated 2 node(s), filtered 0, found 2 exhausted"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := metricReasons(&tc.m); !slices.Equal(got, tc.want) {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestExplainSlot(t *testing.T) {
	alloc := func(id, job, client string) *structs.Allocation {
		return &structs.Allocation{ID: id, JobID: job, ClientStatus: client}
	}
	const a1 = "574345d4-b43c-f9c9-8986-845a343b854b"
	cases := []struct {
		name  string
		use   scheduler.InstanceUse
		state string
		want  string
	}{
		{"free", scheduler.InstanceUse{ID: "s1", Healthy: true}, "free", "free"},
		{"unhealthy with its reason", scheduler.InstanceUse{ID: "s1", HealthDesc: "not mounted"}, "unhealthy", "unhealthy: not mounted"},
		{"unhealthy wins over a holder", scheduler.InstanceUse{ID: "s1", HealthDesc: "pool tank is SUSPENDED",
			Holders: []*structs.Allocation{alloc(a1, "web", "running")}}, "unhealthy", "unhealthy: pool tank is SUSPENDED"},
		{"unhealthy without a reason", scheduler.InstanceUse{ID: "s1"}, "unhealthy", "unhealthy: -"},
		{"held", scheduler.InstanceUse{ID: "s1", Healthy: true, Holders: []*structs.Allocation{alloc(a1, "web", "pending")}},
			"held", "held by allocation 574345d4 of job web (pending)"},
		{"stopping", scheduler.InstanceUse{ID: "s1", Healthy: true, Stopping: []*structs.Allocation{alloc(a1, "web", "running")}},
			"stopping", "free to Nomad, but allocation 574345d4 of job web is being stopped (running): a new holder gets it once its data is released"},
		{"ended", scheduler.InstanceUse{ID: "s1", Healthy: true, Ended: []*structs.Allocation{alloc(a1, "report", "complete")}},
			"free", "free (last held by allocation 574345d4 of job report, complete; released before it is handed over)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := explainSlot(tc.use)
			if got.State != tc.state || got.Reason != tc.want {
				t.Fatalf("got %s %q\nwant %s %q", got.State, got.Reason, tc.state, tc.want)
			}
		})
	}
}

func TestUnmetText(t *testing.T) {
	d := &structs.NodeDeviceResource{Vendor: "zfs", Type: "dataset", Name: "scratch", Attributes: map[string]*psstructs.Attribute{
		"quota": psstructs.NewIntAttribute(1024, psstructs.UnitMiB),
		"pool":  psstructs.NewStringAttribute("tank"),
	}}
	cases := []struct {
		name string
		c    structs.Constraint
		want string
	}{
		{"a quota too small", structs.Constraint{LTarget: "${device.attr.quota}", Operand: ">=", RTarget: "100 GiB"},
			"${device.attr.quota} >= 100 GiB (quota = 1024MiB)"},
		{"another pool", structs.Constraint{LTarget: "${device.attr.pool}", Operand: "=", RTarget: "fast"},
			"${device.attr.pool} = fast (pool = tank)"},
		{"an attribute not set", structs.Constraint{LTarget: "${device.attr.nvme}", Operand: "is_set"},
			"${device.attr.nvme} is_set (nvme is not set)"},
		{"not an attribute", structs.Constraint{LTarget: "${device.model}", Operand: "=", RTarget: "x"},
			"${device.model} = x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := unmetText(&tc.c, d); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// structsJob must carry every field placement reads from the job file into
// the servers' type: a field lost on the way would make plan's verdict
// differ from the servers'.
func TestParseJobFile(t *testing.T) {
	src := `job "web" {
  namespace   = "apps"
  datacenters = ["dc1", "dc2"]
  priority    = 70
  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }
  group "g" {
    count = 3
    network {
      port "http" {}
    }
    spread {
      attribute = "${node.datacenter}"
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
      resources {
        cpu    = 200
        memory = 128
        device "zfs/dataset/scratch" {
          count = 2
          constraint {
            attribute = "${device.attr.quota}"
            operator  = ">="
            value     = "10 GiB"
          }
          affinity {
            attribute = "${device.attr.pool}"
            value     = "fast"
            weight    = 50
          }
        }
      }
    }
  }
}`
	p := filepath.Join(t.TempDir(), "web.nomad.hcl")
	must(t, os.WriteFile(p, []byte(src), 0o644))
	j, err := parseJobFile(p, nil, nil)
	must(t, err)
	tg := j.TaskGroups[0]
	task := tg.Tasks[0]
	dev := task.Resources.Devices[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"namespace", j.Namespace, "apps"},
		{"node pool", j.NodePool, structs.NodePoolDefault},
		{"datacenters", strings.Join(j.Datacenters, ","), "dc1,dc2"},
		{"priority", j.Priority, 70},
		{"job constraint", j.Constraints[0].String(), "${attr.kernel.name} = linux"},
		{"count", tg.Count, 3},
		{"group port", tg.Networks[0].DynamicPorts[0].Label, "http"},
		{"spread", tg.Spreads[0].Attribute, "${node.datacenter}"},
		{"cpu", task.Resources.CPU, 200},
		{"memory", task.Resources.MemoryMB, 128},
		{"device", dev.Name, "zfs/dataset/scratch"},
		{"device count", dev.Count, uint64(2)},
		{"device constraint", dev.Constraints[0].String(), "${device.attr.quota} >= 10 GiB"},
		{"device affinity", dev.Affinities[0].String(), "${device.attr.pool} = fast 50"},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Fatalf("got %v, want %v", c.got, c.want)
			}
		})
	}
}

func TestParseJobFileErrors(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"HCL syntax", `job "x" {`, "job file "},
		{"no group", `job "x" {}`, "job x is not valid: "},
		{"unknown block", "job \"x\" {\n  grup \"g\" {}\n}", `Unsupported block type; Blocks of type "grup" are not expected here.`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bad.nomad.hcl")
			must(t, os.WriteFile(p, []byte(tc.src), 0o644))
			_, err := parseJobFile(p, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestPlanCommandErrors(t *testing.T) {
	job := filepath.Join(t.TempDir(), "web.nomad.hcl")
	must(t, os.WriteFile(job, []byte(`job "web" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
      resources {
        device "zfs/dataset/scratch" {}
      }
    }
  }
}`), 0o644))
	down := agentFile(t, t.TempDir(), pluginBody("tank/nomad", closedAddr(t), "", ""))
	denied := newFakeNomad(t)
	deniedCfg := agentFile(t, t.TempDir(), pluginBody("tank/nomad", denied.URL(), `token = "`+tokenNoNode+`"`, ""))
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no job file", []string{"plan", "-config", down}, `plan takes one job file, got []`},
		{"two job files", []string{"plan", "-config", down, job, job}, `plan takes one job file, got [`},
		{"missing job file", []string{"plan", "-config", down, "/nonexistent.hcl"}, "✗ job file: open /nonexistent.hcl: no such file or directory"},
		{"API down", []string{"plan", "-config", down, job}, "is down (connection refused)"},
		{"token without node:read", []string{"plan", "-config", deniedCfg, job},
			`✗ the Nomad API at ` + denied.URL() + `: listing nodes: the token is denied; plan needs node { policy = "read" } and namespace "*" { capabilities = ["read-job"] }`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, &env{}, tc.args...)
			if code != 1 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, stderr, tc.want)
			}
		})
	}
}

func TestNodeExcluded(t *testing.T) {
	job := &structs.Job{Datacenters: []string{"dc1", "edge-*"}, NodePool: "zfs"}
	ready := structs.Node{Status: structs.NodeStatusReady, SchedulingEligibility: structs.NodeSchedulingEligible,
		Datacenter: "dc1", NodePool: "zfs"}
	cases := []struct {
		name string
		edit func(n *structs.Node)
		pool string
		want string
	}{
		{"considered", func(*structs.Node) {}, "", ""},
		{"a datacenter glob", func(n *structs.Node) { n.Datacenter = "edge-3" }, "", ""},
		{"down", func(n *structs.Node) { n.Status = structs.NodeStatusDown }, "", "the node is down"},
		{"draining", func(n *structs.Node) { n.DrainStrategy = &structs.DrainStrategy{} }, "", "the node is draining"},
		{"ineligible", func(n *structs.Node) { n.SchedulingEligibility = structs.NodeSchedulingIneligible }, "",
			"the node is ineligible for scheduling"},
		{"another datacenter", func(n *structs.Node) { n.Datacenter = "dc2" }, "",
			"the node is in datacenter dc2, not among the job's dc1, edge-*"},
		{"another pool", func(n *structs.Node) { n.NodePool = "default" }, "", "the node is in node pool default, the job in zfs"},
		{"the all pool", func(n *structs.Node) { n.NodePool = "default" }, structs.NodePoolAll, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, j := ready, *job
			tc.edit(&n)
			if tc.pool != "" {
				j.NodePool = tc.pool
			}
			if got := nodeExcluded(&n, &j); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
