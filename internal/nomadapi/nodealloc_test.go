package nomadapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// recordedRequest is what Nomad sees of a request, less what net/http
// adds on its own (User-Agent, Accept-Encoding).
type recordedRequest struct {
	Method, Path string
	Query        map[string][]string
	Header       map[string][]string
}

// recorder answers every request with one allocation and X-Nomad-Index 7,
// or with status if set, and keeps what it was asked. It is no Nomad (that
// is internal/nomadfake): it answers at once whatever the index, so the
// same request can be sent through both paths and compared.
type recorder struct {
	status int

	mu   sync.Mutex
	seen []recordedRequest
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := r.Header.Clone()
	h.Del("User-Agent")
	h.Del("Accept-Encoding")
	rec.mu.Lock()
	rec.seen = append(rec.seen, recordedRequest{r.Method, r.URL.Path, r.URL.Query(), h})
	rec.mu.Unlock()
	if rec.status != 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(rec.status)
		_, _ = w.Write([]byte("Permission denied"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Nomad-Index", "7")
	_ = json.NewEncoder(w).Encode([]*api.Allocation{apiAlloc(1, "running")})
}

func (rec *recorder) take(t *testing.T) recordedRequest {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.seen) != 1 {
		t.Fatalf("%d requests, want 1", len(rec.seen))
	}
	r := rec.seen[0]
	rec.seen = nil
	return r
}

// TestNodeAllocsRequestAsTheAPIBuildsIt: the client builds GET
// /v1/node/<id>/allocations itself (to decode the answer its own way); for
// every setting that shapes a request, Nomad must see what it sees when
// the api package asks with Nodes().Allocations.
func TestNodeAllocsRequestAsTheAPIBuildsIt(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		cfg  Config
		unix bool
	}{
		{name: "defaults"},
		{name: "region in the config", cfg: Config{Region: "eu-west"}},
		{name: "region from NOMAD_REGION", env: map[string]string{"NOMAD_REGION": "ap"}},
		{name: "basic auth from NOMAD_HTTP_AUTH", env: map[string]string{"NOMAD_HTTP_AUTH": "ops:s3cret"}},
		{name: "namespace from NOMAD_NAMESPACE", env: map[string]string{"NOMAD_NAMESPACE": "batch"}},
		{name: "token", cfg: Config{Token: "f8b6b8a4-0000-4000-8000-000000000001"}},
		{name: "unix socket", unix: true, cfg: Config{Token: "f8b6b8a4-0000-4000-8000-000000000002"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			rec := &recorder{}
			cfg := tc.cfg
			cfg.Address = serve(t, rec, tc.unix)
			c, err := New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, wait := range []struct {
				index uint64
				wait  time.Duration
			}{{0, 0}, {42, 90 * time.Second}} {
				q := (&api.QueryOptions{AuthToken: c.Token(), WaitIndex: wait.index, WaitTime: wait.wait}).WithContext(ctx)
				if _, _, err := c.api.Nodes().Allocations(id(9), q); err != nil {
					t.Fatalf("api: %v", err)
				}
				want := rec.take(t)
				allocs, index, err := c.NodeAllocations(ctx, id(9), wait.index, wait.wait)
				if err != nil {
					t.Fatalf("NodeAllocations: %v", err)
				}
				if got := rec.take(t); !reflect.DeepEqual(got, want) {
					t.Errorf("index %d: Nomad saw\n%+v\nthe api package's request is\n%+v", wait.index, got, want)
				}
				if index != 7 || len(allocs) != 1 || allocs[0].ID != id(1) {
					t.Errorf("answer: index %d, %d allocations", index, len(allocs))
				}
			}
		})
	}
}

// TestNodeAllocsRefusal: a refusal of the request built here reads as the
// api package's (status, body, its wording), so it is classified the same
// way.
func TestNodeAllocsRefusal(t *testing.T) {
	rec := &recorder{status: http.StatusForbidden}
	c, err := New(Config{Address: serve(t, rec, false)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, apiErr := c.api.Nodes().Allocations(id(9), nil)
	_, _, err = c.NodeAllocations(context.Background(), id(9), 0, 0)
	if !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("NodeAllocations: %v, want ErrPermissionDenied", err)
	}
	code, body := HTTPStatus(err)
	wantCode, wantBody := HTTPStatus(apiErr)
	if code != wantCode || body != wantBody {
		t.Errorf("refusal reads as %d %q, the api package's as %d %q", code, body, wantCode, wantBody)
	}
	if want := apiErr.Error(); !errors.Is(err, ErrPermissionDenied) || !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

// TestDecodeNodeAllocsAsEncodingJSON: on allocations as Nomad sends them
// (every field set, jobs and events included), decodeNodeAllocs gives
// what encoding/json gives.
func TestDecodeNodeAllocsAsEncodingJSON(t *testing.T) {
	typ := "service"
	full := apiAlloc(3, "running", func(a *api.Allocation) {
		a.Job = &api.Job{Type: &typ, ID: new("web"), TaskGroups: []*api.TaskGroup{{Name: new("g"), Tasks: []*api.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true", "args": []any{"a", 1.5, nil}}}}}}}
		a.PreviousAllocation, a.NextAllocation = id(2), id(4)
		a.DesiredDescription = "alloc is lost since its node is down"
		a.TaskStates = map[string]*api.TaskState{"t": {State: "running", Events: []*api.TaskEvent{{Type: "Started", Details: map[string]string{"k": "v"}}}},
			"init": {State: "dead", FinishedAt: time.Date(2026, 3, 11, 9, 10, 11, 12, time.UTC)}}
		a.AllocatedResources = &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
			"t": {Devices: []*api.AllocatedDeviceResource{{Vendor: "zfs", Type: "dataset", Name: "scratch", DeviceIDs: []string{"scratch-2", "scratch-1"}}}},
		}}
	})
	body, err := json.Marshal([]*api.Allocation{full, nil, apiAlloc(5, "complete")})
	if err != nil {
		t.Fatal(err)
	}
	var want []*nodeAlloc
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatal(err)
	}
	got, err := decodeNodeAllocs(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Errorf("decodeNodeAllocs:\n%s\nencoding/json:\n%s", gj, wj)
	}
	if !slices.Equal(got[0].AllocatedResources.Tasks["t"].Devices[0].DeviceIDs, []string{"scratch-2", "scratch-1"}) || got[0].PreviousAllocation != id(2) {
		t.Errorf("fields lost: %+v", got[0])
	}
	// The servers' word that they stopped it as lost (model.Alloc.LostByServers).
	if d := got[0].allocation().DesiredDescription; !LostByServers(d) {
		t.Errorf("desired description lost: %q", d)
	}
}

// serve answers h over HTTP, or over a unix socket (unix://<path>).
func serve(t *testing.T, h http.Handler, unix bool) string {
	t.Helper()
	if !unix {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	sock := filepath.Join(t.TempDir(), "api.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "unix://" + sock
}
