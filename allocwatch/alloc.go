package allocwatch

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// The watcher converts each answer of the Nomad API into the model's
// allocation types (model.Alloc, model.Snapshot), which the lifecycle's
// rules take.

// newSnapshot converts one answer.
func newSnapshot(nodeID string, index uint64, allocs []*api.Allocation, at time.Time) model.Snapshot {
	s := model.Snapshot{NodeID: nodeID, Index: index, At: at, Allocs: make([]model.Alloc, 0, len(allocs))}
	for _, a := range allocs {
		if a != nil {
			s.Allocs = append(s.Allocs, convertAlloc(a))
		}
	}
	slices.SortFunc(s.Allocs, func(x, y model.Alloc) int { return cmp.Compare(x.ID, y.ID) })
	return s
}

// sameContent reports whether two snapshots list the same allocations in
// the same states. Index and At are not content: an index moves for
// changes the token cannot see.
func sameContent(s, o model.Snapshot) bool {
	return s.NodeID == o.NodeID && slices.EqualFunc(s.Allocs, o.Allocs, equalAlloc)
}

// clone deep-copies s, so the watcher's memory of the last delivery does
// not change when a consumer edits what it was given.
func cloneSnapshot(s model.Snapshot) model.Snapshot {
	c := s
	c.Allocs = make([]model.Alloc, len(s.Allocs))
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
func convertAlloc(a *api.Allocation) model.Alloc {
	out := model.Alloc{
		ID:                 a.ID,
		Namespace:          a.Namespace,
		JobID:              a.JobID,
		TaskGroup:          a.TaskGroup,
		Name:               a.Name,
		NodeID:             a.NodeID,
		ClientStatus:       a.ClientStatus,
		DesiredStatus:      a.DesiredStatus,
		LostByServers:      nomadapi.LostByServers(a.DesiredDescription),
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
		out.FinishedAt = finishedAt(a.TaskStates)
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
				out.Devices = append(out.Devices, model.Device{Task: task, Vendor: d.Vendor, Type: d.Type, Name: d.Name, IDs: ids})
			}
		}
		// Within a task, order by group so equal assignments compare equal.
		slices.SortStableFunc(out.Devices, func(x, y model.Device) int {
			return cmp.Or(cmp.Compare(x.Task, y.Task), cmp.Compare(x.Vendor, y.Vendor),
				cmp.Compare(x.Type, y.Type), cmp.Compare(x.Name, y.Name))
		})
	}
	return out
}

// finishedAt is when the last task finished, zero while one has not (or
// none is known): the moment the client counts the allocation ended.
func finishedAt(states map[string]*api.TaskState) time.Time {
	var last time.Time
	for _, ts := range states {
		if ts == nil || ts.FinishedAt.IsZero() {
			return time.Time{}
		}
		if ts.FinishedAt.After(last) {
			last = ts.FinishedAt
		}
	}
	return last.UTC()
}

func equalAlloc(a, b model.Alloc) bool {
	return a.ID == b.ID && a.Namespace == b.Namespace && a.JobID == b.JobID &&
		a.JobType == b.JobType && a.TaskGroup == b.TaskGroup && a.NodeID == b.NodeID &&
		a.ClientStatus == b.ClientStatus && a.DesiredStatus == b.DesiredStatus &&
		a.ModifyIndex == b.ModifyIndex && a.CreateIndex == b.CreateIndex &&
		a.PreviousAllocation == b.PreviousAllocation && a.NextAllocation == b.NextAllocation &&
		a.ModifyTime.Equal(b.ModifyTime) && a.FinishedAt.Equal(b.FinishedAt) &&
		maps.Equal(a.TaskStates, b.TaskStates) &&
		slices.EqualFunc(a.Devices, b.Devices, func(x, y model.Device) bool {
			return x.Task == y.Task && x.Vendor == y.Vendor && x.Type == y.Type &&
				x.Name == y.Name && slices.Equal(x.IDs, y.IDs)
		})
}
