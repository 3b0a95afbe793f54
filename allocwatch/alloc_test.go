package allocwatch

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

func TestConvertAlloc(t *testing.T) {
	t.Parallel()
	modified := time.Date(2026, 3, 11, 9, 10, 11, 12, time.UTC)
	cases := []struct {
		name string
		in   *api.Allocation
		want model.Alloc
	}{
		{
			name: "devices of several tasks, pending, in task then group order",
			in: &api.Allocation{
				ID: id(1), Namespace: "prod", JobID: "db", Job: &api.Job{Type: new("service")},
				TaskGroup: "g", NodeID: id(9), ClientStatus: "pending", DesiredStatus: "run",
				ModifyIndex: 40, CreateIndex: 30, PreviousAllocation: id(7),
				ModifyTime: modified.UnixNano(),
				AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
					"web": {Devices: []*api.AllocatedDeviceResource{
						{Vendor: "zfs", Type: "dataset", Name: "slow", DeviceIDs: []string{"slow-2"}},
						{Vendor: "nvidia", Type: "gpu", Name: "t4", DeviceIDs: []string{"GPU-1"}},
					}},
					"db": {Devices: []*api.AllocatedDeviceResource{
						{Vendor: "zfs", Type: "dataset", Name: "fast", DeviceIDs: []string{"fast-3", "fast-1"}},
					}},
					"sidecar": {},
					"nil":     nil,
				}},
			},
			want: model.Alloc{
				ID: id(1), Namespace: "prod", JobID: "db", JobType: "service", TaskGroup: "g", NodeID: id(9),
				ClientStatus: "pending", DesiredStatus: "run", ModifyIndex: 40, CreateIndex: 30,
				PreviousAllocation: id(7), ModifyTime: modified,
				Devices: []model.Device{
					{Task: "db", Vendor: "zfs", Type: "dataset", Name: "fast", IDs: []string{"fast-1", "fast-3"}},
					{Task: "web", Vendor: "nvidia", Type: "gpu", Name: "t4", IDs: []string{"GPU-1"}},
					{Task: "web", Vendor: "zfs", Type: "dataset", Name: "slow", IDs: []string{"slow-2"}},
				},
			},
		},
		{
			name: "task states as the client reported them",
			in: &api.Allocation{
				ID: id(2), ClientStatus: "running", DesiredStatus: "stop", NextAllocation: id(3),
				TaskStates: map[string]*api.TaskState{
					"main": {State: "running"}, "init": {State: "dead"}, "broken": nil,
				},
			},
			want: model.Alloc{
				ID: id(2), ClientStatus: "running", DesiredStatus: "stop", NextAllocation: id(3),
				TaskStates: map[string]string{"main": "running", "init": "dead"},
			},
		},
		{
			name: "ended: its last task's finish, the client's clock",
			in: &api.Allocation{
				ID: id(6), ClientStatus: "complete", DesiredStatus: "run",
				TaskStates: map[string]*api.TaskState{
					"main":     {State: "dead", FinishedAt: modified},
					"poststop": {State: "dead", FinishedAt: modified.Add(time.Second)},
				},
			},
			want: model.Alloc{
				ID: id(6), ClientStatus: "complete", DesiredStatus: "run",
				TaskStates: map[string]string{"main": "dead", "poststop": "dead"}, FinishedAt: modified.Add(time.Second),
			},
		},
		{
			name: "a task not finished: no end yet",
			in: &api.Allocation{
				ID: id(7), ClientStatus: "running", DesiredStatus: "run",
				TaskStates: map[string]*api.TaskState{"main": {State: "dead", FinishedAt: modified}, "side": {State: "running"}},
			},
			want: model.Alloc{
				ID: id(7), ClientStatus: "running", DesiredStatus: "run",
				TaskStates: map[string]string{"main": "dead", "side": "running"},
			},
		},
		{
			name: "nothing optional: no job, resources, states or time",
			in:   &api.Allocation{ID: id(4), ClientStatus: "lost", DesiredStatus: "stop"},
			want: model.Alloc{ID: id(4), ClientStatus: "lost", DesiredStatus: "stop"},
		},
		{
			name: "stopped as lost by the servers, complete since its node came back",
			in: &api.Allocation{ID: id(8), ClientStatus: "complete", DesiredStatus: "stop",
				DesiredDescription: "alloc is lost since its node is down"},
			want: model.Alloc{ID: id(8), ClientStatus: "complete", DesiredStatus: "stop", LostByServers: true},
		},
		{
			name: "stopped for another reason: not lost",
			in: &api.Allocation{ID: id(9), ClientStatus: "complete", DesiredStatus: "stop",
				DesiredDescription: "alloc not needed due to job update"},
			want: model.Alloc{ID: id(9), ClientStatus: "complete", DesiredStatus: "stop"},
		},
		{
			name: "job without type",
			in:   &api.Allocation{ID: id(5), Job: &api.Job{}},
			want: model.Alloc{ID: id(5)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := convertAlloc(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("convertAlloc:\n got  %+v\n want %+v", got, tc.want)
			}
		})
	}
}

func TestConvertAllocDoesNotAlias(t *testing.T) {
	t.Parallel()
	in := apiAlloc(1, "running", withDevice("db", "zfs", "dataset", "fast", "b", "a"))
	got := convertAlloc(in)
	in.AllocatedResources.Tasks["db"].Devices[0].DeviceIDs[0] = "z"
	if got.Devices[0].IDs[0] != "a" || got.Devices[0].IDs[1] != "b" {
		t.Errorf("converted IDs follow the input: %v", got.Devices[0].IDs)
	}
}

func TestAllocTerminal(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                   string
		client, desired        string
		clientTerm, serverTerm bool
	}{
		{name: "pending", client: "pending", desired: "run"},
		{name: "running", client: "running", desired: "run"},
		{name: "unknown (disconnected) is not terminal", client: "unknown", desired: "run"},
		{name: "stopping", client: "running", desired: "stop", serverTerm: true},
		{name: "evicted still running", client: "running", desired: "evict", serverTerm: true},
		{name: "complete", client: "complete", desired: "run", clientTerm: true},
		{name: "failed", client: "failed", desired: "run", clientTerm: true},
		{name: "lost", client: "lost", desired: "stop", clientTerm: true, serverTerm: true},
		{name: "stopped and complete", client: "complete", desired: "stop", clientTerm: true, serverTerm: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := model.Alloc{ClientStatus: tc.client, DesiredStatus: tc.desired}
			if got := a.ClientTerminal(); got != tc.clientTerm {
				t.Errorf("ClientTerminal() = %t, want %t", got, tc.clientTerm)
			}
			if got := a.ServerTerminal(); got != tc.serverTerm {
				t.Errorf("ServerTerminal() = %t, want %t", got, tc.serverTerm)
			}
		})
	}
}

func TestHoldsDevice(t *testing.T) {
	t.Parallel()
	a := convertAlloc(apiAlloc(1, "running",
		withDevice("db", "zfs", "dataset", "fast", "fast-1", "fast-2"),
		withDevice("web", "zfs", "dataset", "slow", "slow-1"),
	))
	cases := []struct {
		name              string
		vendor, typ, inst string
		want              bool
	}{
		{name: "first task's instance", vendor: "zfs", typ: "dataset", inst: "fast-2", want: true},
		{name: "second task's instance", vendor: "zfs", typ: "dataset", inst: "slow-1", want: true},
		{name: "unassigned instance", vendor: "zfs", typ: "dataset", inst: "fast-3"},
		{name: "other vendor", vendor: "nvidia", typ: "dataset", inst: "fast-1"},
		{name: "other type", vendor: "zfs", typ: "zvol", inst: "fast-1"},
		{name: "empty ID", vendor: "zfs", typ: "dataset", inst: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := a.HoldsDevice(tc.vendor, tc.typ, tc.inst); got != tc.want {
				t.Errorf("HoldsDevice(%q, %q, %q) = %t, want %t", tc.vendor, tc.typ, tc.inst, got, tc.want)
			}
		})
	}
}

// TestConvertAllocReadsWhatTheNodeListKeeps: the node's allocation list
// is decoded by nomadapi's own decoder, which keeps only some of an
// allocation's fields; whatever convertAlloc reads must be among them.
// Every scalar field of an allocation is set (by reflection, so a field
// convertAlloc reads later is covered too), served as the agent serves
// the list, read back through nomadapi, and converted: the same as the
// allocation converted directly. (The decoder dropped DesiredDescription,
// so a holder the servers stopped as lost ended "complete" on its node:
// e2e TestReplicaNodeLoss, 2026-11-28.)
func TestConvertAllocReadsWhatTheNodeListKeeps(t *testing.T) {
	full := &api.Allocation{}
	v := reflect.ValueOf(full).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name + "-value")
		case reflect.Uint64, reflect.Uint32, reflect.Uint:
			f.SetUint(uint64(i + 1))
		case reflect.Int64, reflect.Int32, reflect.Int:
			f.SetInt(int64(i + 1))
		case reflect.Bool:
			f.SetBool(true)
		}
	}
	full.ID, full.NodeID = id(1), id(2)
	full.DesiredDescription = "alloc is lost since its node is down"
	full.ClientStatus, full.DesiredStatus = api.AllocClientStatusComplete, api.AllocDesiredStatusStop
	typ := "service"
	full.Job = &api.Job{Type: &typ}
	full.TaskStates = map[string]*api.TaskState{"t": {State: "dead", FinishedAt: time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)}}
	full.AllocatedResources = &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
		"t": {Devices: []*api.AllocatedDeviceResource{{Vendor: "zfs", Type: "dataset", Name: "pg", DeviceIDs: []string{"pg-1"}}}}}}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/node/{id}/allocations", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Nomad-Index", "7")
		_ = json.NewEncoder(w).Encode([]*api.Allocation{full})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := nomadapi.New(nomadapi.Config{Address: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, _, err := c.NodeAllocations(t.Context(), full.NodeID, 0, 0)
	if err != nil || len(list) != 1 {
		t.Fatalf("NodeAllocations = %v, %v", list, err)
	}
	want, got := convertAlloc(full), convertAlloc(list[0])
	if !reflect.DeepEqual(got, want) {
		t.Errorf("converted from the node's list:\n%+v\nconverted from the allocation:\n%+v", got, want)
	}
	if !got.LostByServers {
		t.Errorf("LostByServers lost on the way: %+v", got)
	}
}
