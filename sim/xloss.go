package sim

import (
	"slices"

	"github.com/hashicorp/nomad/nomad/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/scheduler"
)

// A node lost for good (docs/node-loss.md): its board dead, its pool gone.
// The servers see it miss its heartbeats and mark it down, as for a node
// cut off (nodeDown): its allocations are lost (never unknown: no group
// sets max_client_disconnect) and Nomad places their replacements on the
// other nodes, at once or, for a group that sets
// stop_after_client_disconnect, later (xtakeover.go). Unlike a node cut off it never comes
// back: its plugin and tasks are gone with it, its pool too, and it leaves
// the world's nodes (w.lost keeps it for Nomad's node list, where it
// stays down). Drawn only in a world of three nodes that keeps replicas,
// in place of half its node-down events, so that two nodes remain.

// nodeLost loses n for good.
func (w *XWorld) nodeLost(n *xnode) {
	for _, o := range w.nodes {
		if !o.connected {
			return
		}
	}
	w.counts.NodesLost++
	w.logf("%s is lost for good, its pool with it", n.name)
	n.stop()
	n.connected = false
	for _, a := range n.sortedLocal() {
		if a.phase != dead {
			a.phase = dead // the task died with its node; its data is gone
		}
	}
	w.nodes = slices.DeleteFunc(w.nodes, func(o *xnode) bool { return o == n })
	w.lost = append(w.lost, n)
	evs, err := w.cluster.SetNodeStatus(n.id, structs.NodeStatusDown)
	for _, ev := range evs {
		w.eval(ev, nil)
	}
	if err != nil {
		w.eval(scheduler.Eval{}, err)
	}
}
