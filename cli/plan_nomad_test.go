package cli

// plan against a real Nomad v1.11.3 agent running the plugin over the fake
// ZFS (two scratch slots of quota 1G), with the plugin's least-privilege
// token: a job that fits, one whose device constraint the slots do not
// meet, one that finds both slots unhealthy, one that finds them held, and
// the running job updated. Every verdict is checked against the servers'
// own Job.Plan.

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/jobspec2"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// planJob is a service job whose group g asks for one scratch slot per
// allocation; extra goes into the device block.
func planJob(name string, count int, extra string) string {
	return `job "` + name + `" {
  group "g" {
    count = ` + strconv.Itoa(count) + `
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "exec sleep 600"]
      }
      resources {
        device "zfs/dataset/scratch" {
          ` + extra + `
        }
      }
    }
  }
}`
}

func writeJob(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "job.nomad.hcl")
	must(t, os.WriteFile(p, []byte(src), 0o644))
	return p
}

// serversAgree asks the agent's servers through Job.Plan, what `nomad job
// plan` calls, with the management token: plan's verdict, and each of
// Nomad's reasons for a failed group, must be theirs.
func serversAgree(t *testing.T, a *cliAgent, path string, rep planReport) {
	t.Helper()
	aj, err := jobspec2.ParseWithConfig(&jobspec2.ParseConfig{Path: path, Body: []byte(readFile(t, path)), Strict: true})
	must(t, err)
	resp, _, err := a.Client().Jobs().Plan(aj, false, nil)
	must(t, err)
	if rep.Placeable != (len(resp.FailedTGAllocs) == 0) {
		t.Fatalf("plan says placeable=%v, the servers' Job.Plan failed groups %v", rep.Placeable, resp.FailedTGAllocs)
	}
	for _, g := range rep.Groups {
		if u := resp.Annotations.DesiredTGUpdates[g.Name]; u == nil || int(u.Place+u.DestructiveUpdate) != len(g.Placed)+g.Missing {
			t.Errorf("group %s: plan places %d and misses %d; the servers' reconciler wants %+v", g.Name, len(g.Placed), g.Missing, u)
		}
		m := resp.FailedTGAllocs[g.Name]
		if m == nil {
			continue
		}
		reasons := strings.Join(g.Reasons, "\n")
		for k := range m.ConstraintFiltered {
			if !strings.Contains(reasons, k) {
				t.Errorf("the servers filtered nodes for %q; plan's reasons: %s", k, reasons)
			}
		}
		for k := range m.DimensionExhausted {
			if !strings.Contains(reasons, k) {
				t.Errorf("the servers found %q exhausted; plan's reasons: %s", k, reasons)
			}
		}
	}
}

// planBoth runs plan, as text and as JSON, and checks the servers agree.
func planBoth(t *testing.T, a *cliAgent, path string) (code int, out string) {
	t.Helper()
	code, out = a.run(t, "plan", "-config", a.ConfigFile(), path)
	jcode, jout := a.run(t, "plan", "-config", a.ConfigFile(), "-json", path)
	if jcode != code {
		t.Fatalf("plan -json exit %d, plan exit %d", jcode, code)
	}
	serversAgree(t, a, path, decodeJSON[planReport](t, jout))
	return code, out
}

func TestPlanNomadAgent(t *testing.T) {
	t.Parallel() // its own agent, ports and fake host: the package's two agent tests overlap
	a := startCLIAgent(t)
	cfg := a.ConfigFile()
	node, _, err := a.Client().Nodes().Info(a.NodeID(), nil)
	must(t, err)
	var slots []string
	for _, d := range node.NodeResources.Devices {
		if d.Name == "scratch" {
			for _, in := range d.Instances {
				slots = append(slots, in.ID)
			}
		}
	}
	slices.Sort(slots)
	if len(slots) != 2 {
		t.Fatalf("the node has slots %q, want 2", slots)
	}
	nodeRef := node.Name + " (" + node.ID[:8] + ")"

	t.Run("a job that fits gets a node and a slot", func(t *testing.T) {
		code, out := planBoth(t, a, writeJob(t, planJob("fits", 2, "")))
		if code != 0 || !strings.Contains(out, "✓ every allocation of job fits can be placed now.") {
			t.Fatalf("exit %d", code)
		}
		got := regexp.MustCompile(`✓ fits\.g\[\d\] on node `+regexp.QuoteMeta(nodeRef)+`: task server: slot (\S+)`).FindAllStringSubmatch(out, -1)
		if len(got) != 2 {
			t.Fatalf("want two placements on %s", nodeRef)
		}
		placed := []string{got[0][1], got[1][1]}
		slices.Sort(placed)
		if !slices.Equal(placed, slots) {
			t.Fatalf("placed on slots %q, want each of %q once", placed, slots)
		}
	})

	t.Run("a device constraint the slots do not meet", func(t *testing.T) {
		job := planJob("big", 1, `constraint {
            attribute = "${device.attr.quota}"
            operator  = ">="
            value     = "100 GiB"
          }`)
		code, out := planBoth(t, a, writeJob(t, job))
		for _, want := range []string{
			"✗ 1 allocation(s) cannot be placed. Nomad:",
			"1 node(s) have no healthy device instances that match the ask and meet its constraints (missing devices)",
			"node " + nodeRef + ", task server asks 1 × zfs/dataset/scratch: 2 free",
			"constraint not met: ${device.attr.quota} >= 100 GiB (quota = 1024MiB)",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		if code != exitNotPlaceable {
			t.Fatalf("exit %d, want %d", code, exitNotPlaceable)
		}
	})

	t.Run("every slot unhealthy, with the plugin's reason", func(t *testing.T) {
		must(t, a.f.SetPoolHealth("tank", "DEGRADED"))
		reason := `pool "tank" is DEGRADED`
		a.WaitForUnhealthy(t, "zfs", "dataset", "scratch", reason, 60*time.Second)
		code, out := planBoth(t, a, writeJob(t, planJob("sick", 1, "")))
		must(t, a.f.SetPoolHealth("tank", "ONLINE"))
		for _, want := range []string{
			"1 node(s) have no healthy device instances that match the ask and meet its constraints (missing devices)",
			"node " + nodeRef + ", task server asks 1 × zfs/dataset/scratch: 0 free",
			slots[0] + " unhealthy: " + reason,
			slots[1] + " unhealthy: " + reason,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		if code != exitNotPlaceable {
			t.Fatalf("exit %d, want %d", code, exitNotPlaceable)
		}
		a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 2, 60*time.Second)
	})

	t.Run("every slot held by a running job", func(t *testing.T) {
		j := a.RunJob(t, planJob("hold", 2, ""))
		stubs := a.WaitAllocs(t, *j.ID, nomadtest.AllocsWithStatus(2, api.AllocClientStatusRunning), 90*time.Second)
		holder := map[string]string{}
		for _, s := range stubs {
			holder[a.slotOfAlloc(t, s.ID)] = s.ID
		}
		path := writeJob(t, planJob("more", 1, ""))
		code, out := planBoth(t, a, path)
		if code != exitNotPlaceable || !strings.Contains(out, "✗ 1 allocation(s) of job more cannot be placed now.") {
			t.Fatalf("exit %d, want %d", code, exitNotPlaceable)
		}
		if !strings.Contains(out, "1 node(s) have too few free device instances: the others are held or unhealthy (devices: no devices match request)") {
			t.Error("Nomad's reason is missing")
		}
		for _, slot := range slots {
			want := slot + " held by allocation " + holder[slot][:8] + " of job hold (running)"
			if !regexp.MustCompile(`(?m)^ +` + regexp.QuoteMeta(want) + `$`).MatchString(out) {
				t.Errorf("output lacks %q", want)
			}
		}

		code, out = a.run(t, "plan", "-config", cfg, "-json", path)
		rep := decodeJSON[planReport](t, out)
		if code != exitNotPlaceable || rep.Placeable || len(rep.Groups) != 1 || rep.Groups[0].Missing != 1 || len(rep.Groups[0].Nodes) != 1 {
			t.Fatalf("exit %d, report %+v", code, rep)
		}
		ask := rep.Groups[0].Nodes[0].Asks[0]
		if ask.Free != 0 || len(ask.Slots) != 2 {
			t.Fatalf("ask %+v, want 2 slots, none free", ask)
		}
		for _, s := range ask.Slots {
			if s.State != "held" || s.Alloc != holder[s.ID] || s.JobID != "hold" {
				t.Errorf("slot %+v, want held by %s of job hold", s, holder[s.ID])
			}
		}
	})

	t.Run("the running job: unchanged, then updated destructively", func(t *testing.T) {
		code, out := planBoth(t, a, writeJob(t, planJob("hold", 2, "")))
		if code != 0 || !strings.Contains(out, `Group "g": 0 to place, 2 running kept`) {
			t.Fatalf("exit %d, want nothing to place and 2 kept", code)
		}
		// A new task config replaces the allocations, max_parallel (1) at
		// a time: the servers stop one and, in the same plan, give its slot
		// to its replacement while it may still run.
		path := writeJob(t, strings.Replace(planJob("hold", 2, ""), "sleep 600", "sleep 601", 1))
		code, text := planBoth(t, a, path)
		if code != 0 || !strings.Contains(text, `Group "g": 1 to place, 1 running kept`) || !strings.Contains(text, "The plan stops 1 allocation(s)") {
			t.Fatalf("exit %d, want one allocation replaced", code)
		}
		_, out = a.run(t, "plan", "-config", cfg, "-json", path)
		rep := decodeJSON[planReport](t, out)
		if len(rep.Stopped) != 1 || len(rep.Groups[0].Placed) != 1 {
			t.Fatalf("stopped %q, placed %+v", rep.Stopped, rep.Groups[0].Placed)
		}
		p := rep.Groups[0].Placed[0]
		slot := a.slotOfAlloc(t, rep.Stopped[0])
		if got := p.Devices["server"]; len(got) != 1 || got[0] != slot {
			t.Fatalf("the replacement gets %q, want the stopped allocation's slot %s", got, slot)
		}
		want := slot + ": allocation " + rep.Stopped[0][:8] + " of job hold still holds it (running, being stopped); the plugin hands it over once its data is released"
		if len(p.Handovers) != 1 || p.Handovers[0] != want || !strings.Contains(text, "      slot "+want+"\n") {
			t.Fatalf("handovers %q, want %q, in the text too", p.Handovers, want)
		}
	})
}
