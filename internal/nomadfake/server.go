package nomadfake

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// Endpoint names, the keys of Requests. The ones the watcher calls are
// internal/nomadapi's request kinds (its Kind* constants, the keys of
// Client.Requests and Watcher.Requests), so a test can compare what the
// watcher counted with what the agent saw.
const (
	NodeAllocations = "node_allocations"        // GET /v1/node/<id>/allocations
	Node            = "node"                    // GET /v1/node/<id>
	Nodes           = "nodes"                   // GET /v1/nodes
	AgentSelf       = "agent_self"              // GET /v1/agent/self
	Allocation      = "allocation"              // GET /v1/allocation/<id>
	Allocations     = "allocations"             // GET /v1/allocations
	AllocStats      = "client_allocation_stats" // GET /v1/client/allocation/<id>/stats
	TokenSelf       = "acl_token_self"          // GET /v1/acl/token/self
	Namespaces      = "namespaces"              // GET /v1/namespaces
	StatusLeader    = "status_leader"           // GET /v1/status/leader
)

// Server is one Nomad agent (server and client in one process, as
// internal/nomadtest runs it) seen through its HTTP API. Its methods are
// safe for concurrent use; every change to the cluster is one raft write
// that moves the index and wakes blocked queries.
type Server struct {
	srv *httptest.Server

	mu sync.Mutex
	// changed is closed and replaced on every write, and when a fault is
	// set: blocked queries wake and look again.
	changed   chan struct{}
	c         cluster
	tokens    map[string]Token // nil: ACLs disabled
	fault     Fault
	faultLeft int // requests the fault still applies to; <0: until cleared
	requests  map[string]int
	waits     []uint64 // ?index= of each node allocations query
	dialect   dialectValue
}

// New starts a fake agent whose client is registered as node nodeID, with
// ACLs disabled, and stops it when the test ends.
func New(t testing.TB, nodeID string) *Server {
	t.Helper()
	s := NewServer(nodeID)
	s.srv = httptest.NewServer(s.Handler())
	t.Cleanup(s.Close)
	return s
}

// NewServer is a fake agent that is not listening yet, for a caller that
// serves Handler on a listener of its own (a unix socket, as the simulation
// uses). New is the usual way in.
func NewServer(nodeID string) *Server {
	return &Server{changed: make(chan struct{}), c: newCluster(nodeID), requests: map[string]int{}}
}

// Close stops the listener New started, cutting blocked queries off.
func (s *Server) Close() {
	if s.srv != nil {
		s.srv.CloseClientConnections()
		s.srv.Close()
	}
}

// URL is the agent's HTTP address, for nomad.address.
func (s *Server) URL() string { return s.srv.URL }

// NodeID is the ID of the agent's client node.
func (s *Server) NodeID() string { return s.c.nodeID }

// Handler is the HTTP API: the endpoints the plugin's watcher and the
// operator CLI call, and nothing else (404 for the rest).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/node/{id}/allocations", s.route(NodeAllocations, s.nodeAllocations))
	mux.HandleFunc("GET /v1/node/{id}", s.route(Node, s.node))
	mux.HandleFunc("GET /v1/nodes", s.route(Nodes, s.nodes))
	mux.HandleFunc("GET /v1/agent/self", s.route(AgentSelf, s.agentSelf))
	mux.HandleFunc("GET /v1/allocation/{id}", s.route(Allocation, s.allocation))
	mux.HandleFunc("GET /v1/allocations", s.route(Allocations, s.allocations))
	mux.HandleFunc("GET /v1/client/allocation/{id}/stats", s.route(AllocStats, s.allocStats))
	mux.HandleFunc("GET /v1/acl/token/self", s.route(TokenSelf, s.tokenSelf))
	mux.HandleFunc("GET /v1/namespaces", s.route(Namespaces, s.namespaces))
	mux.HandleFunc("GET /v1/status/leader", s.route(StatusLeader, s.statusLeader))
	return mux
}

// handler answers one endpoint for the caller its token resolves to.
type handler func(w http.ResponseWriter, r *http.Request, who caller)

// route counts the request, applies an injected fault, and resolves the
// token. Only the faults that reach this endpoint apply: with no leader,
// the agent still answers what it knows itself.
func (s *Server) route(kind string, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests[kind]++
		fault := s.takeFaultLocked(kind)
		who := s.resolveLocked(r.Header.Get("X-Nomad-Token"))
		s.mu.Unlock()
		if s.injure(w, fault) {
			return
		}
		h(w, r, who)
	}
}

// Requests is how many requests of kind (NodeAllocations, ...) arrived,
// failed ones included.
func (s *Server) Requests(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[kind]
}

// RequestCounts is Requests for every kind asked at least once.
func (s *Server) RequestCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.requests)
}

// WaitIndexes is the ?index= of every node allocations query, in order:
// 0 for one that did not block.
func (s *Server) WaitIndexes() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.waits)
}

// Fault is a failure injected into the agent's answers.
type Fault int

const (
	FaultNone Fault = iota
	// FaultNoLeader: 500 "No cluster leader", what every endpoint the
	// servers answer gives during a leader election. The agent still
	// answers /v1/agent/self and its client's stats itself.
	FaultNoLeader
	// FaultReset: the connection closes without an answer, as when the
	// agent restarts under a request (allocwatch's TestNomadAgentRestart).
	FaultReset
	// FaultNoIndex: 200 with an empty list and no X-Nomad-Index, which no
	// Nomad sends (a proxy in between might): the watcher must not trust it.
	FaultNoIndex
)

// localEndpoints are answered by the agent itself, without the servers.
var localEndpoints = map[string]bool{AgentSelf: true, AllocStats: true}

// SetFault makes the next n requests fail with f (n < 0: until cleared
// with SetFault(FaultNone, 0)); queries blocked now wake and fail too.
func (s *Server) SetFault(f Fault, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault, s.faultLeft = f, n
	s.wakeLocked()
}

// takeFaultLocked is the fault for one request of kind, counted.
func (s *Server) takeFaultLocked(kind string) Fault {
	if s.fault == FaultNone || s.faultLeft == 0 || s.fault == FaultNoLeader && localEndpoints[kind] {
		return FaultNone
	}
	if s.faultLeft > 0 {
		s.faultLeft--
	}
	return s.fault
}

// injure answers with fault; false when there is none.
func (s *Server) injure(w http.ResponseWriter, fault Fault) bool {
	switch fault {
	case FaultNoLeader:
		s.fail(w, http.StatusInternalServerError, errNoLeader)
	case FaultReset:
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
	case FaultNoIndex:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("[]"))
	default:
		return false
	}
	return true
}

// setMeta is command/agent/http.go setMeta: the query meta of an answer
// the servers gave, a 404 "not found" included (the handler sets it
// before it checks the result). Errors of the RPC itself carry none.
func setMeta(w http.ResponseWriter, index uint64) {
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(index, 10))
	w.Header().Set("X-Nomad-KnownLeader", "true")
	w.Header().Set("X-Nomad-LastContact", "0")
}

// reply writes v as the agent does: application/json, no trailing
// newline of significance.
func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Error texts of Nomad 1.6.2 and 1.11.3 alike, as their HTTP APIs send them.
const (
	errPermissionDenied = "Permission denied"                          // structs.ErrPermissionDenied
	errTokenNotFound    = "ACL token not found"                        // structs.ErrTokenNotFound
	errNoLeader         = "No cluster leader"                          // structs.ErrNoLeader
	errACLDisabled      = "ACL support disabled"                       // structs.ErrACLDisabled (1.6.2's token/self)
	errNoSecret         = "acl token lookup failed: missing secret id" // 1.6.2's token/self without a token
	errAllocNotFound    = "alloc not found"                            // alloc_endpoint.go allocQuery
	errNodeNotFound     = "node not found"                             // node_endpoint.go nodeQuery
	errUnknownAlloc     = "Unknown allocation %q"                      // structs.NewErrUnknownAllocation

	// leaderAddr is /v1/status/leader's answer: the leader's RPC address.
	leaderAddr = "127.0.0.1:4647"
)
