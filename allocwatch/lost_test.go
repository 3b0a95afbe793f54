package allocwatch

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// TestLostWithItsNodeThenBack reads, from real Nomad agents (a server and
// two client-only nodes), what the replica takeover and the release of a
// lost holder's slot rest on, through the plugin's own conversions:
//
//   - a service whose group sets stop_after_client_disconnect, its node
//     killed: the servers mark the allocation lost, and the takeover's
//     reading (nomadapi.AllocationLoss, LostAlloc) has a time of loss to
//     count from (LostSince), no earlier than the kill: Nomad 1.6.2 keeps
//     no AllocStates record of such a loss, its ModifyTime stands in;
//   - the node back: its client ends the allocation (complete), and the
//     node's own watcher (the node's allocation list as nomadapi decodes
//     it, convertAlloc) still says the servers stopped it as lost
//     (LostByServers), so its outcome is lost (model.OutcomeOf), and a
//     class that keeps replicas keeps its data aside. (The list's decoder
//     dropped the desired description: e2e TestReplicaNodeLoss saw the
//     slot destroyed as complete, 2026-11-28.)
func TestLostWithItsNodeThenBack(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts real Nomad agents; skipped with -short")
	}
	bin := nomadtest.Binary(t)
	c := nomadtest.StartCluster(t,
		nomadtest.Config{Binary: bin, HeartbeatGrace: 2 * time.Second, MinHeartbeatTTL: time.Second},
		nomadtest.Config{Binary: bin}, nomadtest.Config{Binary: bin})
	job := c.Server.RunJob(t, `job "lost" {
  group "g" {
    stop_after_client_disconnect = "5s"
    task "sleep" {
      driver       = "raw_exec"
      kill_timeout = "2s"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
    }
  }
}`)
	allocs := c.Server.WaitAllocs(t, *job.ID, nomadtest.AllocsWithStatus(1, api.AllocClientStatusRunning), agentTimeout)
	a := allocs[0]
	node := c.ByNode(a.NodeID)
	if node == nil {
		t.Fatalf("allocation %s is on node %s, which is none of the clients", a.ID, a.NodeID)
	}
	killedAt := time.Now()
	node.Kill(t)
	c.Server.WaitNodeStatus(t, a.NodeID, api.NodeStatusDown, agentTimeout)
	c.Server.WaitAllocs(t, *job.ID, func(as []*api.AllocationListStub) bool {
		for _, s := range as {
			if s.ID == a.ID {
				return s.ClientStatus == api.AllocClientStatusLost
			}
		}
		return false
	}, agentTimeout)

	nc, err := nomadapi.New(nomadapi.Config{Address: c.Server.Address()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := nc.AllocationLoss(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	loss := LostAlloc(raw)
	t.Logf("lost: AllocStates record %v, ModifyTime %v (the kill at %v)", loss.LostAt, loss.ModifiedAt, killedAt.UTC())
	if loss.ClientStatus != model.ClientLost || loss.StopAfter != 5*time.Second {
		t.Errorf("read as %+v, want lost with stop_after_client_disconnect 5s", loss)
	}
	// The servers' clock is this machine's.
	if since := loss.LostSince(); since.Before(killedAt.Add(-time.Second)) {
		t.Errorf("time of loss %v (record %v, ModifyTime %v): before the kill at %v, or none", since, loss.LostAt, loss.ModifiedAt, killedAt)
	}
	if _, ok := model.TakeoverAt(loss); !ok {
		t.Errorf("no takeover time for %+v: a replacement would never take a replica over", loss)
	}

	// Nomad places the replacement (naming no predecessor, 1.6.2) on the
	// other node once stop_after_client_disconnect and the kill timeout
	// have passed.
	c.Server.WaitAllocs(t, *job.ID, func(as []*api.AllocationListStub) bool {
		for _, s := range as {
			if s.ID != a.ID && s.ClientStatus == api.AllocClientStatusRunning {
				return true
			}
		}
		return false
	}, agentTimeout)

	node.Restart(t)
	c.Server.WaitNodeStatus(t, a.NodeID, api.NodeStatusReady, agentTimeout)
	// Read as the node's watcher reads it: the node's allocation list
	// (nomadapi's own decoding of it), through the node's own agent.
	local, err := nomadapi.New(nomadapi.Config{Address: node.Address()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var back *api.Allocation
	deadline := time.Now().Add(agentTimeout)
	for back == nil || back.ClientStatus == api.AllocClientStatusLost {
		if time.Now().After(deadline) {
			t.Fatalf("allocation %s not ended by its client %s after its node came back (%+v, %v)", a.ID, agentTimeout, back, err)
		}
		time.Sleep(200 * time.Millisecond)
		var list []*api.Allocation
		list, _, err = local.NodeAllocations(t.Context(), a.NodeID, 0, 0)
		for _, l := range list {
			if l != nil && l.ID == a.ID {
				back = l
			}
		}
	}
	got := convertAlloc(back)
	t.Logf("back: client status %s, desired %s (%q)", back.ClientStatus, back.DesiredStatus, back.DesiredDescription)
	if !got.LostByServers || model.OutcomeOf(got) != model.OutcomeLost {
		t.Errorf("after its node came back: %s, LostByServers %v, outcome %s; want outcome lost",
			fmt.Sprintf("client %s desired %s (%q)", back.ClientStatus, back.DesiredStatus, back.DesiredDescription),
			got.LostByServers, model.OutcomeOf(got))
	}
}
