package sim

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	napi "github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/nomad/structs"
)

// api is the simulated Nomad HTTP API of the local agent, on a unix
// socket: the endpoints allocwatch uses, answered from the scheduler's
// state store with Nomad's status codes and bodies, so allocwatch's real
// client, decoding and error classification run.
type api struct {
	w    *World
	srv  *httptest.Server
	sock string
}

// apiFaults is what the handler reads; World.mu guards it.
type apiFaults struct {
	now        time.Time
	downTill   time.Time // agent unreachable (restart, overload)
	forbidTill time.Time // the token lacks read-job in hiddenNS
	connected  bool      // the agent reaches the servers
	// indexShift is subtracted from every index (it went backwards);
	// lowIndex makes the cluster look rebuilt (indexes restart low). Both
	// change only the X-Nomad-Index header; ClusterReset rebuilds the
	// servers' state itself.
	indexShift uint64
	lowIndex   bool
	// statsFailTill: the local client's allocation endpoint fails on its
	// own, the agent up, as statsFail says (statsFailures).
	statsFailTill time.Time
	statsFail     int
}

// statsFailures are the ways the local client's endpoint fails on its own:
// none of them says whether the client has the allocation.
var statsFailures = []struct {
	code int
	body string
}{
	{http.StatusInternalServerError, "rpc error: EOF"},
	{http.StatusInternalServerError, "failed to get alloc stats: context deadline exceeded"},
	{http.StatusServiceUnavailable, "client not ready"},
	{0, ""}, // the connection closes with no answer
}

func newAPI(w *World) (*api, error) {
	// A unix socket path must be short (108 bytes): not below a test's
	// temporary directory.
	dir, err := os.MkdirTemp("", "ndz-api-")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "api.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	a := &api{w: w, sock: sock}
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(a.serve))
	a.srv.Listener = l
	a.srv.Start()
	return a, nil
}

func (a *api) close() {
	a.srv.Close()
	_ = os.RemoveAll(filepath.Dir(a.sock))
}

func (w *World) faults() apiFaults {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.apiF
}

func (w *World) setFaults(fn func(f *apiFaults)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fn(&w.apiF)
}

func (a *api) serve(rw http.ResponseWriter, r *http.Request) {
	f := a.w.faults()
	if f.now.Before(f.downTill) {
		// The agent is down: nothing listens. A closed connection is the
		// nearest an HTTP server can get to a refused one.
		hangUp(rw)
		return
	}
	forbid := f.now.Before(f.forbidTill)
	path := r.URL.Path
	switch {
	case strings.HasPrefix(path, "/v1/client/allocation/") && strings.HasSuffix(path, "/stats"):
		id := strings.TrimSuffix(strings.TrimPrefix(path, "/v1/client/allocation/"), "/stats")
		a.w.mu.Lock()
		la, ok := a.w.local[id]
		a.w.mu.Unlock()
		switch {
		case f.now.Before(f.statsFailTill):
			if fail := statsFailures[f.statsFail%len(statsFailures)]; fail.code != 0 {
				http.Error(rw, fail.body, fail.code)
			} else {
				hangUp(rw)
			}
		case ok && forbid && la.ns == hiddenNS:
			a.w.noteHidden()
			http.Error(rw, "Permission denied", http.StatusForbidden)
		case ok:
			a.json(rw, f, map[string]any{})
		default:
			http.Error(rw, fmt.Sprintf("Unknown allocation %q", id), http.StatusNotFound)
		}
		return
	case !f.connected:
		http.Error(rw, "rpc error: failed to get conn: dial tcp 10.0.0.1:4647: i/o timeout", http.StatusInternalServerError)
		return
	case path == "/v1/node/"+nodeID+"/allocations":
		if !a.block(rw, r) {
			return
		}
		if f = a.w.faults(); f.now.Before(f.downTill) || !f.connected {
			// The wait ended with the agent gone, or cut off.
			http.Error(rw, "rpc error: failed to get conn: dial tcp 10.0.0.1:4647: i/o timeout", http.StatusInternalServerError)
			return
		}
		forbid = f.now.Before(f.forbidTill)
		var out []*napi.Allocation
		for _, sa := range a.w.cluster.Allocs(nodeID) {
			if forbid && sa.Namespace == hiddenNS {
				a.w.noteHidden()
				continue // Node.GetAllocs drops what the token cannot read
			}
			out = append(out, toAPI(sa))
		}
		if out == nil {
			out = []*napi.Allocation{}
		}
		a.json(rw, f, out)
	case path == "/v1/node/"+nodeID:
		a.json(rw, f, map[string]any{"ID": nodeID, "Status": "ready"})
	case strings.HasPrefix(path, "/v1/allocation/"):
		id := strings.TrimPrefix(path, "/v1/allocation/")
		sa := a.w.cluster.Alloc(id)
		switch {
		case sa == nil:
			http.Error(rw, "alloc not found", http.StatusNotFound)
		case forbid && sa.Namespace == hiddenNS:
			a.w.noteHidden()
			http.Error(rw, fmt.Sprintf("Unknown allocation %q", id), http.StatusInternalServerError)
		default:
			a.json(rw, f, toAPI(sa))
		}
	default:
		http.Error(rw, "Invalid URL: "+path, http.StatusNotFound)
	}
}

// hangUp closes the connection without an answer.
func hangUp(rw http.ResponseWriter) {
	if hj, ok := rw.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
			return
		}
	}
	http.Error(rw, "agent down", http.StatusServiceUnavailable)
}

// block is Nomad's blocking query (nomad/rpc.go blockingRPC) for the
// watcher's Run: a query with an index waits while the answer's index
// is not above it, up to its wait. The wait is the world's: the handler
// tells the world where the watcher waits and answers when the world
// hands the watcher the turn (watchLoop). It reports false when the
// query was abandoned (the watcher stopped).
func (a *api) block(rw http.ResponseWriter, r *http.Request) bool {
	index, _ := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	if index == 0 {
		return true
	}
	wait, err := time.ParseDuration(r.URL.Query().Get("wait"))
	if err != nil || wait <= 0 {
		wait = 5 * time.Minute // Nomad's default
	}
	a.w.mu.Lock()
	wl := a.w.watching
	a.w.mu.Unlock()
	p := &park{until: a.w.faults().now.Add(wait), index: index, wake: make(chan struct{})}
	if wl == nil || a.w.due(p) {
		return true
	}
	select {
	case wl.parks <- p:
	case <-r.Context().Done():
		return false
	}
	select {
	case <-p.wake:
		return true
	case <-r.Context().Done():
		return false
	}
}

// index is the X-Nomad-Index of the node's allocations, as Nomad computes
// it (Node.GetAllocs): the highest ModifyIndex among them, hidden ones
// included, or the allocation table's index when there are none. It goes
// backwards when the newest allocation is collected. The header faults
// then apply.
func (a *api) index(f apiFaults) uint64 {
	var idx uint64
	for _, sa := range a.w.cluster.Allocs(nodeID) {
		idx = max(idx, sa.ModifyIndex)
	}
	if idx == 0 {
		idx = max(a.w.cluster.Index(), 1)
	}
	switch {
	case f.lowIndex:
		idx = idx%7 + 1
	case f.indexShift < idx:
		idx -= f.indexShift
	default:
		idx = 1
	}
	return idx
}

func (a *api) json(rw http.ResponseWriter, f apiFaults, v any) {
	rw.Header().Set("X-Nomad-Index", strconv.FormatUint(a.index(f), 10))
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(v)
}

// toAPI is the allocation as GET /v1/node/<id>/allocations shows it: the
// fields the watcher reads, with Nomad's JSON names.
func toAPI(sa *structs.Allocation) *napi.Allocation {
	out := &napi.Allocation{
		ID: sa.ID, Namespace: sa.Namespace, NodeID: sa.NodeID, JobID: sa.JobID, TaskGroup: sa.TaskGroup,
		Name: sa.Name, ClientStatus: sa.ClientStatus, DesiredStatus: sa.DesiredStatus, DesiredDescription: sa.DesiredDescription,
		CreateIndex: sa.CreateIndex, ModifyIndex: sa.ModifyIndex, ModifyTime: sa.ModifyTime,
		PreviousAllocation: sa.PreviousAllocation, NextAllocation: sa.NextAllocation,
		TaskStates: map[string]*napi.TaskState{},
	}
	if sa.Job != nil {
		t := sa.Job.Type
		out.Job = &napi.Job{Type: &t}
	}
	for name, ts := range sa.TaskStates {
		out.TaskStates[name] = &napi.TaskState{State: ts.State, Failed: ts.Failed}
	}
	if sa.AllocatedResources != nil {
		out.AllocatedResources = &napi.AllocatedResources{Tasks: map[string]*napi.AllocatedTaskResources{}}
		for name, tr := range sa.AllocatedResources.Tasks {
			atr := &napi.AllocatedTaskResources{}
			for _, d := range tr.Devices {
				atr.Devices = append(atr.Devices, &napi.AllocatedDeviceResource{Vendor: d.Vendor, Type: d.Type, Name: d.Name,
					DeviceIDs: append([]string(nil), d.DeviceIDs...)})
			}
			out.AllocatedResources.Tasks[name] = atr
		}
	}
	return out
}

// noteHidden counts an answer that hid an allocation from the token.
func (w *World) noteHidden() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hides++
}
