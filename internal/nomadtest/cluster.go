package nomadtest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Cluster is a server agent and client-only agents joined to it: a cluster
// of several nodes on one machine, each node with its own data dir, ports
// and plugin configuration, for tests across nodes (placement, a node cut
// off and back, data moved between nodes).
type Cluster struct {
	// Server runs the server only: no node of its own.
	Server *Agent
	// Clients are the nodes, in the order of StartCluster's clients.
	Clients []*Agent
}

// StartCluster starts server as a server-only agent, then one client-only
// agent per entry of clients, all at once, each registered with the
// server (Config.Servers is set; ServerOnly, HeartbeatGrace and
// MinHeartbeatTTL of a client are ignored), and waits until every node is
// ready. Cleanup stops the clients before the server.
func StartCluster(t testing.TB, server Config, clients ...Config) *Cluster {
	t.Helper()
	server.ServerOnly, server.Servers = true, nil
	c := &Cluster{Server: Start(t, server), Clients: make([]*Agent, len(clients))}
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, cfg := range clients {
		cfg.ServerOnly, cfg.Servers = false, []string{c.Server.RPCAddr()}
		if cfg.Slowness == nil {
			cfg.Slowness = server.Slowness
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Clients[i], errs[i] = start(t, cfg)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			c.Clients[i].fatalf(t, "starting client %d of the cluster: %v", i+1, err)
		}
	}
	return c
}

// ByNode returns the client agent of node nodeID, nil if none.
func (c *Cluster) ByNode(nodeID string) *Agent {
	for _, a := range c.Clients {
		if a.NodeID() == nodeID {
			return a
		}
	}
	return nil
}

// WaitNodeStatus polls the agent's API until node nodeID has status
// (api.NodeStatusReady, ...Down, ...Disconnected, ...Init) and returns the
// node. Ask the server: a frozen client's own API does not answer.
func (a *Agent) WaitNodeStatus(t testing.TB, nodeID, status string, timeout time.Duration) *api.Node {
	t.Helper()
	var node *api.Node
	err := a.poll(timeout, func() (bool, string) {
		var err error
		node, _, err = a.Client().Nodes().Info(nodeID, nil)
		if err != nil {
			return false, "reading node: " + err.Error()
		}
		return node.Status == status, fmt.Sprintf("node %s status %q", nodeID, node.Status)
	})
	if err != nil {
		a.fatalf(t, "waiting for node %s to be %s: %v", nodeID, status, err)
	}
	return node
}
