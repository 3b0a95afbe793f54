package cli

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/nomad/nomad/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/scheduler"
)

// planReport is plan's answer, per task group.
type planReport struct {
	Job       string `json:"job"`
	Namespace string `json:"namespace"`
	NomadAPI  string `json:"nomad_api"`
	// Placeable is true when every allocation the plan wants can be placed.
	Placeable bool        `json:"placeable"`
	Groups    []groupPlan `json:"groups"`
	// Stopped are the allocations the plan would stop (a destructive
	// update replaces them), Preempted those it would evict.
	Stopped   []string `json:"stopped,omitempty"`
	Preempted []string `json:"preempted,omitempty"`
	Notes     []string `json:"notes,omitempty"`
}

type groupPlan struct {
	Name string `json:"name"`
	// Count is the group's count; Running its allocations the plan keeps.
	Count   int          `json:"count"`
	Running int          `json:"running"`
	Placed  []placedJSON `json:"placed"`
	Missing int          `json:"missing"`
	// Reasons are Nomad's metrics of the failed placement in plain words.
	Reasons []string `json:"reasons,omitempty"`
	// Nodes explain, node by node, why the device asks do not fit.
	Nodes []nodeExplain `json:"nodes,omitempty"`
}

type placedJSON struct {
	Name     string `json:"name"`
	NodeID   string `json:"node_id"`
	NodeName string `json:"node_name"`
	// Devices are the zfs/dataset instances (slots) per task.
	Devices map[string][]string `json:"devices"`
	// Handovers say which of those slots a stopping allocation still
	// holds: the servers count them free, the plugin hands them over once
	// the old holder's data is released.
	Handovers []string `json:"handovers,omitempty"`
}

type nodeExplain struct {
	NodeID   string `json:"node_id"`
	NodeName string `json:"node_name"`
	// Excluded says why Nomad places nothing on the node whatever its
	// slots: down, draining, ineligible, another datacenter or pool.
	Excluded string       `json:"excluded,omitempty"`
	Asks     []askExplain `json:"asks"`
}

type askExplain struct {
	Task   string `json:"task"`
	Device string `json:"device"`
	Count  uint64 `json:"count"`
	// Unmet are the ask's constraints the device does not meet, with the
	// node's value.
	Unmet []string      `json:"unmet_constraints,omitempty"`
	Slots []slotExplain `json:"slots"`
	Free  int           `json:"free"`
}

type slotExplain struct {
	ID string `json:"id"`
	// State is free, unhealthy, held or stopping.
	State  string `json:"state"`
	Reason string `json:"reason"`
	Alloc  string `json:"alloc_id,omitempty"`
	JobID  string `json:"job_id,omitempty"`
}

// buildPlanReport turns Nomad's plan into the report.
func buildPlanReport(job *structs.Job, live *scheduler.Live, res *scheduler.LivePlan) *planReport {
	rep := &planReport{Job: job.ID, Namespace: job.Namespace, Placeable: len(res.Failed) == 0, Groups: []groupPlan{}}
	nodes := map[string]*structs.Node{}
	for _, n := range live.Nodes {
		nodes[n.ID] = n
	}
	stopped := map[string]bool{}
	for _, a := range res.Stopped {
		stopped[a.ID] = true
		rep.Stopped = append(rep.Stopped, a.ID)
	}
	for _, a := range res.Preempted {
		stopped[a.ID] = true
		rep.Preempted = append(rep.Preempted, a.ID)
	}
	byNode := nodeAllocs(live, stopped)
	for _, tg := range job.TaskGroups {
		g := groupPlan{Name: tg.Name, Count: tg.Count, Placed: []placedJSON{}}
		for _, a := range live.Allocs {
			if a.Namespace == job.Namespace && a.JobID == job.ID && a.TaskGroup == tg.Name && !a.TerminalStatus() && !stopped[a.ID] {
				g.Running++
			}
		}
		for _, a := range res.Placed {
			if a.TaskGroup != tg.Name {
				continue
			}
			p := placedJSON{Name: a.Name, NodeID: a.NodeID, Devices: map[string][]string{}}
			if n := nodes[a.NodeID]; n != nil {
				p.NodeName = n.Name
			}
			use := scheduler.DeviceUse(nodes[a.NodeID], byNode[a.NodeID])
			for task, tr := range a.AllocatedResources.Tasks {
				for _, d := range tr.Devices {
					if d.Vendor != scheduler.Vendor || d.Type != scheduler.Type {
						continue
					}
					p.Devices[task] = append(p.Devices[task], d.DeviceIDs...)
					for _, u := range use[*d.ID()] {
						if slices.Contains(d.DeviceIDs, u.ID) && len(u.Stopping) > 0 {
							h := u.Stopping[0]
							p.Handovers = append(p.Handovers, fmt.Sprintf("%s: allocation %s of job %s still holds it (%s, being stopped); the plugin hands it over once its data is released",
								u.ID, short(h.ID), h.JobID, h.ClientStatus))
						}
					}
				}
			}
			sort.Strings(p.Handovers)
			g.Placed = append(g.Placed, p)
		}
		if m := res.Failed[tg.Name]; m != nil {
			g.Missing = m.CoalescedFailures + 1
			g.Reasons = metricReasons(m)
			g.Nodes = explainNodes(job, tg, live.Nodes, byNode)
		}
		rep.Groups = append(rep.Groups, g)
	}
	return rep
}

// metricReasons says in plain words what Nomad's AllocMetric counts, each
// with Nomad's own term in parentheses so it can be looked up.
func metricReasons(m *structs.AllocMetric) []string {
	var out []string
	if m.NodesEvaluated == 0 {
		out = append(out, fmt.Sprintf("no ready, eligible node in the job's datacenters and node pool (%d node(s) in the pool)", m.NodesInPool))
	}
	for _, k := range sortedKeys(m.ConstraintFiltered) {
		n := m.ConstraintFiltered[k]
		switch {
		case k == "missing devices":
			out = append(out, fmt.Sprintf("%d node(s) have no healthy device instances that match the ask and meet its constraints (%s)", n, k))
		case k == "missing drivers":
			out = append(out, fmt.Sprintf("%d node(s) lack a healthy task driver (%s)", n, k))
		case k == "computed class ineligible":
			out = append(out, fmt.Sprintf("%d node(s) of a node class Nomad already found ineligible (%s)", n, k))
		default:
			out = append(out, fmt.Sprintf("%d node(s) do not meet the constraint %s", n, k))
		}
	}
	for _, k := range sortedKeys(m.DimensionExhausted) {
		n := m.DimensionExhausted[k]
		switch {
		case strings.HasPrefix(k, "devices: "):
			out = append(out, fmt.Sprintf("%d node(s) have too few free device instances: the others are held or unhealthy (%s)", n, k))
		case k == "cpu" || k == "memory" || k == "disk" || k == "cores":
			out = append(out, fmt.Sprintf("%d node(s) have too little %s left", n, k))
		default:
			out = append(out, fmt.Sprintf("%d node(s) are out of %s", n, k))
		}
	}
	for _, q := range m.QuotaExhausted {
		out = append(out, "quota exhausted: "+q)
	}
	if len(out) == 0 {
		out = append(out, fmt.Sprintf("Nomad evaluated %d node(s), filtered %d, found %d exhausted", m.NodesEvaluated, m.NodesFiltered, m.NodesExhausted))
	}
	return out
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// nodeAllocs are the live allocations by node, those the plan stops or
// preempts marked stopped, as they will be once the plan is applied.
func nodeAllocs(live *scheduler.Live, stopped map[string]bool) map[string][]*structs.Allocation {
	byNode := map[string][]*structs.Allocation{}
	for _, a := range live.Allocs {
		if stopped[a.ID] && !a.TerminalStatus() {
			a = a.Copy()
			a.DesiredStatus = structs.AllocDesiredStatusStop
		}
		byNode[a.NodeID] = append(byNode[a.NodeID], a)
	}
	return byNode
}

// explainNodes explains, on every node that has a device a zfs/dataset ask
// of tg names, why the ask does not fit: its unmet constraints and what
// each slot is doing.
func explainNodes(job *structs.Job, tg *structs.TaskGroup, nodes []*structs.Node, byNode map[string][]*structs.Allocation) []nodeExplain {
	var out []nodeExplain
	for _, n := range nodes {
		if n.NodeResources == nil {
			continue
		}
		use := scheduler.DeviceUse(n, byNode[n.ID])
		ne := nodeExplain{NodeID: n.ID, NodeName: n.Name, Excluded: nodeExcluded(n, job)}
		for _, task := range tg.Tasks {
			if task.Resources == nil {
				continue
			}
			for _, ask := range task.Resources.Devices {
				for _, d := range n.NodeResources.Devices {
					if d.Vendor != scheduler.Vendor || d.Type != scheduler.Type {
						continue
					}
					matches, unmet := scheduler.UnmetConstraints(d, ask)
					if !matches {
						continue
					}
					ne.Asks = append(ne.Asks, explainAsk(task.Name, ask, d, unmet, use[*d.ID()]))
				}
			}
		}
		if len(ne.Asks) > 0 {
			out = append(out, ne)
		}
	}
	return out
}

// nodeExcluded says why the scheduler does not consider node for job at
// all (readyNodesInDCsAndPool), or "".
func nodeExcluded(n *structs.Node, job *structs.Job) string {
	switch {
	case n.Status != structs.NodeStatusReady:
		return "the node is " + n.Status
	case n.DrainStrategy != nil:
		return "the node is draining"
	case n.SchedulingEligibility != structs.NodeSchedulingEligible:
		return "the node is ineligible for scheduling"
	case !n.IsInAnyDC(job.Datacenters):
		return fmt.Sprintf("the node is in datacenter %s, not among the job's %s", n.Datacenter, strings.Join(job.Datacenters, ", "))
	case job.NodePool != structs.NodePoolAll && n.NodePool != job.NodePool:
		return fmt.Sprintf("the node is in node pool %s, the job in %s", n.NodePool, job.NodePool)
	}
	return ""
}

// explainAsk is one ask against one device group of a node.
func explainAsk(task string, ask *structs.RequestedDevice, d *structs.NodeDeviceResource, unmet []*structs.Constraint, use []scheduler.InstanceUse) askExplain {
	ae := askExplain{Task: task, Device: d.ID().String(), Count: ask.Count, Slots: []slotExplain{}}
	for _, c := range unmet {
		ae.Unmet = append(ae.Unmet, unmetText(c, d))
	}
	for _, u := range use {
		s := explainSlot(u)
		if s.State == "free" {
			ae.Free++
		}
		ae.Slots = append(ae.Slots, s)
	}
	return ae
}

// unmetText names a constraint and the device's value it was checked
// against, e.g. `${device.attr.quota} >= 100 GiB (quota = 1024 MiB)`.
func unmetText(c *structs.Constraint, d *structs.NodeDeviceResource) string {
	s := strings.TrimSpace(fmt.Sprintf("%s %s %s", c.LTarget, c.Operand, c.RTarget))
	var have []string
	for _, target := range []string{c.LTarget, c.RTarget} {
		name, ok := strings.CutPrefix(target, "${device.attr.")
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, "}")
		if v, ok := d.Attributes[name]; ok && v != nil {
			have = append(have, name+" = "+v.GoString())
		} else {
			have = append(have, name+" is not set")
		}
	}
	if len(have) > 0 {
		s += " (" + strings.Join(have, ", ") + ")"
	}
	return s
}

// explainSlot says why one instance is or is not free for a new placement.
func explainSlot(u scheduler.InstanceUse) slotExplain {
	s := slotExplain{ID: u.ID}
	switch {
	case !u.Healthy:
		s.State, s.Reason = "unhealthy", "unhealthy: "+orDash(u.HealthDesc)
	case len(u.Holders) > 0:
		a := u.Holders[0]
		s.State, s.Alloc, s.JobID = "held", a.ID, a.JobID
		s.Reason = fmt.Sprintf("held by allocation %s of job %s (%s)", short(a.ID), a.JobID, a.ClientStatus)
	case len(u.Stopping) > 0:
		a := u.Stopping[0]
		s.State, s.Alloc, s.JobID = "stopping", a.ID, a.JobID
		s.Reason = fmt.Sprintf("free to Nomad, but allocation %s of job %s is being stopped (%s): a new holder gets it once its data is released", short(a.ID), a.JobID, a.ClientStatus)
	case len(u.Ended) > 0:
		a := u.Ended[0]
		s.State, s.Alloc, s.JobID = "free", a.ID, a.JobID
		s.Reason = fmt.Sprintf("free (last held by allocation %s of job %s, %s; released before it is handed over)", short(a.ID), a.JobID, a.ClientStatus)
	default:
		s.State, s.Reason = "free", "free"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
