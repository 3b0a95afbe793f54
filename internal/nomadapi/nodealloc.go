package nomadapi

import (
	"fmt"
	"io"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/hashicorp/nomad/api"
)

// nodeAlloc is the part of an allocation in GET /v1/node/<id>/allocations
// that the allocation watcher reads (allocwatch's convertAlloc), under the
// same JSON names as api.Allocation.
// Each allocation carries its whole job, most of its JSON; decoding into
// this skips it (all but its type) instead of building it. On a node
// running hundreds of allocations a minute, decoding the node's list for
// the watcher and for every Reserve was most of the plugin's CPU.
type nodeAlloc struct {
	ID, Namespace, JobID, TaskGroup, NodeID string
	Name                                    string
	ClientStatus, DesiredStatus             string
	DesiredDescription                      string
	ModifyIndex, CreateIndex                uint64
	PreviousAllocation, NextAllocation      string
	ModifyTime                              int64
	Job                                     *struct{ Type *string }
	TaskStates                              map[string]*struct {
		State      string
		FinishedAt time.Time
	}
	AllocatedResources *struct {
		Tasks map[string]*struct {
			Devices []*api.AllocatedDeviceResource
		}
	}
}

// allocation is n as an api.Allocation with only the fields nodeAlloc
// holds.
func (n *nodeAlloc) allocation() *api.Allocation {
	a := &api.Allocation{
		ID: n.ID, Namespace: n.Namespace, JobID: n.JobID, TaskGroup: n.TaskGroup, NodeID: n.NodeID, Name: n.Name,
		ClientStatus: n.ClientStatus, DesiredStatus: n.DesiredStatus, DesiredDescription: n.DesiredDescription,
		ModifyIndex: n.ModifyIndex, CreateIndex: n.CreateIndex,
		PreviousAllocation: n.PreviousAllocation, NextAllocation: n.NextAllocation,
		ModifyTime: n.ModifyTime,
	}
	if n.Job != nil {
		a.Job = &api.Job{Type: n.Job.Type}
	}
	if n.TaskStates != nil {
		a.TaskStates = make(map[string]*api.TaskState, len(n.TaskStates))
		for name, ts := range n.TaskStates {
			if ts != nil {
				a.TaskStates[name] = &api.TaskState{State: ts.State, FinishedAt: ts.FinishedAt}
			} else {
				a.TaskStates[name] = nil
			}
		}
	}
	if r := n.AllocatedResources; r != nil {
		a.AllocatedResources = &api.AllocatedResources{}
		if r.Tasks != nil {
			a.AllocatedResources.Tasks = make(map[string]*api.AllocatedTaskResources, len(r.Tasks))
			for task, tr := range r.Tasks {
				if tr != nil {
					a.AllocatedResources.Tasks[task] = &api.AllocatedTaskResources{Devices: tr.Devices}
				} else {
					a.AllocatedResources.Tasks[task] = nil
				}
			}
		}
	}
	return a
}

// decodeOptions give decodeNodeAllocs encoding/json's leniency (names in
// any case, repeated names, invalid UTF-8, null keeping a value, times in
// RFC 3339's loose forms), the semantics the api package decodes with.
// FuzzDecodeAllocs holds the two to the same result.
var decodeOptions = json.JoinOptions(
	json.MatchCaseInsensitiveNames(true),
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
	jsonv1.MergeWithLegacySemantics(true),
	jsonv1.ParseTimeWithLooseRFC3339(true),
)

// decodeNodeAllocs decodes GET /v1/node/<id>/allocations. encoding/json
// reads each value twice (once to find its end, once to decode) and scans
// every byte of what it skips; this decoder (encoding/json/v2, the Go
// team's module that becomes the standard library's in Go 1.27) reads it
// once and skips fast: the jobs in a node's list are most of its bytes.
func decodeNodeAllocs(r io.Reader) ([]*nodeAlloc, error) {
	var out []*nodeAlloc
	if err := json.UnmarshalRead(r, &out, decodeOptions); err != nil {
		return nil, fmt.Errorf("decoding the node's allocations: %w", err)
	}
	return out, nil
}

// DecodeNodeAllocations reads an answer of GET /v1/node/<id>/allocations
// as NodeAllocations does: each allocation with only the fields nodeAlloc
// holds, null entries dropped. allocwatch's FuzzDecodeAllocs holds it to
// encoding/json's reading of the whole allocation, through the watcher's
// conversion.
func DecodeNodeAllocations(r io.Reader) ([]*api.Allocation, error) {
	out, err := decodeNodeAllocs(r)
	if err != nil {
		return nil, err
	}
	allocs := make([]*api.Allocation, 0, len(out))
	for _, n := range out {
		if n != nil {
			allocs = append(allocs, n.allocation())
		}
	}
	return allocs, nil
}
