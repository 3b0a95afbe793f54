package scheduler

import (
	"sort"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/nomad/structs"
	feasible "github.com/hashicorp/nomad/scheduler"
)

// InstanceUse is one device instance of a node and who has it, the way
// the servers count it.
type InstanceUse struct {
	ID         string
	Healthy    bool
	HealthDesc string
	// Holders are the allocations the servers count as using it: neither
	// client-terminal nor stopped by a server (EvalContext.ProposedAllocs).
	Holders []*structs.Allocation
	// Stopping are allocations a server has stopped whose client has not
	// reported them terminal yet: the servers count the instance free, the
	// task may still run, and this plugin's Reserve waits for the release.
	Stopping []*structs.Allocation
	// Ended are client-terminal allocations that held it, the newest
	// first: the plugin may still be releasing the data they left.
	Ended []*structs.Allocation
}

// DeviceUse maps each device instance of node to its holders among allocs
// (the node's allocations), per device group.
func DeviceUse(node *structs.Node, allocs []*structs.Allocation) map[structs.DeviceIdTuple][]InstanceUse {
	out := map[structs.DeviceIdTuple][]InstanceUse{}
	if node == nil || node.NodeResources == nil {
		return out
	}
	index := map[structs.DeviceIdTuple]map[string]int{}
	for _, d := range node.NodeResources.Devices {
		id := *d.ID()
		index[id] = map[string]int{}
		for i, in := range d.Instances {
			index[id][in.ID] = i
			out[id] = append(out[id], InstanceUse{ID: in.ID, Healthy: in.Healthy, HealthDesc: in.HealthDescription})
		}
	}
	sorted := append([]*structs.Allocation(nil), allocs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].CreateIndex > sorted[j].CreateIndex })
	for _, a := range sorted {
		if a.NodeID != node.ID || a.AllocatedResources == nil {
			continue
		}
		for _, t := range taskNames(a) {
			for _, d := range a.AllocatedResources.Tasks[t].Devices {
				id := *d.ID()
				for _, inID := range d.DeviceIDs {
					i, ok := index[id][inID]
					if !ok {
						continue
					}
					u := &out[id][i]
					switch {
					case a.ClientTerminalStatus():
						u.Ended = appendOnce(u.Ended, a)
					case a.TerminalStatus():
						u.Stopping = appendOnce(u.Stopping, a)
					default:
						u.Holders = appendOnce(u.Holders, a)
					}
				}
			}
		}
	}
	return out
}

func appendOnce(list []*structs.Allocation, a *structs.Allocation) []*structs.Allocation {
	for _, b := range list {
		if b.ID == a.ID {
			return list
		}
	}
	return append(list, a)
}

// UnmetConstraints reports whether device group d is what ask names
// (vendor/type/name, as Nomad matches them) and which of ask's constraints
// d does not meet, each judged alone by Nomad's own device checker.
func UnmetConstraints(d *structs.NodeDeviceResource, ask *structs.RequestedDevice) (matches bool, unmet []*structs.Constraint) {
	if !d.ID().Matches(ask.ID()) {
		return false, nil
	}
	for _, c := range ask.Constraints {
		if !deviceFeasible(d, &structs.RequestedDevice{Name: ask.Name, Count: 1, Constraints: []*structs.Constraint{c}}) {
			unmet = append(unmet, c)
		}
	}
	return true, unmet
}

// deviceFeasible runs feasible.DeviceChecker on a node that has only d,
// every instance healthy: it answers whether d meets ask's constraints.
func deviceFeasible(d *structs.NodeDeviceResource, ask *structs.RequestedDevice) bool {
	dev := d.Copy()
	dev.Instances = []*structs.NodeDevice{{ID: "probe", Healthy: true}}
	node := &structs.Node{ID: "probe", NodeResources: &structs.NodeResources{Devices: []*structs.NodeDeviceResource{dev}}}
	ctx := feasible.NewEvalContext(nil, nil, &structs.Plan{}, hclog.NewNullLogger())
	checker := feasible.NewDeviceChecker(ctx)
	checker.SetTaskGroup(&structs.TaskGroup{Tasks: []*structs.Task{{Resources: &structs.Resources{Devices: []*structs.RequestedDevice{ask}}}}})
	return checker.Feasible(node)
}
