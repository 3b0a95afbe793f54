//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// partitionJob is one scenario of TestPartitionReconnect: a service whose
// allocation runs on node 1 when node 1 is cut off.
type partitionJob struct {
	id string
	// lostAfter and reconcile are the group's disconnect { lost_after,
	// reconcile } (Nomad 1.8); before 1.8 max_client_disconnect =
	// lostAfter, whose reconnect is best_score's ("" here).
	lostAfter, reconcile string
	// keep is the allocation Nomad must run after the reconnect:
	// "original", "replacement", or "" for Nomad's choice (best_score).
	keep string
	// lost: the original turns lost while cut off (lost_after passes).
	lost bool
	// stanza is the group's disconnect stanza for the agent under test.
	stanza string
}

var partitionJobs = []partitionJob{
	{id: "keep-original", lostAfter: "1h", reconcile: "keep_original", keep: "original"},
	{id: "keep-replacement", lostAfter: "1h", reconcile: "keep_replacement", keep: "replacement"},
	{id: "best-score", lostAfter: "1h", reconcile: "best_score"},
	{id: "lost", lostAfter: "20s", keep: "replacement", lost: true},
}

// partitionJobsFor are the scenarios the agent under test can express,
// each with its group stanza; the others are logged as skipped, with the
// Nomad version they need (keep_original and keep_replacement came with
// the disconnect block in 1.8).
func partitionJobsFor(t *testing.T) []partitionJob {
	t.Helper()
	v, err := nomadtest.AgentVersion(nomadBin)
	if err != nil {
		t.Fatal(err)
	}
	var out []partitionJob
	for _, j := range partitionJobs {
		stanza, err := nomadtest.GroupDisconnect(v, j.lostAfter, j.reconcile)
		if err != nil {
			t.Logf("scenario %s skipped: %v", j.id, err)
			continue
		}
		j.stanza = stanza
		out = append(out, j)
	}
	return out
}

// tokenScript writes the allocation's token into its slot, says what it
// found there first, and then checks every second that the token is still
// there. Stopped, it takes 5 s to shut down, as a database flushing its
// data would, checking every half second, and once more as it exits. It
// writes all of it to data.log in its alloc dir, which the test reads on
// the host: a node's agent does not answer while it is frozen. The data
// decides, not the plugin's own records: a slot released while its holder
// runs (rolled back: the class's policy) shows as TOKEN GONE. (Without the
// shutdown, a lost allocation taken for ended went unseen: the client
// killed it within a second of the thaw, before the rollback landed.) A
// raw_exec task (the slot at ZFS_STATE_HOST_PATH): it starts in a fraction
// of an exec task's time, which builds a chroot first.
const tokenScript = `d=$ZFS_STATE_HOST_PATH; f=$d/token-$NOMAD_ALLOC_ID; log=$NOMAD_ALLOC_DIR/data.log; ` +
	`trap 'i=0; while [ $i -lt 10 ]; do [ -e "$f" ] || echo "TOKEN GONE while stopping" >> "$log"; sleep 0.5; i=$((i+1)); done; ` +
	`if [ -e "$f" ]; then echo "exit: token present"; else echo "exit: TOKEN GONE"; fi >> "$log"; exit 0' INT TERM; ` +
	`echo "found: [$(ls -A "$d" | tr '\n' ' ')]" >> "$log"; ` +
	`echo "$NOMAD_ALLOC_ID" > "$f" && echo "wrote token" >> "$log"; ` +
	`while :; do [ -e "$f" ] || echo "TOKEN GONE at $(date +%s)" >> "$log"; sleep 1; done`

// partitionService is job j: one raw_exec task on a slot of class "state"
// running tokenScript, drawn to node by an affinity (its replacement goes
// elsewhere while node is cut off), with j's disconnect block. Its
// replacement is placed 5 s after the original is lost or unknown (the
// default policy waits 30 s), once the job's deployment has ended: Nomad
// does not replace an unknown allocation of an active deployment (see
// waitDeployed).
func partitionService(j partitionJob, node string) string {
	return fmt.Sprintf(`job %q {
  type = "service"
  group "g" {
    %s
    reschedule {
      delay          = "5s"
      delay_function = "constant"
      unlimited      = true
    }
    affinity {
      attribute = "${node.unique.id}"
      value     = %q
      weight    = 100
    }
    task "t" {
      driver = "raw_exec"
      # The trap takes 5 s on an idle guest; the default kill_timeout,
      # 5 s, killed a plain exit before it on a saturated one.
      kill_timeout = "2m"
      config {
        command = "/bin/sh"
        args    = ["-c", %q]
      }
      resources {
        cpu    = 50
        memory = 64
        device "zfs/dataset/state" {}
      }
    }
  }
}`, j.id, j.stanza, node, tokenScript)
}

// rollbackState is the class of the partition tests: a release rolls the
// slot back in place, which works on a mounted dataset in use, so a
// release while the holder still runs would wipe its data under it.
const rollbackState = `class "state" {
  slots = 4
  mount = "/data"
  release {
    policy = "rollback"
  }
}`

// heldSlot is an allocation, the node it ran on, and its slot as it was
// while the allocation ran.
type heldSlot struct {
	alloc *api.Allocation
	node  *clusterNode
	ds    string
	gen   int
}

// log is the allocation's data.log (tokenScript).
func (h heldSlot) log() string {
	b, _ := os.ReadFile(allocFile(h.node.Agent, h.alloc.ID, "data.log"))
	return string(b)
}

func (h heldSlot) String() string {
	return fmt.Sprintf("%s (%s on %s)", h.alloc.ID[:8], h.ds, h.node.Pool.Name)
}

// waitToken waits until job has a running allocation on node n, none of
// skip, whose task has written its token, and checks that the task found
// its slot empty.
func waitToken(t *testing.T, server *nomadtest.Agent, n *clusterNode, job string, timeout time.Duration, skip ...string) heldSlot {
	t.Helper()
	var h heldSlot
	waitFor(t, timeout, fmt.Sprintf("job %s running on %s with its token written", job, n.Pool.Name), func() (bool, string) {
		stubs, _, err := server.Client().Jobs().Allocations(job, true, nil)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range stubs {
			if s.NodeID != n.NodeID() || contains(skip, s.ID) || s.ClientStatus != api.AllocClientStatusRunning {
				continue
			}
			h = heldSlot{alloc: allocInfo(t, server, s.ID), node: n}
			return strings.Contains(h.log(), "wrote token"), "data.log: " + h.log()
		}
		return false, fmt.Sprintf("allocations: %d, none running on %s", len(stubs), n.Pool.Name)
	})
	h.ds = n.Pool.Parent + "/state/" + deviceID(t, h.alloc)
	waitHolder(t, h.ds, h.alloc.ID)
	h.gen = generation(mustLookup(t, h.ds))
	if log := h.log(); !strings.Contains(log, "found: []") {
		t.Errorf("%s did not find its slot empty: %s", h, log)
	}
	return h
}

// checkIntact checks from the data that h's token is in its slot and the
// task never saw it gone.
func checkIntact(t *testing.T, h heldSlot, when string) {
	t.Helper()
	if got, err := readFileErr("/" + h.ds + "/token-" + h.alloc.ID); strings.TrimSpace(got) != h.alloc.ID {
		t.Errorf("%s: %s: token-%s = %q (%v), want the allocation's ID", when, h, h.alloc.ID, got, err)
	}
	if log := h.log(); strings.Contains(log, "TOKEN GONE") || strings.Count(log, "wrote token") != 1 {
		t.Errorf("%s: %s: data.log:\n%s", when, h, log)
	}
}

// checkEndedThenReleased checks that h's task ended with its token in
// place (nothing was released under it), then waits until its slot is
// released: rolled back, the token gone.
func checkEndedThenReleased(t *testing.T, h heldSlot) {
	t.Helper()
	switch log := h.log(); {
	case !strings.Contains(log, "exit: "):
		t.Errorf("%s: ended without its last check (killed before its trap ran?); data.log:\n%s", h, log)
	case !strings.Contains(log, "exit: token present") || strings.Contains(log, "TOKEN GONE"):
		t.Errorf("%s: its slot was released while it ran; data.log:\n%s", h, log)
	}
	waitReleased(t, h.ds, h.gen)
	checkEntries(t, "/"+h.ds)
}

// checkNoLeak checks every node's class datasets: the slots state-1..4,
// each ready or held by an allocation the server says runs, and nothing
// else (no parked, retained or releasing data).
func checkNoLeak(t *testing.T, c *testCluster) {
	t.Helper()
	for _, n := range c.Nodes {
		classDS := n.Pool.Parent + "/state"
		all, err := lookupAll(classDS)
		if err != nil {
			t.Fatalf("zfs list %s: %v", classDS, err)
		}
		for _, name := range keys(all) {
			d := all[name]
			if name == classDS || d.IsSnapshot() {
				continue
			}
			switch st, holder := d.User.Get(propState), d.User.Get(propHolder); {
			case !strings.HasPrefix(name, classDS+"/state-"):
				t.Errorf("%s: left behind (%s)", name, describeSlot(d))
			case st == "ready":
			case st == "held":
				if al, _, err := c.Server.Client().Allocations().Info(holder, nil); err != nil || al.ClientStatus != api.AllocClientStatusRunning {
					t.Errorf("%s: held by %s, which does not run (%v)", name, holder, err)
				}
			default:
				t.Errorf("%s: %s", name, describeSlot(d))
			}
		}
	}
}

// partitionHeartbeats detect a silent node within about 10-20 s on an idle
// guest: a TTL of 5 s (plus up to 5 s of stagger) and 10 s of grace,
// stretched by the guest's slowness.
var partitionHeartbeats = heartbeats{MinTTL: 5 * time.Second, Grace: 10 * time.Second}

// disconnectTimeout bounds the wait for the server to notice a silent
// node: its TTL with stagger, the grace, margin.
const disconnectTimeout = 90 * time.Second

// replaceTimeout bounds a replacement's start elsewhere: the reschedule
// delay, then a job's start.
const replaceTimeout = 5*time.Second + jobTimeout

// TestPartitionReconnect: a real cluster (a server and two client nodes,
// each with the plugin and its own pool) in which node 1 is cut off while
// four services run there: its agent is stopped with SIGSTOP, so the
// servers hear nothing from it while its plugin and tasks run on. Three
// have disconnect { lost_after = "1h" } with reconcile keep_original,
// keep_replacement and best_score; the fourth has lost_after = "20s" and
// turns lost. Before Nomad 1.8 (no disconnect block) two run:
// max_client_disconnect = "1h" (best_score) and "20s" (lost). Each gets a replacement on node 2. Then node 1's agent
// resumes. Checked from the data (a token file each task writes into its
// slot and watches): nothing of a live allocation is wiped while node 1
// is cut off; afterwards the allocation Nomad keeps still has its data,
// and the one it stops (on node 1 or 2), and the lost one, had theirs
// until their tasks ended, and their slots are released then; node 1's
// plugin is the same process throughout and resumes by itself; nothing is
// left behind. The record of what the agents showed goes to the test log
// (see timeline), and docs/lifecycle.md holds it against the simulation.
func TestPartitionReconnect(t *testing.T) {
	t.Parallel()
	c := startCluster(t, partitionHeartbeats,
		nodeSpec{Pool: "e2epart1", Classes: rollbackState}, nodeSpec{Pool: "e2epart2", Classes: rollbackState})
	n1, n2 := c.Nodes[0], c.Nodes[1]
	partitionJobs := partitionJobsFor(t)
	var ids []string
	for _, j := range partitionJobs {
		ids = append(ids, j.id)
	}
	stopAtCleanup(t, c.Server, ids...)
	tl := startTimeline(t, c, ids...)
	n1.WaitForNodeDevice(t, "zfs", "dataset", "state", 4, deviceTimeout)
	n2.WaitForNodeDevice(t, "zfs", "dataset", "state", 4, deviceTimeout)

	for _, j := range partitionJobs {
		c.Server.RunJob(t, partitionService(j, n1.NodeID()))
	}
	orig := map[string]heldSlot{}
	for _, j := range partitionJobs {
		orig[j.id] = waitToken(t, c.Server, n1, j.id, jobTimeout)
	}
	for _, j := range partitionJobs {
		waitDeployed(t, c.Server, j.id)
	}
	plugin := pluginPIDs(t, n1.Agent)
	if len(plugin) != 1 {
		t.Fatalf("node 1 runs plugin processes %v, want one", plugin)
	}
	_, zfsBefore := cpuTimes(plugin[0])

	// Node 1 cut off: disconnected, its allocations unknown, replacements
	// on node 2; the lost one's original lost once lost_after passes.
	tl.mark("node1's agent stopped (SIGSTOP)")
	n1.Freeze(t)
	frozeAt := time.Now()
	c.Server.WaitNodeStatus(t, n1.NodeID(), api.NodeStatusDisconnected, disconnectTimeout)
	t.Logf("node 1 disconnected %s after its agent stopped", time.Since(frozeAt).Round(100*time.Millisecond))
	repl := map[string]heldSlot{}
	for _, j := range partitionJobs {
		repl[j.id] = waitToken(t, c.Server, n2, j.id, replaceTimeout, orig[j.id].alloc.ID)
	}
	for _, j := range partitionJobs {
		if j.lost {
			waitAllocStatus(t, c.Server, orig[j.id].alloc.ID, api.AllocClientStatusLost)
		}
	}
	for _, j := range partitionJobs {
		checkIntact(t, orig[j.id], "node 1 cut off")
		checkIntact(t, repl[j.id], "node 1 cut off")
	}
	// The plugin of the frozen node ran on: its scans ran zfs.
	if _, zfsNow := cpuTimes(plugin[0]); zfsNow <= zfsBefore {
		t.Errorf("node 1's plugin ran no zfs command while its agent was stopped (children's CPU %.2f s before, %.2f s now)", zfsBefore, zfsNow)
	}
	t.Logf("node 1 cut off for %s", time.Since(frozeAt).Round(100*time.Millisecond))

	tl.mark("node1's agent resumed (SIGCONT)")
	n1.Thaw(t)
	thawedAt := time.Now()
	c.Server.WaitNodeStatus(t, n1.NodeID(), api.NodeStatusReady, disconnectTimeout)
	t.Logf("node 1 ready %s after its agent resumed", time.Since(thawedAt).Round(100*time.Millisecond))

	for _, j := range partitionJobs {
		kept, stopped := settle(t, c.Server, orig[j.id], repl[j.id])
		which := "original"
		if kept == repl[j.id] {
			which = "replacement"
		}
		if j.keep != "" && which != j.keep {
			t.Errorf("job %s: Nomad kept the %s %s, want the %s", j.id, which, kept, j.keep)
		}
		checkIntact(t, kept, "after the reconnect")
		checkEndedThenReleased(t, stopped)
		t.Logf("job %s: kept the %s %s; %s ended, then its slot was released", j.id, which, kept, stopped)
	}
	if now := pluginPIDs(t, n1.Agent); len(now) != 1 || now[0] != plugin[0] {
		t.Errorf("node 1's plugin processes %v, want the same one, %d, throughout", now, plugin[0])
	}
	checkNoLeak(t, c)
	t.Logf("released everything %s after node 1's agent resumed", time.Since(thawedAt).Round(100*time.Millisecond))
}

// waitDeployed waits until job's deployment has succeeded. Nomad places
// no replacement for an unknown allocation that is part of an active
// deployment (scheduler/reconciler: updateByReschedulable): a node cut
// off within min_healthy_time (10 s by default) of its allocation's start
// had its allocation replaced only when lost_after passed, or the
// deployment's progress_deadline (10 m).
func waitDeployed(t *testing.T, server *nomadtest.Agent, job string) {
	t.Helper()
	waitFor(t, jobTimeout, "job "+job+" deployed", func() (bool, string) {
		d, _, err := server.Client().Jobs().LatestDeployment(job, nil)
		if err != nil || d == nil {
			return false, fmt.Sprintf("no deployment (%v)", err)
		}
		return d.Status == api.DeploymentStatusSuccessful, "deployment " + d.Status
	})
}

// settle waits until one of a and b runs and the other has ended, on the
// server's word, and returns them so.
func settle(t *testing.T, server *nomadtest.Agent, a, b heldSlot) (kept, stopped heldSlot) {
	t.Helper()
	waitFor(t, jobTimeout, fmt.Sprintf("one of %s and %s stopped", a, b), func() (bool, string) {
		var state []string
		status := map[string]*api.Allocation{}
		for _, h := range []heldSlot{a, b} {
			al, _, err := server.Client().Allocations().Info(h.alloc.ID, nil)
			if err != nil {
				return false, err.Error()
			}
			status[h.alloc.ID] = al
			state = append(state, fmt.Sprintf("%s %s/%s", h, al.ClientStatus, al.DesiredStatus))
		}
		for _, pair := range [][2]heldSlot{{a, b}, {b, a}} {
			k, s := status[pair[0].alloc.ID], status[pair[1].alloc.ID]
			if k.ClientStatus == api.AllocClientStatusRunning && k.DesiredStatus == api.AllocDesiredStatusRun &&
				(s.ClientStatus == api.AllocClientStatusComplete || s.ClientStatus == api.AllocClientStatusFailed) {
				kept, stopped = pair[0], pair[1]
				return true, ""
			}
		}
		return false, strings.Join(state, "; ")
	})
	return kept, stopped
}
