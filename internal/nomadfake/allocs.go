package nomadfake

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Blocking queries (command/agent/http.go parseWait, nomad/rpc.go
// blockingRPC): without ?index= the answer comes at once; with it, the
// query waits until the answer's index passes it, or ?wait= (a Go
// duration, 5 minutes when absent) has gone by, and then answers what is
// there, the same index included. The fake adds none of Nomad's jitter.
const defaultWait = 5 * time.Minute

// nodeAllocations is GET /v1/node/<id>/allocations (Node.GetAllocs): 403
// without node read; the node's allocations the token may read, silently
// without the others; X-Nomad-Index counting them all.
func (s *Server) nodeAllocations(w http.ResponseWriter, r *http.Request, who caller) {
	if !who.known || !who.Node {
		s.fail(w, http.StatusForbidden, errPermissionDenied)
		return
	}
	nodeID := r.PathValue("id")
	waitIndex, _ := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	wait := defaultWait
	if d, err := time.ParseDuration(r.URL.Query().Get("wait")); err == nil {
		wait = d
	}
	s.mu.Lock()
	s.waits = append(s.waits, waitIndex)
	s.mu.Unlock()

	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		// A fault set while the query blocks fails it: a leader lost, the
		// agent going away.
		if fault := s.takeFaultLocked(NodeAllocations); fault != FaultNone {
			s.mu.Unlock()
			s.injure(w, fault)
			return
		}
		allocs, index := s.c.nodeAllocs(nodeID, who)
		changed := s.changed
		s.mu.Unlock()
		if waitIndex == 0 || index > waitIndex {
			setMeta(w, index)
			reply(w, allocs)
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			setMeta(w, index)
			reply(w, allocs)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// allocation is GET /v1/allocation/<id> (Alloc.GetAlloc). Seen on a real
// agent (allocwatch/nomad_test.go): 404 "alloc not found" for an ID the
// servers do not know (never placed, or collected), with the query meta;
// 500 `Unknown allocation "<id>"`, not 403, for one in a namespace the
// token lacks read-job in; 403 for an unknown secret.
func (s *Server) allocation(w http.ResponseWriter, r *http.Request, who caller) {
	if !who.known {
		s.fail(w, http.StatusForbidden, errPermissionDenied)
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	a, ok := s.c.allocs[id]
	index := s.c.index
	s.mu.Unlock()
	switch {
	case !ok:
		setMeta(w, index)
		s.fail(w, http.StatusNotFound, errAllocNotFound)
	case !who.readJob(a.Namespace):
		s.fail(w, http.StatusInternalServerError, fmt.Sprintf(errUnknownAlloc, id))
	default:
		setMeta(w, a.ModifyIndex)
		reply(w, a)
	}
}

// allocations is GET /v1/allocations (Alloc.List) in ?namespace= ("default"
// when absent, "*" for all): 403 when the token lacks read-job there (for
// "*": everywhere); else the stubs of the namespaces it may read. doctor
// asks it to tell a token without read-job.
func (s *Server) allocations(w http.ResponseWriter, r *http.Request, who caller) {
	ns := r.URL.Query().Get("namespace")
	if ns == "" {
		ns = "default"
	}
	allowed := who.readJob(ns)
	if ns == "*" {
		allowed = who.anyReadJob()
	}
	if !who.known || !allowed {
		s.fail(w, http.StatusForbidden, errPermissionDenied)
		return
	}
	s.mu.Lock()
	out := []*api.AllocationListStub{}
	for _, a := range s.c.allocs {
		if (ns == "*" || a.Namespace == ns) && who.readJob(a.Namespace) {
			out = append(out, &api.AllocationListStub{ID: a.ID, Namespace: a.Namespace, NodeID: a.NodeID, JobID: a.JobID,
				TaskGroup: a.TaskGroup, ClientStatus: a.ClientStatus, DesiredStatus: a.DesiredStatus,
				CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex})
		}
	}
	index := s.c.index
	s.mu.Unlock()
	setMeta(w, index)
	reply(w, out)
}

// allocStats is GET /v1/client/allocation/<id>/stats, which asks the
// client that runs the allocation. Seen on a real agent: 200 while the
// local client has the allocation's runner, which it keeps after the
// allocation ended and after a client-side GC, until the servers collect
// it; 404 `Unknown allocation "<id>"` once it has none; 403 "Permission
// denied" for an allocation in a namespace without read-job. The agent
// answers from its own client when that has the runner, and otherwise
// asks the servers (ClientAllocations.Stats), which refuse an unknown
// secret before they look the allocation up.
func (s *Server) allocStats(w http.ResponseWriter, r *http.Request, who caller) {
	id := r.PathValue("id")
	s.mu.Lock()
	a, known := s.c.allocs[id]
	local := s.c.local[id]
	s.mu.Unlock()
	switch {
	case !who.known:
		s.fail(w, http.StatusForbidden, errPermissionDenied)
	case !known && !local:
		s.fail(w, http.StatusNotFound, fmt.Sprintf(errUnknownAlloc, id))
	case known && !who.readJob(a.Namespace):
		s.fail(w, http.StatusForbidden, errPermissionDenied)
	case !local:
		s.fail(w, http.StatusNotFound, fmt.Sprintf(errUnknownAlloc, id))
	default:
		reply(w, api.AllocResourceUsage{ResourceUsage: &api.ResourceUsage{}, Tasks: map[string]*api.TaskResourceUsage{}})
	}
}
