package nomadtest_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// TestClusterNodeCutOffAndBack starts a server and two client-only nodes,
// runs a service with a disconnect block (max_client_disconnect before
// Nomad 1.8) on the first, freezes that
// node's agent and thaws it: the servers mark the node disconnected and
// the allocation unknown while its task runs on, and after the thaw the
// node is ready and the same allocation running again.
func TestClusterNodeCutOffAndBack(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts real Nomad agents; skipped with -short")
	}
	bin := nomadtest.Binary(t)
	v, err := nomadtest.AgentVersion(bin)
	if err != nil {
		t.Fatal(err)
	}
	disconnect, err := nomadtest.GroupDisconnect(v, "1h", "")
	if err != nil {
		t.Fatal(err)
	}
	c := nomadtest.StartCluster(t,
		nomadtest.Config{Binary: bin, HeartbeatGrace: 2 * time.Second, MinHeartbeatTTL: time.Second},
		nomadtest.Config{Binary: bin}, nomadtest.Config{Binary: bin})
	if c.Server.NodeID() != "" {
		t.Errorf("the server-only agent has node %s", c.Server.NodeID())
	}
	n1, n2 := c.Clients[0], c.Clients[1]
	if n1.NodeID() == "" || n1.NodeID() == n2.NodeID() {
		t.Fatalf("client nodes %q and %q, want two", n1.NodeID(), n2.NodeID())
	}
	if c.ByNode(n2.NodeID()) != n2 {
		t.Errorf("ByNode(%s) is not the second client", n2.NodeID())
	}
	nodes, _, err := c.Server.Client().Nodes().List(nil)
	if err != nil || len(nodes) != 2 {
		t.Fatalf("the server lists %d nodes (%v), want 2", len(nodes), err)
	}

	job := c.Server.RunJob(t, fmt.Sprintf(`job "cut" {
  constraint {
    attribute = "${node.unique.id}"
    value     = %q
  }
  group "g" {
    %s
    task "sleep" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo $$; exec sleep 600"]
      }
    }
  }
}`, n1.NodeID(), disconnect))
	allocs := c.Server.WaitAllocs(t, *job.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusRunning), time.Minute)
	id := allocs[0].ID
	var pid int
	deadline := time.Now().Add(30 * time.Second)
	for pid == 0 && time.Now().Before(deadline) {
		out, _ := n1.ReadAllocLogs(id, "sleep", "stdout")
		pid, _ = strconv.Atoi(strings.TrimSpace(out))
		time.Sleep(100 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatal("task never printed its pid")
	}

	n1.Freeze(t)
	if !n1.Frozen() {
		t.Error("Frozen() is false after Freeze")
	}
	c.Server.WaitNodeStatus(t, n1.NodeID(), api.NodeStatusDisconnected, time.Minute)
	c.Server.WaitAllocs(t, *job.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusUnknown), time.Minute)
	if !running(pid) {
		t.Fatalf("task pid %d died while its agent was frozen", pid)
	}
	n1.Thaw(t)
	c.Server.WaitNodeStatus(t, n1.NodeID(), api.NodeStatusReady, time.Minute)
	got := c.Server.WaitAllocs(t, *job.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusRunning), time.Minute)
	if got[0].ID != id {
		t.Errorf("running allocation %s after the thaw, want the original %s", got[0].ID, id)
	}
	if !running(pid) {
		t.Errorf("task pid %d died after the thaw", pid)
	}
}
