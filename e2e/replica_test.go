//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/transfer/transfertest"
)

// Replicas (issue 30, docs/node-loss.md) on the three-agent cluster: a
// service on a sticky class that keeps one replica, its allocation A on
// node 1, the replica on node 2; node 1 lost for good (TestReplicaNodeLoss,
// then back after the takeover) or cut off and back before the takeover's
// bound (TestReplicaPartitionHealed).

// replicaEvery is the class's replicate.every: the replica's age bound.
const replicaEvery = 10 * time.Second

// replicaStopAfter is the job's stop_after_client_disconnect: with the
// task's kill_timeout (5 s), B's Reserve may take the replica over
// 10 + 5 + 5 + 30 s (model.TakeoverAt) after the servers mark A lost.
const replicaStopAfter = "10s"

// replicaClass is class "state" of the replica tests: sticky, migrating,
// one replica pulled every replicaEvery; released by the default policy
// (destroy), so that data kept aside is kept by the safety rule, not by a
// policy.
func replicaClass(transferHCL string) string {
	return transferHCL + stickyClass(2, fmt.Sprintf(`  migrate {
    timeout    = "10m"
    on_timeout = "fail"
  }
  replicate {
    copies = 1
    every  = %q
  }
`, replicaEvery))
}

// replicaCluster starts the cluster with replicaClass on both nodes, each
// with its own transport address, the heartbeats of the partition tests
// (a silent node noticed within 10-20 s of an idle guest).
func replicaCluster(t *testing.T, name string) *testCluster {
	t.Helper()
	return replicaClusterWith(t, name, "")
}

// replicaClusterWith is replicaCluster with more of the plugin's
// configuration on both nodes (metricsBlock, for TestReplicaCost).
func replicaClusterWith(t *testing.T, name, pluginHCL string) *testCluster {
	t.Helper()
	pki := transfertest.NewPKI(t, nomadBin)
	var specs []nodeSpec
	for i := 1; i <= 2; i++ {
		cfg := pki.Config(t, "127.0.0.1:"+freePort(t))
		transferHCL := fmt.Sprintf("transfer {\n  address   = %q\n  ca_file   = %q\n  cert_file = %q\n  key_file  = %q\n}\n",
			cfg.Address, cfg.CAFile, cfg.CertFile, cfg.KeyFile)
		specs = append(specs, nodeSpec{Pool: fmt.Sprintf("%s%d", name, i), Classes: pluginHCL + replicaClass(transferHCL)})
	}
	c := startCluster(t, partitionHeartbeats, specs...)
	for _, n := range c.Nodes {
		n.WaitForNodeDevice(t, "zfs", "dataset", "state", 2, deviceTimeout)
	}
	return c
}

// replicaScript says what the slot held when the task started ("found:
// <alloc> <n> <unix time>", the newest write there, or "found: "), writes
// its token, then every second writes "<alloc> <n> <unix seconds>" (the
// guest's busybox date has no fractions) to the slot's file last (a rename: a replica holds one whole line) and the same
// to <alloc>.data.log beside its alloc dir, which the test reads whatever
// the node's agent does. Beside it, not in it: a client that stops an
// allocation under stop_after_client_disconnect destroys its alloc dir
// (client/heartbeatstop.go stopAlloc → allocRunner.Destroy), and the test
// reads A's last write after that (TestReplicaPartitionHealed read none,
// 2026-11-28). A raw_exec task: the slot is ZFS_STATE_HOST_PATH.
const replicaScript = `trap 'exit 0' INT TERM; d=$ZFS_STATE_HOST_PATH; log=$NOMAD_ALLOC_DIR/../../$NOMAD_ALLOC_ID.data.log; ` +
	`echo "found: $(cat "$d/last" 2>/dev/null)" >> "$log"; ` +
	`echo "$NOMAD_ALLOC_ID" > "$d/token-$NOMAD_ALLOC_ID" && echo "wrote token" >> "$log"; n=0; ` +
	`while :; do n=$((n+1)); w="$NOMAD_ALLOC_ID $n $(date +%s)"; ` +
	`echo "$w" > "$d/last.tmp" && mv "$d/last.tmp" "$d/last" && echo "wrote $w" >> "$log"; sleep 1; done`

// replicaService is job id: one raw_exec task on a slot of class "state"
// running replicaScript, drawn to node, with stop_after_client_disconnect
// (without it no replica is ever taken over) and the device affinity of
// docs/node-loss.md for a node that keeps a replica of the group. Its
// replacement is placed 5 s after the original is lost (the default
// policy waits 30 s).
func replicaService(id, node string) string {
	return fmt.Sprintf(`job %q {
  type = "service"
  group "g" {
    stop_after_client_disconnect = %q
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
      driver       = "raw_exec"
      kill_timeout = "5s"
      config {
        command = "/bin/sh"
        args    = ["-c", %q]
      }
      resources {
        cpu    = 50
        memory = 64
        device "zfs/dataset/state" {
          affinity {
            attribute = "${device.attr.replicas}"
            operator  = "set_contains"
            value     = "default/%s/g"
            weight    = 100
          }
        }
      }
    }
  }
}`, id, replicaStopAfter, node, replicaScript, id)
}

// write is one line replicaScript wrote: whose, which, when.
type write struct {
	alloc string
	n     int
	at    time.Time
}

// parseWrite reads "<alloc> <n> <unix time>"; ok is false for anything
// else (an empty "found: ").
func parseWrite(s string) (write, bool) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return write{}, false
	}
	n, err1 := strconv.Atoi(f[1])
	secs, err2 := strconv.ParseFloat(f[2], 64)
	if err1 != nil || err2 != nil {
		return write{}, false
	}
	return write{alloc: f[0], n: n, at: time.Unix(0, int64(secs*1e9))}, true
}

// replicaRun is an allocation of the test's job on a node.
type replicaRun struct {
	alloc *api.Allocation
	node  *clusterNode
	slot  string // its slot's ID (the device instance)
	ds    string // its slot's dataset
}

func (r replicaRun) String() string {
	return fmt.Sprintf("%s (%s on %s)", r.alloc.ID[:8], r.ds, r.node.Pool.Name)
}

// log is the allocation's data log (replicaScript): <data dir>/alloc/<alloc>.data.log.
func (r replicaRun) log() string {
	b, _ := os.ReadFile(filepath.Join(r.node.Agent.DataDir(), "alloc", r.alloc.ID+".data.log"))
	return string(b)
}

// found is what the task found in its slot at its start.
func (r replicaRun) found() (write, bool) {
	line := lastLine(r.log(), "found: ")
	_, rest, _ := strings.Cut(line, "found: ")
	return parseWrite(rest)
}

// lastWrite is the newest write the task logged.
func (r replicaRun) lastWrite() (write, bool) {
	line := lastLine(r.log(), "wrote ", r.alloc.ID)
	_, rest, _ := strings.Cut(line, "wrote ")
	return parseWrite(rest)
}

// waitWriting waits until job has a running allocation on node n, none of
// skip, whose task has written at least once.
// runReplicated runs job's replica service with A on node 1 of c
// (stopped at cleanup), and waits until A writes and node 2 holds A's
// replica with an increment: where every replica test begins.
func runReplicated(t *testing.T, c *testCluster, job string) replicaRun {
	t.Helper()
	n1, n2 := c.Nodes[0], c.Nodes[1]
	stopAtCleanup(t, c.Server, job)
	c.Server.RunJob(t, replicaService(job, n1.NodeID()))
	a := waitWriting(t, c, n1, job, jobTimeout)
	t.Logf("A %s writing", a)
	waitDeployed(t, c.Server, job)
	startedAt := time.Now()
	heldAt := waitReplica(t, c, n2, a, job, 2)
	t.Logf("node 2 holds %s's replica with an increment %s after A wrote", a, heldAt.Sub(startedAt).Round(100*time.Millisecond))
	return a
}

func waitWriting(t *testing.T, c *testCluster, n *clusterNode, job string, timeout time.Duration, skip ...string) replicaRun {
	t.Helper()
	var r replicaRun
	waitFor(t, timeout, fmt.Sprintf("job %s writing on %s", job, n.Pool.Name), func() (bool, string) {
		stubs, _, err := c.Server.Client().Jobs().Allocations(job, true, nil)
		if err != nil {
			return false, err.Error()
		}
		var state []string
		for _, s := range stubs {
			state = append(state, fmt.Sprintf("%s on %s %s/%s", s.ID[:8], s.NodeID[:8], s.ClientStatus, s.DesiredStatus))
			if s.NodeID != n.NodeID() || contains(skip, s.ID) || s.ClientStatus != api.AllocClientStatusRunning {
				continue
			}
			r = replicaRun{alloc: allocInfo(t, c.Server, s.ID), node: n}
			_, ok := r.lastWrite()
			return ok, "data.log: " + r.log()
		}
		return false, strings.Join(state, "; ")
	})
	r.slot = deviceID(t, r.alloc)
	r.ds = n.Pool.Parent + "/state/" + r.slot
	return r
}

// replicaOf is the name node n keeps a's replica under (model.ReplicaName).
func replicaOf(n *clusterNode, a replicaRun) string {
	return fmt.Sprintf("%s/state/replica-%s-%s", n.Pool.Parent, a.alloc.ID, a.slot)
}

// replicaSnapshots are the @replica-<n> of dataset ds, by number.
func replicaSnapshots(t testing.TB, ds string) map[int]bool {
	t.Helper()
	all, err := lookupAll(ds)
	if err != nil {
		t.Fatalf("zfs list %s: %v", ds, err)
	}
	out := map[int]bool{}
	for name := range all {
		if _, snap, ok := strings.Cut(name, "@replica-"); ok {
			if k, err := strconv.Atoi(snap); err == nil {
				out[k] = true
			}
		}
	}
	return out
}

// waitReplica waits until node n publishes that it keeps a replica of
// job's group (its device's replicas attribute, on the server's node
// record) and holds a's replica at @replica-<k> or later: a whole stream
// and at least k-1 increments. It returns when that was seen.
func waitReplica(t *testing.T, c *testCluster, n *clusterNode, a replicaRun, job string, k int) time.Time {
	t.Helper()
	name := replicaOf(n, a)
	group := "default/" + job + "/g"
	waitFor(t, jobTimeout+time.Duration(k)*replicaEvery, fmt.Sprintf("%s holding %s with @replica-%d, published", n.Pool.Name, name, k),
		func() (bool, string) {
			node, _, err := c.Server.Client().Nodes().Info(n.NodeID(), nil)
			if err != nil {
				return false, err.Error()
			}
			attr := ""
			if node.NodeResources != nil {
				for _, g := range node.NodeResources.Devices {
					if g.Vendor == "zfs" && g.Type == "dataset" && g.Name == "state" {
						if v, ok := g.Attributes["replicas"]; ok && v != nil {
							attr = v.String()
						}
					}
				}
			}
			snaps := replicaSnapshots(t, name) // only its newest: each pull drops the older
			newest := 0
			for n := range snaps {
				newest = max(newest, n)
			}
			return strings.Contains(attr, group) && newest >= k, fmt.Sprintf("replicas attribute %q; snapshots %v", attr, snaps)
		})
	return time.Now()
}

// killNode ends node n as its death would (nomadtest.Agent.Kill: the agent,
// its plugin and tasks killed), then exports its pool as a failed
// board's disks would leave it; an export refused is logged, the pool
// then stays (the node is dead all the same).
func killNode(t *testing.T, n *clusterNode) {
	t.Helper()
	n.Kill(t)
	if out, err := runErr("zpool", "export", "-f", n.Pool.Name); err != nil {
		t.Logf("node %s killed; its pool stays imported: zpool export: %v %s", n.Pool.Name, err, out)
	}
}

// checkTakeoverLogged reports the takeover line node n's plugin logged for
// b, or fails the test when there is none and want says there must be
// one (and when there is one and want says none).
func checkTakeoverLogged(t *testing.T, n *clusterNode, b replicaRun, want bool) string {
	t.Helper()
	line := lastLine(n.Logs(), "taking over a replica", "alloc_id="+b.alloc.ID)
	switch {
	case want && line == "":
		t.Errorf("%s: node %s's plugin logged no takeover of a replica", b, n.Pool.Name)
	case !want && line != "":
		t.Errorf("%s: node %s's plugin took a replica over: %s", b, n.Pool.Name, line)
	}
	return line
}

// TestReplicaNodeLoss: node 1, running A, dies (its agent, plugin and
// task killed, its pool exported) once node 2 holds a replica of A's slot.
// Nomad marks A lost and places B on node 2 (the only other node, and the
// one the device affinity prefers); B's Reserve waits until A's node has
// stopped A by Nomad's own rules (model.TakeoverAt), takes the replica
// over and claims it: B's task starts with A's data, no older than
// replicate.every plus one transfer. The test logs the RPO (the age of
// the newest write B found against A's last) and the takeover time (from
// Nomad's placement of B to B's task start). Then node 1 boots again with
// its pool: A's original, newer than the replica, is never sent over B's
// data; it is kept aside (retained) on node 1 for the operator, and B's
// data is untouched.
func TestReplicaNodeLoss(t *testing.T) {
	t.Parallel()
	began := time.Now()
	c := replicaCluster(t, "e2erepl")
	n1, n2 := c.Nodes[0], c.Nodes[1]
	const job = "replicated"
	a := runReplicated(t, c, job)

	killedAt := time.Now()
	killNode(t, n1)
	last, ok := a.lastWrite()
	if !ok {
		t.Fatalf("%s wrote nothing: %s", a, a.log())
	}
	t.Logf("node 1 killed; A's last write #%d at %s", last.n, last.at.Format("15:04:05.000"))
	c.Server.WaitNodeStatus(t, n1.NodeID(), api.NodeStatusDown, disconnectTimeout)
	t.Logf("node 1 down %s after the kill", time.Since(killedAt).Round(100*time.Millisecond))
	waitAllocStatus(t, c.Server, a.alloc.ID, api.AllocClientStatusLost)

	// B: placed after stop_after_client_disconnect and the kill timeout,
	// started once its Reserve has taken the replica over (about 35 s
	// later: the client's check interval and the margin for clocks).
	b := waitWriting(t, c, n2, job, jobTimeout+2*time.Minute, a.alloc.ID)
	placed := time.Unix(0, b.alloc.CreateTime)
	started := taskStarted(allocInfo(t, c.Server, b.alloc.ID))
	t.Logf("node 1 killed -> B placed %s (previous allocation %q); B placed -> B's task started %s",
		placed.Sub(killedAt).Round(100*time.Millisecond), b.alloc.PreviousAllocation, started.Sub(placed).Round(100*time.Millisecond))
	got, ok := b.found()
	switch {
	case !ok:
		// Go on to node 1's return all the same: what becomes of A's
		// original then is checked below.
		t.Errorf("%s found no data of A in its slot: data.log:\n%s", b, b.log())
	case got.alloc != a.alloc.ID:
		t.Errorf("%s found %s's write #%d, want A's (%s)", b, got.alloc, got.n, a.alloc.ID)
	default:
		if tok, err := readFileErr("/" + b.ds + "/token-" + a.alloc.ID); strings.TrimSpace(tok) != a.alloc.ID {
			t.Errorf("%s: A's token = %q (%v), want A's ID", b, tok, err)
		}
		rpo := last.at.Sub(got.at)
		line := checkTakeoverLogged(t, n2, b, true)
		claim, took, _ := claimTook(n2.Agent, b.alloc.ID)
		t.Logf("RPO %s: B found A's write #%d of %s; A's last was #%d of %s (replicate.every %s)",
			rpo, got.n, got.at.Format("15:04:05"), last.n, last.at.Format("15:04:05"), replicaEvery)
		t.Logf("takeover: the claim took %s\n  %s\n  %s", took, line, claim)
		if rpo < 0 || rpo > replicaEvery+paced(30*time.Second) {
			t.Errorf("RPO %s: more than replicate.every (%s) and one transfer (writes timed to the second)", rpo, replicaEvery)
		}
	}
	if n := replicaSnapshots(t, replicaOf(n2, a)); ok && len(n) != 0 {
		t.Errorf("the replica %s is still there after the takeover: %v", replicaOf(n2, a), n)
	}
	bGUID := mustLookup(t, b.ds).GUID
	t.Logf("node loss to B writing: %s", time.Since(killedAt).Round(100*time.Millisecond))

	// Node 1 back with its pool: A's original is kept aside on node 1,
	// never sent to node 2.
	backAt := time.Now()
	if _, err := runErr("zpool", "list", n1.Pool.Name); err != nil {
		run(t, "zpool", "import", "-d", n1.Pool.Dir, n1.Pool.Name)
	}
	n1.Restart(t)
	c.Server.WaitNodeStatus(t, n1.NodeID(), api.NodeStatusReady, disconnectTimeout)
	// A's slot kept aside, whatever the class's policy (destroy): parked
	// for B and kept once B shows running without it (model.PlanParked,
	// ParkedRetain); or, B naming no predecessor (Nomad 1.6.2), parked
	// for the replacement Nomad does not name, which node 1 cannot tell
	// from one that took a replica over, until the copy is confirmed or
	// sticky_wait has passed, then retained (model.Class.KeepsLost):
	// either way never a slot, never sent to B, never destroyed.
	var retained string
	waitFor(t, jobTimeout, "A's original kept aside (parked or retained) on node 1", func() (bool, string) {
		all, err := lookupAll(n1.Pool.Parent + "/state")
		if err != nil {
			return false, err.Error()
		}
		var state []string
		for _, name := range keys(all) {
			d := all[name]
			if d.IsSnapshot() {
				continue
			}
			state = append(state, name+": "+describeSlot(d))
			if st := d.User.Get(propState); (st == "retained" || st == "parked") &&
				(d.User.Get(propHolder) == a.alloc.ID || strings.Contains(name, a.alloc.ID)) {
				retained = name
			}
		}
		return retained != "", strings.Join(state, "; ")
	})
	t.Logf("node 1 back: A's original kept aside as %s (%s) %s after its restart began", retained,
		describeSlot(mustLookup(t, retained)), time.Since(backAt).Round(100*time.Millisecond))
	t.Logf("node 1: %s", lastLine(n1.Logs(), a.alloc.ID, "parked"))
	// Node 2 received nothing of A's; B's slot is the same dataset, and B
	// runs on, writing.
	waitFor(t, paced(2*replicaEvery), "B to write again after node 1's return", func() (bool, string) {
		w, ok := b.lastWrite()
		return ok && w.at.After(backAt), "data.log: " + b.log()
	})
	if p := parkedFor(t, n2.Pool.Parent+"/state", a.alloc.ID); len(p) != 0 {
		t.Errorf("node 2 holds copies of A's data after node 1's return: %v", p)
	}
	if g := mustLookup(t, b.ds).GUID; g != bGUID {
		t.Errorf("B's slot %s changed under it: guid %s, was %s", b.ds, g, bGUID)
	}
	if al := allocInfo(t, c.Server, b.alloc.ID); al.ClientStatus != api.AllocClientStatusRunning {
		t.Errorf("B is %s after node 1's return", al.ClientStatus)
	}
	if n := strings.Count(b.log(), "found: "); n != 1 {
		t.Errorf("B's task started %d times: %s", n, b.log())
	}
	t.Logf("TestReplicaNodeLoss took %s", time.Since(began).Round(time.Second))
}

// TestReplicaPartitionHealed: node 1, running A, is cut off (its agent
// stopped with SIGSTOP: its plugin and task run on) once node 2 holds a
// replica of A's slot. First for a few seconds, well within the
// heartbeats: nothing moves, A keeps running and writing, the replica goes
// on. Then until the servers mark node 1 down and A lost, and thawed at
// once, long before B's Reserve may take the replica over
// (model.TakeoverAt: 50 s after A's loss): no takeover; Nomad places B on
// node 2 all the same, A's client stops A (it is lost: Nomad 1.6.2 does
// not keep it), and A's final data migrates to B as in a drain; B starts
// with A's last write, nothing lost; the replica is kept (for
// sticky_wait).
func TestReplicaPartitionHealed(t *testing.T) {
	t.Parallel()
	began := time.Now()
	c := replicaCluster(t, "e2erepp")
	n1, n2 := c.Nodes[0], c.Nodes[1]
	const job = "healed"
	a := runReplicated(t, c, job)
	replica := replicaOf(n2, a)

	// A short cut: within the heartbeats, nothing happens.
	n1.Freeze(t)
	time.Sleep(3 * time.Second)
	n1.Thaw(t)
	before, _ := a.lastWrite()
	waitReplica(t, c, n2, a, job, 3)
	if al := allocInfo(t, c.Server, a.alloc.ID); al.ClientStatus != api.AllocClientStatusRunning {
		t.Fatalf("A is %s after a 3 s cut", al.ClientStatus)
	}
	// @replica-3 may have come before the thaw: A's next write may be a
	// second away still (TestReplicaPartitionHealed read the same write
	// twice, 2026-11-28).
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if w, ok := a.lastWrite(); ok && w.n > before.n {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("A stopped writing after a 3 s cut: data.log:\n%s", a.log())
			break
		}
	}
	if stubs, _, err := c.Server.Client().Jobs().Allocations(job, true, nil); err != nil || len(stubs) != 1 {
		t.Errorf("after a 3 s cut the job has %d allocations (%v), want A alone", len(stubs), err)
	}
	t.Logf("a 3 s cut: A runs on, the replica went on to @replica-3")

	// A long cut: node 1 down and A lost, then node 1 thawed at once, 50 s
	// before B's Reserve may take the replica over (Nomad places B 20 s
	// after the loss, whatever the node does meanwhile).
	frozeAt := time.Now()
	n1.Freeze(t)
	c.Server.WaitNodeStatus(t, n1.NodeID(), api.NodeStatusDown, disconnectTimeout)
	waitAllocStatus(t, c.Server, a.alloc.ID, api.AllocClientStatusLost)
	n1.Thaw(t)
	t.Logf("node 1 cut off for %s, until A was lost", time.Since(frozeAt).Round(100*time.Millisecond))
	c.Server.WaitNodeStatus(t, n1.NodeID(), api.NodeStatusReady, disconnectTimeout)

	b := waitWriting(t, c, n2, job, jobTimeout+2*time.Minute, a.alloc.ID)
	checkTakeoverLogged(t, n2, b, false)
	last, _ := a.lastWrite()
	got, ok := b.found()
	switch {
	case !ok || got.alloc != a.alloc.ID:
		t.Errorf("%s found %+v, want A's last write #%d: data.log:\n%s", b, got, last.n, b.log())
	case got.n != last.n:
		t.Errorf("%s found A's write #%d, want its last, #%d: data from the replica, not A's final data?", b, got.n, last.n)
	}
	if snaps := replicaSnapshots(t, replica); len(snaps) == 0 {
		t.Errorf("the replica %s is gone", replica)
	}
	t.Logf("B found A's last write #%d (%s after it); TestReplicaPartitionHealed took %s",
		got.n, taskStarted(allocInfo(t, c.Server, b.alloc.ID)).Sub(last.at).Round(100*time.Millisecond), time.Since(began).Round(time.Second))
}
