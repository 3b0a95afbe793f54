package allocwatch

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// seedAllocs is a node's allocation list as Nomad answers it: one running
// allocation holding a slot, one complete, as the watcher decodes them.
func seedAllocs(f *testing.F) []byte {
	f.Helper()
	typ := "batch"
	allocs := []*api.Allocation{{
		ID: "1cc0a14a-c239-313f-9be4-9ee3e8cc0399", Namespace: "default", JobID: "pg", TaskGroup: "db",
		NodeID: "f3804c9e-0000-4000-8000-000000000001", ClientStatus: "running", DesiredStatus: "run",
		ModifyIndex: 42, CreateIndex: 40, ModifyTime: 1700000000000000000, Job: &api.Job{Type: &typ},
		TaskStates: map[string]*api.TaskState{"db": {State: "running"}},
		AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
			"db": {Devices: []*api.AllocatedDeviceResource{{Vendor: "zfs", Type: "dataset", Name: "pg", DeviceIDs: []string{"pg-2", "pg-1"}}}},
		}},
	}, {ID: "0aa0a14a-c239-313f-9be4-9ee3e8cc0399", ClientStatus: "complete", DesiredStatus: "stop", PreviousAllocation: "x"}}
	b, err := json.Marshal(allocs)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzDecodeAllocs: whatever the API answers to GET
// /v1/node/<id>/allocations, decoding and converting it does not panic, the
// snapshot is sorted by ID, device IDs are sorted, a clone has the same
// content, and nil entries are dropped.
func FuzzDecodeAllocs(f *testing.F) {
	f.Add(seedAllocs(f))
	f.Add([]byte(`[null, {"ID": "x", "AllocatedResources": {"Tasks": {"t": null, "u": {"Devices": [null]}}}}]`))
	f.Add([]byte(`[{"TaskStates": {"a": null}, "Job": {"Type": null}}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var allocs []*api.Allocation
		if json.Unmarshal(body, &allocs) != nil {
			return
		}
		nonNil := 0
		for _, a := range allocs {
			if a != nil {
				nonNil++
			}
		}
		s := newSnapshot("node", 7, allocs, time.Unix(0, 0))
		if len(s.Allocs) != nonNil {
			t.Fatalf("%d allocations from %d non-nil", len(s.Allocs), nonNil)
		}
		if !slices.IsSortedFunc(s.Allocs, func(x, y model.Alloc) int { return strings.Compare(x.ID, y.ID) }) {
			t.Fatal("snapshot not sorted by ID")
		}
		for _, a := range s.Allocs {
			for _, d := range a.Devices {
				if !slices.IsSorted(d.IDs) {
					t.Fatalf("device IDs %v not sorted", d.IDs)
				}
			}
			if a.ClientTerminal() && a.ClientStatus == "running" {
				t.Fatalf("running allocation %s read as client-terminal", a.ID)
			}
		}
		if c := cloneSnapshot(s); !sameContent(s, c) {
			t.Fatal("a clone differs from its snapshot")
		}
		// What the watcher decodes (nomadapi.DecodeNodeAllocations: the
		// fields it reads, the job skipped) converts to what encoding/json
		// makes of the whole allocation, as the api package decodes it.
		partial, err := nomadapi.DecodeNodeAllocations(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("decodes as []*api.Allocation but not with DecodeNodeAllocations: %v", err)
		}
		if p := newSnapshot("node", 7, partial, time.Unix(0, 0)); !sameContent(p, s) {
			t.Fatalf("decoding only what the watcher reads gives %+v, the whole allocation %+v", p.Allocs, s.Allocs)
		}
	})
}

// FuzzAgentSelfNodeID: the node ID taken from /v1/agent/self goes into
// request paths, so only a UUID is taken.
func FuzzAgentSelfNodeID(f *testing.F) {
	f.Add([]byte(`{"stats": {"client": {"node_id": "1cc0a14a-c239-313f-9be4-9ee3e8cc0399"}}}`))
	f.Add([]byte(`{"stats": {"client": {"node_id": "../../v1/jobs"}}}`))
	f.Add([]byte(`{"stats": {"client": null}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var self api.AgentSelf
		if json.Unmarshal(body, &self) != nil {
			return
		}
		id := self.Stats["client"]["node_id"]
		if !nomadapi.IsUUID(id) {
			return
		}
		if strings.ContainsAny(id, "/.?#% ") || len(id) != 36 {
			t.Fatalf("%q taken as a node ID", id)
		}
	})
}
