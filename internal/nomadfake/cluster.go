package nomadfake

import (
	"net/http"
	"slices"

	"github.com/hashicorp/nomad/api"
)

// cluster is what the servers and the local client know: one client node,
// the allocations, the namespaces, and the raft index. Server.mu guards it.
type cluster struct {
	nodeID string
	// registered: the servers know the node (GET /v1/node/<id> answers).
	registered bool
	// agentNode is /v1/agent/self's stats.client.node_id: "" until the
	// client has registered, or on a server-only agent.
	agentNode string
	// index is the last raft index, the "allocs" table's among them.
	index  uint64
	allocs map[string]*api.Allocation
	// local are the allocations the agent's client has a runner for: it
	// keeps one after the allocation ended, until the servers collect it.
	local      map[string]bool
	namespaces map[string]bool
}

func newCluster(nodeID string) cluster {
	return cluster{
		nodeID: nodeID, registered: true, agentNode: nodeID, index: 10,
		allocs: map[string]*api.Allocation{}, local: map[string]bool{},
		namespaces: map[string]bool{"default": true},
	}
}

// nodeAllocs is Node.GetAllocs: the allocations of node the token may
// read, newest first, and the index, which counts every allocation of the
// node, hidden ones included (so a change in a namespace the token cannot
// read returns an unchanged list at a higher index). A node with no
// allocations, or none the servers know, answers the allocs table's index
// and an empty list: 200 for a node that is not registered.
func (c *cluster) nodeAllocs(nodeID string, who caller) ([]*api.Allocation, uint64) {
	out := []*api.Allocation{}
	var index uint64
	for _, a := range c.allocs {
		if a.NodeID != nodeID {
			continue
		}
		index = max(index, a.ModifyIndex)
		if who.readJob(a.Namespace) {
			out = append(out, a)
		}
	}
	if index == 0 {
		index = c.index
	}
	slices.SortFunc(out, func(x, y *api.Allocation) int { return int(y.CreateIndex) - int(x.CreateIndex) })
	return out, index
}

// writeLocked is one raft write: the index moves and blocked queries wake.
func (s *Server) writeLocked() uint64 {
	s.c.index++
	s.wakeLocked()
	return s.c.index
}

func (s *Server) wakeLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// index is the last raft index.
func (s *Server) index() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.index
}

// Upsert stores a copy of a, as the servers do when a scheduler places it
// or its client updates it: placed on this node unless a.NodeID is set,
// in namespace "default" unless set (a namespace is created with its first
// allocation), CreateIndex kept from its first write and ModifyIndex this
// write's. The local client has it from then on.
func (s *Server) Upsert(a *api.Allocation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *a
	if c.NodeID == "" {
		c.NodeID = s.c.nodeID
	}
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	idx := s.writeLocked()
	if old, ok := s.c.allocs[c.ID]; ok {
		c.CreateIndex = old.CreateIndex
	} else {
		c.CreateIndex = idx
	}
	c.ModifyIndex = idx
	s.c.allocs[c.ID] = &c
	s.c.local[c.ID] = true
	s.c.namespaces[c.Namespace] = true
}

// SetStatus changes an allocation's client status, as its client's update
// does. The allocation must exist.
func (s *Server) SetStatus(id, clientStatus string) {
	s.mu.Lock()
	a := *s.c.allocs[id]
	s.mu.Unlock()
	a.ClientStatus = clientStatus
	s.Upsert(&a)
}

// GC removes an allocation from the servers and from the client, as
// `nomad system gc` does once it has ended.
func (s *Server) GC(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.c.allocs, id)
	delete(s.c.local, id)
	s.writeLocked()
}

// Touch is a write that changes no allocation of this node (one on
// another node, a job registered): blocked queries wake and block again.
func (s *Server) Touch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeLocked()
}

// SetLocal says whether the local client has a runner for allocation id,
// which the servers may still know (or not yet). No raft write.
func (s *Server) SetLocal(id string, has bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if has {
		s.c.local[id] = true
	} else {
		delete(s.c.local, id)
	}
}

// SetRegistered says whether the servers know this node: not yet on a
// fresh client, not any more after `nomad node purge`.
func (s *Server) SetRegistered(registered bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.registered = registered
}

// SetAgentNode sets /v1/agent/self's client node ID: "" for an agent whose
// client has not registered yet.
func (s *Server) SetAgentNode(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.agentNode = id
}

// node is GET /v1/node/<id> (Node.GetNode): 403 without node read; 404
// "node not found" with the query meta for a node the servers do not
// know.
func (s *Server) node(w http.ResponseWriter, r *http.Request, who caller) {
	if !who.known || !who.Node {
		s.fail(w, http.StatusForbidden, errPermissionDenied)
		return
	}
	s.mu.Lock()
	ok := s.c.registered && r.PathValue("id") == s.c.nodeID
	index := s.c.index
	s.mu.Unlock()
	setMeta(w, index)
	if !ok {
		s.fail(w, http.StatusNotFound, errNodeNotFound)
		return
	}
	reply(w, &api.Node{ID: s.c.nodeID, Name: "node-" + s.c.nodeID[:8], Status: "ready"})
}

// nodes is GET /v1/nodes (Node.List): 403 without node read.
func (s *Server) nodes(w http.ResponseWriter, _ *http.Request, who caller) {
	if !who.known || !who.Node {
		s.fail(w, http.StatusForbidden, errPermissionDenied)
		return
	}
	s.mu.Lock()
	out := []*api.NodeListStub{}
	if s.c.registered {
		out = append(out, &api.NodeListStub{ID: s.c.nodeID, Name: "node-" + s.c.nodeID[:8], Status: "ready"})
	}
	index := s.c.index
	s.mu.Unlock()
	setMeta(w, index)
	reply(w, out)
}

// agentSelf is GET /v1/agent/self, answered by the agent itself (no
// leader needed): 403 without agent read, and for a secret it cannot
// resolve (1.6.2 says "ACL token not found" then); stats.client.node_id
// names the client's node.
func (s *Server) agentSelf(w http.ResponseWriter, _ *http.Request, who caller) {
	if !who.known && s.dialectNow() == Nomad16 {
		s.fail(w, http.StatusForbidden, errTokenNotFound)
		return
	}
	if !who.known || !who.Agent {
		s.fail(w, http.StatusForbidden, errPermissionDenied)
		return
	}
	s.mu.Lock()
	stats := map[string]any{}
	if s.c.agentNode != "" {
		stats["client"] = map[string]string{"node_id": s.c.agentNode}
	}
	s.mu.Unlock()
	reply(w, map[string]any{"config": map[string]any{}, "member": map[string]any{}, "stats": stats})
}

// statusLeader is GET /v1/status/leader: the leader's RPC address, asked
// of anyone.
func (s *Server) statusLeader(w http.ResponseWriter, _ *http.Request, _ caller) {
	reply(w, leaderAddr)
}
