//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// TestStickyEphemeralDiskKeepsReplacementOnNode: docs/sticky-and-migration.md's
// way to keep
// a replacement on its predecessor's node, `ephemeral_disk { sticky =
// true }`, on a real two-node cluster (the first agent runs the server and
// a client, the second is a client only; each node has the plugin and its
// own pool). Nomad's generic scheduler tries the previous node first for a
// group with a sticky ephemeral disk, and takes it when it is feasible,
// whatever the other nodes score.
//
// Each job's v1 is pinned to node 1; its v2 (a destructive update) drops
// the pin and asks for node 2 with an affinity of weight 100. Without
// ephemeral_disk sticky (job "drift", the control: it shows the affinity
// does move an allocation, so the test can fail) v2 goes to node 2, starts
// with nothing, and v1's data on node 1, which no replacement can claim
// there, is released by the class's policy at once. With it (job "stay")
// v2 stays on node 1 and reads v1's data.
func TestStickyEphemeralDiskKeepsReplacementOnNode(t *testing.T) {
	t.Parallel()
	p1, p2 := newPool(t, "e2estickyn1", false), newPool(t, "e2estickyn2", false)
	class := stickyClass(2, "")
	a1 := startAgentScan(t, p1, releaseScan, class)
	cfg := agentConfig(p2, releaseScan, class, "")
	cfg.Servers = []string{a1.RPCAddr()}
	a2 := startAgentConfig(t, cfg)
	stopAtCleanup(t, a1, "drift", "stay")
	n1, n2 := a1.NodeID(), a2.NodeID()
	if n1 == n2 {
		t.Fatalf("both agents are node %s", n1)
	}
	a1.WaitForNodeDevice(t, "zfs", "dataset", "state", 2, deviceTimeout)
	a2.WaitForNodeDevice(t, "zfs", "dataset", "state", 2, deviceTimeout)
	t.Logf("node 1 %s (server and client), node 2 %s (client)", n1, n2)

	pin := fmt.Sprintf(`    constraint {
      attribute = "${node.unique.id}"
      value     = %q
    }`, n1)
	pull := fmt.Sprintf(`    affinity {
      attribute = "${node.unique.id}"
      value     = %q
      weight    = 100
    }`, n2)
	const sticky = `    ephemeral_disk {
      sticky = true
    }
`

	// The control: no sticky ephemeral disk, the affinity wins.
	a1.RunJob(t, stickyService("drift", "1", historyScript, pin))
	d1, _ := waitRunning(t, a1, "drift", "appended v1")
	ds1 := p1.Parent + "/state/" + deviceID(t, d1)
	waitHolder(t, ds1, d1.ID)
	held := mustLookup(t, ds1)
	a1.RunJob(t, stickyService("drift", "2", historyScript, pull))
	d2, out := waitRunning(t, a1, "drift", "appended v2", d1.ID)
	if d2.NodeID != n2 {
		t.Fatalf("drift v2 on node %s, want node 2 %s: the affinity does not move the control, so the sticky case below would prove nothing", d2.NodeID, n2)
	}
	if !strings.Contains(out, "found nothing") {
		t.Errorf("drift v2 on node 2 found data: %s", out)
	}
	// v1's data stays on node 1 with nobody to claim it: released at once
	// (parked first, maybe, then destroyed by the plugin's next pass).
	fresh := waitReleased(t, ds1, generation(held))
	if fresh.GUID == held.GUID {
		t.Errorf("%s: guid unchanged: drift v1's data was not destroyed", ds1)
	}
	checkEntries(t, "/"+ds1)
	waitFor(t, releaseTimeout, "drift v1's data released on node 1", func() (bool, string) {
		pk := parkedBelow(t, p1.Parent+"/state")
		return len(pk) == 0, fmt.Sprintf("parked: %v", pk)
	})
	t.Logf("drift: v1 on node 1, v2 on node 2 with nothing; v1's data released")

	// The documented way: ephemeral_disk sticky keeps v2 on node 1.
	a1.RunJob(t, stickyService("stay", "1", historyScript, sticky+pin))
	s1, _ := waitRunning(t, a1, "stay", "appended v1")
	a1.RunJob(t, stickyService("stay", "2", historyScript, sticky+pull))
	s2, out := waitRunning(t, a1, "stay", "appended v2", s1.ID)
	if s2.NodeID != n1 {
		t.Fatalf("stay v2 on node %s, want node 1 %s, its predecessor's", s2.NodeID, n1)
	}
	if want := "found: " + historyLine("1", s1); !strings.Contains(out, want) {
		t.Fatalf("stay v2: %q, want %q", out, want)
	}
	s1 = waitAllocStatus(t, a1, s1.ID, api.AllocClientStatusComplete)
	ds := p1.Parent + "/state/" + deviceID(t, s2)
	waitHolder(t, ds, s2.ID)
	checkDataOnlyIn(t, p1, ds, historyLine("1", s1), historyLine("2", s2))
	t.Logf("stay: v1 and v2 on node 1 (%s -> %s): %s", deviceID(t, s1), deviceID(t, s2), handover(a1, s1, s2))
}
