package allocwatch

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// fakeNomad emulates, below the seam, the five endpoints the watcher uses,
// with the status codes and bodies a real Nomad 1.11.3 agent gave (see
// nomad_test.go): blocking on ?index= with ?wait=, X-Nomad-Index as the
// highest ModifyIndex of the node's allocations (hidden ones included),
// allocations of namespaces without read-job silently left out, 200 with
// an empty list for an unknown node.
type fakeNomad struct {
	srv *httptest.Server

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every write
	nodeID     string
	registered bool
	agentNode  string // stats.client.node_id; "" for a server-only agent
	tableIndex uint64
	allocs     map[string]*api.Allocation
	local      map[string]bool // allocations the local client has
	tokens     map[string]fakeToken
	fault      fakeFault
	faultLeft  int // requests the fault still applies to; <0: until cleared
	requests   map[string]int
	waits      []uint64 // ?index= of each node allocations query
}

// fakeToken is an ACL token's rights; with no tokens ACLs are off.
type fakeToken struct {
	node, agent bool
	namespaces  []string // read-job; "*" for all
}

type fakeFault int

const (
	faultNone     fakeFault = iota
	faultNoLeader           // 500 "No cluster leader"
	faultReset              // the connection is closed without an answer
	faultNoIndex            // 200 without X-Nomad-Index
)

func newFakeNomad(t testing.TB, nodeID string) *fakeNomad {
	t.Helper()
	f := &fakeNomad{
		changed:    make(chan struct{}),
		nodeID:     nodeID,
		registered: true,
		agentNode:  nodeID,
		tableIndex: 10,
		allocs:     map[string]*api.Allocation{},
		local:      map[string]bool{},
		requests:   map[string]int{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/node/{id}/allocations", f.handle(kindNodeAllocs, f.nodeAllocs))
	mux.HandleFunc("GET /v1/node/{id}", f.handle(kindNode, f.node))
	mux.HandleFunc("GET /v1/agent/self", f.handle(kindAgentSelf, f.agentSelf))
	mux.HandleFunc("GET /v1/allocation/{id}", f.handle(kindAlloc, f.alloc))
	mux.HandleFunc("GET /v1/client/allocation/{id}/stats", f.handle(kindAllocStats, f.allocStats))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	return f
}

// handle counts the request and applies an injected fault.
func (f *fakeNomad) handle(kind string, h func(http.ResponseWriter, *http.Request, fakeToken)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests[kind]++
		fault := f.takeFaultLocked()
		tok, ok := f.tokenLocked(r)
		f.mu.Unlock()
		if f.injure(w, fault) {
			return
		}
		if !ok {
			httpError(w, http.StatusForbidden, "Permission denied")
			return
		}
		h(w, r, tok)
	}
}

func (f *fakeNomad) takeFaultLocked() fakeFault {
	if f.fault == faultNone || f.faultLeft == 0 {
		return faultNone
	}
	if f.faultLeft > 0 {
		f.faultLeft--
	}
	return f.fault
}

// injure answers with the fault; false when there is none to apply.
func (f *fakeNomad) injure(w http.ResponseWriter, fault fakeFault) bool {
	switch fault {
	case faultNoLeader:
		httpError(w, http.StatusInternalServerError, "No cluster leader")
	case faultReset:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	case faultNoIndex:
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("[]"))
	default:
		return false
	}
	return true
}

func (f *fakeNomad) tokenLocked(r *http.Request) (fakeToken, bool) {
	if f.tokens == nil {
		return fakeToken{node: true, agent: true, namespaces: []string{"*"}}, true
	}
	tok, ok := f.tokens[r.Header.Get("X-Nomad-Token")]
	return tok, ok
}

func (t fakeToken) readJob(ns string) bool {
	return slices.Contains(t.namespaces, "*") || slices.Contains(t.namespaces, ns)
}

func (f *fakeNomad) nodeAllocs(w http.ResponseWriter, r *http.Request, tok fakeToken) {
	if !tok.node {
		httpError(w, http.StatusForbidden, "Permission denied")
		return
	}
	id := r.PathValue("id")
	waitIndex, _ := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	wait := 300 * time.Second
	if s := r.URL.Query().Get("wait"); s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			wait = d
		}
	}
	f.mu.Lock()
	f.waits = append(f.waits, waitIndex)
	f.mu.Unlock()

	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		if fault := f.takeFaultLocked(); fault != faultNone {
			f.mu.Unlock()
			f.injure(w, fault)
			return
		}
		allocs, index := f.visibleLocked(id, tok)
		changed := f.changed
		f.mu.Unlock()
		if waitIndex == 0 || index > waitIndex {
			writeJSON(w, index, allocs)
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			writeJSON(w, index, allocs)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// visibleLocked is Node.GetAllocs: the index counts every allocation of the
// node, the list only those the token may read.
func (f *fakeNomad) visibleLocked(nodeID string, tok fakeToken) ([]*api.Allocation, uint64) {
	var out []*api.Allocation
	var index uint64
	for _, a := range f.allocs {
		if a.NodeID != nodeID {
			continue
		}
		index = max(index, a.ModifyIndex)
		if tok.readJob(a.Namespace) {
			out = append(out, a)
		}
	}
	if index == 0 {
		index = f.tableIndex
	}
	slices.SortFunc(out, func(x, y *api.Allocation) int { return int(y.CreateIndex) - int(x.CreateIndex) })
	return out, index
}

func (f *fakeNomad) node(w http.ResponseWriter, r *http.Request, tok fakeToken) {
	if !tok.node {
		httpError(w, http.StatusForbidden, "Permission denied")
		return
	}
	f.mu.Lock()
	ok := f.registered && r.PathValue("id") == f.nodeID
	index := f.tableIndex
	f.mu.Unlock()
	if !ok {
		w.Header().Set("X-Nomad-Index", strconv.FormatUint(index, 10))
		httpError(w, http.StatusNotFound, "node not found")
		return
	}
	writeJSON(w, index, &api.Node{ID: r.PathValue("id"), Status: "ready"})
}

func (f *fakeNomad) agentSelf(w http.ResponseWriter, _ *http.Request, tok fakeToken) {
	if !tok.agent {
		httpError(w, http.StatusForbidden, "Permission denied")
		return
	}
	f.mu.Lock()
	self := map[string]any{"config": map[string]any{}, "member": map[string]any{}, "stats": map[string]any{}}
	if f.agentNode != "" {
		self["stats"] = map[string]any{"client": map[string]string{"node_id": f.agentNode}}
	}
	f.mu.Unlock()
	writeJSON(w, 0, self)
}

func (f *fakeNomad) alloc(w http.ResponseWriter, r *http.Request, tok fakeToken) {
	id := r.PathValue("id")
	f.mu.Lock()
	a, ok := f.allocs[id]
	index := f.tableIndex
	f.mu.Unlock()
	switch {
	case !ok:
		w.Header().Set("X-Nomad-Index", strconv.FormatUint(index, 10))
		httpError(w, http.StatusNotFound, "alloc not found")
	case !tok.readJob(a.Namespace):
		httpError(w, http.StatusInternalServerError, fmt.Sprintf("Unknown allocation %q", id))
	default:
		writeJSON(w, a.ModifyIndex, a)
	}
}

func (f *fakeNomad) allocStats(w http.ResponseWriter, r *http.Request, tok fakeToken) {
	id := r.PathValue("id")
	f.mu.Lock()
	a, known := f.allocs[id]
	local := f.local[id]
	f.mu.Unlock()
	switch {
	case known && !tok.readJob(a.Namespace):
		httpError(w, http.StatusForbidden, "Permission denied")
	case !local:
		httpError(w, http.StatusNotFound, fmt.Sprintf("Unknown allocation %q", id))
	default:
		writeJSON(w, 0, map[string]any{"ResourceUsage": map[string]any{}, "Tasks": map[string]any{}, "Timestamp": 0})
	}
}

func writeJSON(w http.ResponseWriter, index uint64, v any) {
	w.Header().Set("Content-Type", "application/json")
	if index > 0 {
		w.Header().Set("X-Nomad-Index", strconv.FormatUint(index, 10))
		w.Header().Set("X-Nomad-KnownLeader", "true")
		w.Header().Set("X-Nomad-LastContact", "0")
	}
	json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	w.Write([]byte(msg))
}

// Mutations, each one raft write: the table index moves, waiters wake.

func (f *fakeNomad) writeLocked() uint64 {
	f.tableIndex++
	close(f.changed)
	f.changed = make(chan struct{})
	return f.tableIndex
}

// upsert stores a copy of a, placed on this node unless a.NodeID is set,
// and marks it local to the client.
func (f *fakeNomad) upsert(a *api.Allocation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := *a
	if c.NodeID == "" {
		c.NodeID = f.nodeID
	}
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	idx := f.writeLocked()
	if old, ok := f.allocs[c.ID]; ok {
		c.CreateIndex = old.CreateIndex
	} else {
		c.CreateIndex = idx
	}
	c.ModifyIndex = idx
	f.allocs[c.ID] = &c
	f.local[c.ID] = true
}

// setStatus changes an allocation's client status.
func (f *fakeNomad) setStatus(id, clientStatus string) {
	f.mu.Lock()
	a := *f.allocs[id]
	f.mu.Unlock()
	a.ClientStatus = clientStatus
	f.upsert(&a)
}

// gc removes an allocation from the servers and from the client.
func (f *fakeNomad) gc(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.allocs, id)
	delete(f.local, id)
	f.writeLocked()
}

// touch is a write that changes no allocation of the node (e.g. one in
// another namespace on another node): blocked queries wake and re-block.
func (f *fakeNomad) touch() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writeLocked()
}

// setFault makes the next n requests fail (n < 0: until cleared), including
// blocked queries, which wake and fail.
func (f *fakeNomad) setFault(fault fakeFault, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault, f.faultLeft = fault, n
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeNomad) set(fn func(f *fakeNomad)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeNomad) count(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[kind]
}

func (f *fakeNomad) requestCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.requests)
}

func (f *fakeNomad) waitIndexes() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.waits)
}
