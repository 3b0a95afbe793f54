//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// A test cluster: a server agent and client nodes, each client with its
// own pool, parent dataset and plugin configuration, all in the one guest
// (nomadtest.StartCluster). Tests that cut a node off (Agent.Freeze) or
// move data between nodes build on it.

// nodeSpec is one client node of startCluster: a pool of its own (created
// here, named Pool, parent <Pool>/nomad) and the plugin's class blocks.
type nodeSpec struct {
	Pool    string
	Classes string
	// Scan is the plugin's scan_interval (default releaseScan).
	Scan time.Duration
	// ExtraHCL is added to the node's agent configuration.
	ExtraHCL string
	// Disk, if set, is a block device the pool is made on instead of a
	// file vdev in the guest's /tmp (its memory): for data of gigabytes.
	Disk string
}

// clusterNode is a started client node and its pool.
type clusterNode struct {
	*nomadtest.Agent
	Pool *testPool
}

// testCluster is a started cluster.
type testCluster struct {
	Server *nomadtest.Agent
	Nodes  []*clusterNode
}

// heartbeats are a cluster's server settings for noticing a silent node.
type heartbeats struct {
	// MinTTL is min_heartbeat_ttl: a node heartbeats every TTL (this, plus
	// up to as much again of stagger).
	MinTTL time.Duration
	// Grace is heartbeat_grace on an idle guest: the margin for a late
	// heartbeat before the node is marked down or disconnected. It is
	// stretched by the guest's slowness when the cluster starts: a busy
	// host delays heartbeats by about that factor, and a live node must
	// not be cut off by its machine.
	Grace time.Duration
}

// startCluster creates each node's pool and starts the cluster: the
// server, then every node at once, each node's plugin talking to its own
// agent's API. Agent logs are kept with NDZ_E2E_LOG_DIR, as
// <test>.server.agent.log and <test>.node<N>.agent.log.
func startCluster(t *testing.T, hb heartbeats, specs ...nodeSpec) *testCluster {
	t.Helper()
	pools := make([]*testPool, len(specs))
	clients := make([]nomadtest.Config, len(specs))
	for i, s := range specs {
		if s.Disk != "" {
			pools[i] = &testPool{Name: s.Pool, Dir: "/dev", Vdevs: []string{s.Disk}}
			createPool(t, pools[i], false)
		} else {
			pools[i] = newPool(t, s.Pool, false)
		}
		scan := s.Scan
		if scan == 0 {
			scan = releaseScan
		}
		clients[i] = agentConfig(pools[i], scan, s.Classes, s.ExtraHCL)
	}
	server := nomadtest.Config{Slowness: pace.Slowness, Binary: nomadBin, MinHeartbeatTTL: hb.MinTTL}
	if hb.Grace > 0 {
		server.HeartbeatGrace = (time.Duration(float64(hb.Grace) * pace.Slowness())).Round(time.Second)
	}
	began := time.Now()
	c := nomadtest.StartCluster(t, server, clients...)
	tc := &testCluster{Server: c.Server}
	keepAgentLog(t, c.Server, "server")
	for i, a := range c.Clients {
		tc.Nodes = append(tc.Nodes, &clusterNode{Agent: a, Pool: pools[i]})
		keepAgentLog(t, a, fmt.Sprintf("node%d", i+1))
		t.Cleanup(func() { t.Logf("node %d agent CPU: %s", i+1, agentCPU(t, a)) })
	}
	t.Logf("cluster of %d nodes up in %s (heartbeat_grace %s, min_heartbeat_ttl %s)",
		len(specs), time.Since(began).Round(100*time.Millisecond), server.HeartbeatGrace, hb.MinTTL)
	return tc
}

// keepAgentLog copies agent a's log to NDZ_E2E_LOG_DIR at cleanup, named
// after the test and role.
func keepAgentLog(t *testing.T, a *nomadtest.Agent, role string) {
	dir := os.Getenv("NDZ_E2E_LOG_DIR")
	if dir == "" {
		return
	}
	t.Cleanup(func() {
		name := strings.ReplaceAll(t.Name(), "/", "_") + "." + role + ".agent.log"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(a.Logs()), 0o644); err != nil {
			t.Logf("keeping the %s agent log: %v", role, err)
		}
	})
}

// allocFile is the host path of a file a task of allocation id on node a
// wrote into its alloc dir ($NOMAD_ALLOC_DIR): readable while the node's
// agent is frozen and its API silent.
func allocFile(a *nomadtest.Agent, allocID, name string) string {
	return filepath.Join(a.DataDir(), "alloc", allocID, "alloc", name)
}
