package scheduler

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/nomad/nomad/structs"
	nsched "github.com/hashicorp/nomad/scheduler"
)

// planner applies plans with Nomad's PlanBuilder, after making its random
// choices reproducible (Options.Pick, Options.AllocID) and checking every
// new allocation's devices against structs.DeviceAccounter. It also
// records what the evaluation did.
type planner struct {
	planBuilder
	c *Cluster

	cur   Eval
	evals int // len(PlanBuilder.Evals) at begin
}

var _ nsched.Planner = (*planner)(nil)

func (p *planner) begin() {
	p.cur = Eval{Failed: map[string]Failure{}}
	p.evals = len(p.Evals)
}

// result is the evaluation's outcome: its placements and, from the last
// status update of the evaluation, the groups it could not place.
func (p *planner) result() Eval {
	out := p.cur
	if len(p.Evals) > p.evals {
		last := p.Evals[len(p.Evals)-1]
		for tg, m := range last.FailedTGAllocs {
			f := Failure{Missing: m.CoalescedFailures + 1, Reasons: map[string]int{}}
			for k, v := range m.ConstraintFiltered {
				f.Reasons[k] += v
			}
			for k, v := range m.DimensionExhausted {
				f.Reasons[k] += v
			}
			if m.NodesEvaluated == 0 {
				f.Reasons["no nodes"]++
			}
			out.Failed[tg] = f
		}
	}
	sort.Slice(out.Placed, func(i, j int) bool { return out.Placed[i].Name < out.Placed[j].Name })
	sort.Strings(out.Stopped)
	sort.Strings(out.Preempted)
	return out
}

// SubmitPlan rewrites the plan's random choices, checks it, applies it.
func (p *planner) SubmitPlan(plan *structs.Plan) (*structs.PlanResult, nsched.State, error) {
	if err := p.rewrite(plan); err != nil {
		return nil, nil, err
	}
	for _, list := range plan.NodeUpdate {
		for _, a := range list {
			p.cur.Stopped = append(p.cur.Stopped, a.ID)
		}
	}
	for _, list := range plan.NodePreemptions {
		for _, a := range list {
			p.cur.Preempted = append(p.cur.Preempted, a.ID)
		}
	}
	return p.planBuilder.Harness.SubmitPlan(plan)
}

// rewrite renames new allocations and re-picks their device instances,
// node by node, in allocation name order. Nomad's own pick must be free by
// DeviceAccounter's count of what the node keeps after the plan: anything
// else is a collision Nomad made, and an error here.
func (p *planner) rewrite(plan *structs.Plan) error {
	nodes := make([]string, 0, len(plan.NodeAllocation))
	for n := range plan.NodeAllocation {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	renamed := map[string]string{}
	for _, nodeID := range nodes {
		node, err := p.State.NodeByID(nil, nodeID)
		if err != nil || node == nil {
			return fmt.Errorf("plan places on unknown node %s: %v", nodeID, err)
		}
		list := plan.NodeAllocation[nodeID]
		var fresh []*structs.Allocation
		newIDs := map[string]bool{}
		for _, a := range list {
			old, err := p.State.AllocByID(nil, a.ID)
			if err != nil {
				return err
			}
			if old == nil {
				fresh = append(fresh, a)
				newIDs[a.ID] = true
			}
		}
		sort.Slice(fresh, func(i, j int) bool { return fresh[i].Name < fresh[j].Name })

		acct := structs.NewDeviceAccounter(node)
		// A collision among them is normal, and Nomad ignores it too
		// (BinPackIterator): a replacement placed in the plan that stopped
		// its predecessor shares its instance until the predecessor is
		// client-terminal.
		acct.AddAllocs(p.kept(plan, nodeID, newIDs))
		free := map[structs.DeviceIdTuple][]string{}
		for id, inst := range acct.Devices {
			for in, used := range inst.Instances {
				if used == 0 {
					free[id] = append(free[id], in)
				}
			}
			sort.Strings(free[id])
		}
		// Nomad's picks, checked against what is free and each other.
		var picked []*structs.AllocatedDeviceResource
		for _, a := range fresh {
			for _, t := range taskNames(a) {
				for _, d := range a.AllocatedResources.Tasks[t].Devices {
					if err := check(acct, d, a.Name, t); err != nil {
						return fmt.Errorf("%w (%s)", err, p.describe(plan, nodeID))
					}
					picked = append(picked, d)
				}
			}
		}
		if p.c.opts.Pick != nil {
			if err := p.repick(picked, free); err != nil {
				return err
			}
		}
		for _, a := range fresh {
			if p.c.opts.AllocID != nil {
				id := p.c.opts.AllocID()
				renamed[a.ID] = id
				a.ID = id
			}
			pl := Placement{AllocID: a.ID, NodeID: nodeID, Name: a.Name, Group: a.TaskGroup, Devices: map[string][]string{}}
			for _, t := range taskNames(a) {
				for _, d := range a.AllocatedResources.Tasks[t].Devices {
					if d.Vendor == Vendor && d.Type == Type {
						pl.Devices[t] = append(pl.Devices[t], d.DeviceIDs...)
					}
				}
			}
			p.cur.Placed = append(p.cur.Placed, pl)
		}
	}
	for _, lists := range []map[string][]*structs.Allocation{plan.NodePreemptions, plan.NodeUpdate} {
		for _, list := range lists {
			for _, a := range list {
				if id, ok := renamed[a.PreemptedByAllocation]; ok {
					a.PreemptedByAllocation = id
				}
			}
		}
	}
	return nil
}

// ErrDeviceCollision: Nomad's plan gives an instance that is not free, or
// gives one instance twice. Nomad 1.6.2 (and 1.11.3) does so when
// preemption is on and a group's second task asking a device finds none
// free (see TestNomadGivesTwoTasksOneInstanceUnderPreemption); Cluster then
// applies nothing.
var ErrDeviceCollision = errors.New("Nomad's plan reuses a device instance")

// check verifies Nomad's choice for one device ask: every instance free,
// none picked twice in the plan. It reserves them in acct.
func check(acct *structs.DeviceAccounter, d *structs.AllocatedDeviceResource, name, task string) error {
	inst, ok := acct.Devices[*d.ID()]
	if !ok {
		return fmt.Errorf("%s task %s: Nomad offered device %s the node does not have", name, task, d.ID())
	}
	for _, id := range d.DeviceIDs {
		if used, ok := inst.Instances[id]; !ok || used != 0 {
			return fmt.Errorf("%w: %s task %s: instance %s of %s is not free", ErrDeviceCollision, name, task, id, d.ID())
		}
	}
	acct.AddReserved(d)
	return nil
}

// repick replaces Nomad's map-order choice by Options.Pick's: per device,
// as many free instances as the plan uses, handed out in the order of the
// asks (allocation name, task, ask). Any such assignment is one Nomad could
// have made, and the offers keep accounting for each other; it depends on
// Nomad's choice only through how many instances each ask got.
func (p *planner) repick(picked []*structs.AllocatedDeviceResource, free map[structs.DeviceIdTuple][]string) error {
	need := map[structs.DeviceIdTuple]int{}
	var ids []structs.DeviceIdTuple
	for _, d := range picked {
		if need[*d.ID()] == 0 {
			ids = append(ids, *d.ID())
		}
		need[*d.ID()] += len(d.DeviceIDs)
	}
	got := map[structs.DeviceIdTuple][]string{}
	for _, id := range ids {
		g := p.c.opts.Pick(free[id], need[id])
		if len(g) != need[id] {
			return fmt.Errorf("Options.Pick returned %d of %v, want %d", len(g), free[id], need[id])
		}
		got[id] = g
	}
	for _, d := range picked {
		id := *d.ID()
		n := len(d.DeviceIDs)
		d.DeviceIDs = append([]string(nil), got[id][:n]...)
		got[id] = got[id][n:]
	}
	return nil
}

// taskNames are an allocation's tasks with resources, sorted.
func taskNames(a *structs.Allocation) []string {
	if a.AllocatedResources == nil {
		return nil
	}
	out := make([]string, 0, len(a.AllocatedResources.Tasks))
	for t := range a.AllocatedResources.Tasks {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// kept are the node's allocations after the plan, but for the new ones:
// what EvalContext.ProposedAllocs counts — existing allocations minus those
// the plan stops or preempts, with in-place updates as planned.
func (p *planner) kept(plan *structs.Plan, nodeID string, newIDs map[string]bool) []*structs.Allocation {
	existing, _ := p.State.AllocsByNode(nil, nodeID)
	gone := map[string]bool{}
	for _, a := range plan.NodeUpdate[nodeID] {
		gone[a.ID] = true
	}
	for _, a := range plan.NodePreemptions[nodeID] {
		gone[a.ID] = true
	}
	updated := map[string]*structs.Allocation{}
	for _, a := range plan.NodeAllocation[nodeID] {
		if !newIDs[a.ID] {
			updated[a.ID] = a
		}
	}
	var out []*structs.Allocation
	for _, a := range existing {
		if gone[a.ID] {
			continue
		}
		if u, ok := updated[a.ID]; ok && u.AllocatedResources != nil {
			a = u
		}
		out = append(out, a)
	}
	return out
}

// describe lists the node's allocations and the plan's changes, for an
// error that says Nomad and this package disagree.
func (p *planner) describe(plan *structs.Plan, nodeID string) string {
	var b []string
	existing, _ := p.State.AllocsByNode(nil, nodeID)
	for _, a := range existing {
		b = append(b, fmt.Sprintf("%s %s/%s %v", a.Name, a.DesiredStatus, a.ClientStatus, deviceIDs(a)))
	}
	for _, a := range plan.NodeUpdate[nodeID] {
		b = append(b, "stop "+a.Name)
	}
	for _, a := range plan.NodePreemptions[nodeID] {
		b = append(b, "preempt "+a.Name)
	}
	for _, a := range plan.NodeAllocation[nodeID] {
		b = append(b, fmt.Sprintf("place %s %s %v", a.ID[:8], a.Name, deviceIDs(a)))
	}
	return strings.Join(b, "; ")
}

func deviceIDs(a *structs.Allocation) []string {
	var out []string
	for _, t := range taskNames(a) {
		for _, d := range a.AllocatedResources.Tasks[t].Devices {
			out = append(out, d.DeviceIDs...)
		}
	}
	return out
}
