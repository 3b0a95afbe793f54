package scheduler

import (
	"fmt"
	"sort"

	"github.com/hashicorp/nomad/nomad/structs"
	feasible "github.com/hashicorp/nomad/scheduler"
)

// Reason says why a device ask does not fit on a node now.
type Reason string

const (
	// Fits: the ask fits now.
	Fits Reason = ""
	// NoClass: the node has no such class, or fewer instances than asked.
	NoClass Reason = "no such class"
	// Constraint: the class's attributes fail the ask's constraints.
	Constraint Reason = "constraint attribute"
	// Unhealthy: too few of its instances are healthy (the plugin reports
	// why in each instance's health description).
	Unhealthy Reason = "unhealthy"
	// AllHeld: enough healthy instances, but held by allocations that are
	// not client-terminal (a stopping one holds its slot until it ends).
	AllHeld Reason = "all held"
)

// Explanation is Explain's answer.
type Explanation struct {
	Reason Reason
	// Free are the instances a placement could get now, sorted.
	Free []string
	// Unhealthy maps each unhealthy instance to its health description.
	Unhealthy map[string]string
}

// Explain tells whether one device ask fits on a node now and, if not,
// why, with Nomad's own checks: the feasibility checker
// (feasible.DeviceChecker) for the class, its constraints and its healthy
// count, and structs.DeviceAccounter for what the node's allocations hold.
func (c *Cluster) Explain(nodeID string, ask Ask) (Explanation, error) {
	node, err := c.store.NodeByID(nil, nodeID)
	if err != nil {
		return Explanation{}, err
	}
	if node == nil {
		return Explanation{}, fmt.Errorf("node %s not found", nodeID)
	}
	snap, err := c.store.Snapshot()
	if err != nil {
		return Explanation{}, err
	}
	ctx := feasible.NewEvalContext(nil, snap, &structs.Plan{}, c.logger)
	j, err := Job{ID: "explain", Groups: []Group{{Name: "g", Count: 1,
		Tasks: []Task{{Name: "t", Version: "1", Devices: []Ask{ask}}}}}}.toStructs()
	if err != nil {
		return Explanation{}, err
	}
	feasibleOn := func(n *structs.Node, tg *structs.TaskGroup) bool {
		ch := feasible.NewDeviceChecker(ctx)
		ch.SetTaskGroup(tg)
		return ch.Feasible(n)
	}
	tg := j.TaskGroups[0]
	bare := tg.Copy()
	bare.Tasks[0].Resources.Devices[0].Constraints = nil
	allHealthy := node.Copy()
	out := Explanation{Unhealthy: map[string]string{}}
	for _, d := range allHealthy.NodeResources.Devices {
		for _, in := range d.Instances {
			if !in.Healthy && d.Vendor == Vendor && d.Type == Type && d.Name == ask.Class {
				out.Unhealthy[in.ID] = in.HealthDescription
			}
			in.Healthy = true
		}
	}
	switch {
	case !feasibleOn(allHealthy, bare):
		out.Reason = NoClass
		return out, nil
	case !feasibleOn(allHealthy, tg):
		out.Reason = Constraint
		return out, nil
	case !feasibleOn(node, tg):
		out.Reason = Unhealthy
		return out, nil
	}
	acct := structs.NewDeviceAccounter(node)
	allocs, err := c.store.AllocsByNode(nil, nodeID)
	if err != nil {
		return Explanation{}, err
	}
	acct.AddAllocs(allocs)
	if inst, ok := acct.Devices[structs.DeviceIdTuple{Vendor: Vendor, Type: Type, Name: ask.Class}]; ok {
		for id, used := range inst.Instances {
			if used == 0 {
				out.Free = append(out.Free, id)
			}
		}
	}
	sort.Strings(out.Free)
	if len(out.Free) < ask.Count {
		out.Reason = AllHeld
	}
	return out, nil
}
