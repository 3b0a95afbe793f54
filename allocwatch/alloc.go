package allocwatch

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Device is one device block's assignment for one task.
type Device struct {
	Task, Vendor, Type, Name string
	// IDs are the instance IDs, sorted. The scheduler fixes them at
	// placement, so a pending allocation carries them before Reserve runs.
	IDs []string
}

// Alloc is the part of an allocation the slot lifecycle needs.
type Alloc struct {
	ID, Namespace, JobID, JobType, TaskGroup, NodeID string
	// ClientStatus: pending, running, complete, failed, lost, unknown.
	// DesiredStatus: run, stop, evict.
	ClientStatus, DesiredStatus string
	// Devices come from AllocatedResources.Tasks[*].Devices, in task order.
	Devices                  []Device
	ModifyIndex, CreateIndex uint64
	// PreviousAllocation is the allocation this one replaces on a
	// reschedule or destructive update; NextAllocation its replacement.
	PreviousAllocation, NextAllocation string
	// TaskStates maps a task name to its state ("pending", "running",
	// "dead") as the client reported it.
	TaskStates map[string]string
	ModifyTime time.Time
}

// ClientTerminal reports whether the client is done with the allocation
// (complete, failed, lost). The scheduler frees its devices at this point.
func (a *Alloc) ClientTerminal() bool {
	switch a.ClientStatus {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
		return true
	}
	return false
}

// ServerTerminal reports whether the servers want it gone (desired stop or
// evict). Its tasks may still be running: "stopping".
func (a *Alloc) ServerTerminal() bool {
	switch a.DesiredStatus {
	case api.AllocDesiredStatusStop, api.AllocDesiredStatusEvict:
		return true
	}
	return false
}

// HoldsDevice reports whether any task of a was assigned the instance id of
// a vendor/typ device group.
func (a *Alloc) HoldsDevice(vendor, typ, id string) bool {
	for _, d := range a.Devices {
		if d.Vendor == vendor && d.Type == typ && slices.Contains(d.IDs, id) {
			return true
		}
	}
	return false
}

// Snapshot is one successful answer: all allocations on the node that the
// token can see, sorted by ID.
type Snapshot struct {
	NodeID string
	// Index is the answer's X-Nomad-Index.
	Index  uint64
	Allocs []Alloc
	// At is when the answer arrived.
	At time.Time
}

// newSnapshot converts one answer.
func newSnapshot(nodeID string, index uint64, allocs []*api.Allocation, at time.Time) Snapshot {
	s := Snapshot{NodeID: nodeID, Index: index, At: at, Allocs: make([]Alloc, 0, len(allocs))}
	for _, a := range allocs {
		if a != nil {
			s.Allocs = append(s.Allocs, convertAlloc(a))
		}
	}
	slices.SortFunc(s.Allocs, func(x, y Alloc) int { return cmp.Compare(x.ID, y.ID) })
	return s
}

// sameContent reports whether two snapshots list the same allocations in
// the same states. Index and At are not content: an index moves for
// changes the token cannot see.
func (s Snapshot) sameContent(o Snapshot) bool {
	return s.NodeID == o.NodeID && slices.EqualFunc(s.Allocs, o.Allocs, equalAlloc)
}

// clone deep-copies s, so the watcher's memory of the last delivery does
// not change when a consumer edits what it was given.
func (s Snapshot) clone() Snapshot {
	c := s
	c.Allocs = make([]Alloc, len(s.Allocs))
	for i, a := range s.Allocs {
		a.Devices = slices.Clone(a.Devices)
		for j := range a.Devices {
			a.Devices[j].IDs = slices.Clone(a.Devices[j].IDs)
		}
		a.TaskStates = maps.Clone(a.TaskStates)
		c.Allocs[i] = a
	}
	return c
}

// convertAlloc keeps what the lifecycle needs from a full allocation.
func convertAlloc(a *api.Allocation) Alloc {
	out := Alloc{
		ID:                 a.ID,
		Namespace:          a.Namespace,
		JobID:              a.JobID,
		TaskGroup:          a.TaskGroup,
		NodeID:             a.NodeID,
		ClientStatus:       a.ClientStatus,
		DesiredStatus:      a.DesiredStatus,
		ModifyIndex:        a.ModifyIndex,
		CreateIndex:        a.CreateIndex,
		PreviousAllocation: a.PreviousAllocation,
		NextAllocation:     a.NextAllocation,
	}
	if a.Job != nil && a.Job.Type != nil {
		out.JobType = *a.Job.Type
	}
	if a.ModifyTime != 0 {
		out.ModifyTime = time.Unix(0, a.ModifyTime).UTC()
	}
	if len(a.TaskStates) > 0 {
		out.TaskStates = make(map[string]string, len(a.TaskStates))
		for name, ts := range a.TaskStates {
			if ts != nil {
				out.TaskStates[name] = ts.State
			}
		}
	}
	if a.AllocatedResources != nil {
		for _, task := range slices.Sorted(maps.Keys(a.AllocatedResources.Tasks)) {
			res := a.AllocatedResources.Tasks[task]
			if res == nil {
				continue
			}
			for _, d := range res.Devices {
				if d == nil {
					continue
				}
				ids := slices.Clone(d.DeviceIDs)
				slices.Sort(ids)
				out.Devices = append(out.Devices, Device{Task: task, Vendor: d.Vendor, Type: d.Type, Name: d.Name, IDs: ids})
			}
		}
		// Within a task, order by group so equal assignments compare equal.
		slices.SortStableFunc(out.Devices, func(x, y Device) int {
			return cmp.Or(cmp.Compare(x.Task, y.Task), cmp.Compare(x.Vendor, y.Vendor),
				cmp.Compare(x.Type, y.Type), cmp.Compare(x.Name, y.Name))
		})
	}
	return out
}

func equalAlloc(a, b Alloc) bool {
	return a.ID == b.ID && a.Namespace == b.Namespace && a.JobID == b.JobID &&
		a.JobType == b.JobType && a.TaskGroup == b.TaskGroup && a.NodeID == b.NodeID &&
		a.ClientStatus == b.ClientStatus && a.DesiredStatus == b.DesiredStatus &&
		a.ModifyIndex == b.ModifyIndex && a.CreateIndex == b.CreateIndex &&
		a.PreviousAllocation == b.PreviousAllocation && a.NextAllocation == b.NextAllocation &&
		a.ModifyTime.Equal(b.ModifyTime) &&
		maps.Equal(a.TaskStates, b.TaskStates) &&
		slices.EqualFunc(a.Devices, b.Devices, func(x, y Device) bool {
			return x.Task == y.Task && x.Vendor == y.Vendor && x.Type == y.Type &&
				x.Name == y.Name && slices.Equal(x.IDs, y.IDs)
		})
}
