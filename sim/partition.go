package sim

import (
	"github.com/hashicorp/nomad/nomad/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/scheduler"
)

// The node cut off from the servers and back, as real agents do it (seen
// on Nomad 1.11.3 and 1.10.5 by e2e's TestPartitionReconnect; the record
// and the differences from this model's first version are in
// docs/lifecycle.md, "A partition on real agents").
//
// While the node is cut off, its agent's API fails every request that
// needs the servers (the watcher keeps its last snapshot; see api.go) and
// the local client reports nothing. The servers mark the node
// disconnected (when an allocation on it has disconnect { lost_after }:
// those go unknown, the others lost) or down (all lost), and place
// replacements on the other node, remoteID, if it has room (see
// disconnect). Once lost_after has passed, the unknown allocations are
// lost too.
//
// On the reconnect the node's heartbeat makes it initializing, and the
// servers evaluate its jobs at once, while its allocations are still
// unknown or lost: the reconcile of original and replacement happens then
// (an original the servers do not keep gets desired status stop while
// still unknown), and a replacement with no room elsewhere may be placed
// here on a lost allocation's slot. Then, one client step at a time, the
// client sends every allocation's status, also the ones the servers
// marked lost, which a running task reports as running again (the node
// turns ready on the first). The other node, if it took replacements,
// then fails, so that the node here stays the only one: its allocations
// are lost and replaced here, where the plugin sees them.

// remoteID is the other node.
const remoteID = "00000000-0000-4000-8000-00000000000b"

// disconnect cuts the node off. In half the partitions the other node has
// room for replacements; in the others (a cluster of one node, or no room
// elsewhere) they wait for the reconnect, whose first evaluation places
// them here, while the servers still count a lost allocation's slot free.
func (w *World) disconnect() { w.cutOff(w.rng.IntN(2) == 0) }

// cutOff is disconnect, with or without room elsewhere.
func (w *World) cutOff(elsewhere bool) {
	if !w.connected {
		return
	}
	status := structs.NodeStatusDown
	for _, sa := range w.cluster.Allocs(nodeID) {
		if js := w.jobs[sa.JobID]; js != nil && js.job.Groups[0].LostAfter > 0 && !sa.TerminalStatus() {
			status = structs.NodeStatusDisconnected
		}
	}
	if elsewhere {
		w.remoteUp = w.upRemote()
	}
	w.connected, w.cutAt, w.cutStatus = false, w.now, status
	w.setFaults(func(f *apiFaults) { f.connected = false })
	w.logf("node misses its heartbeats: %s", status)
	w.setNodeStatus(nodeID, status)
}

// upRemote registers the other node, or brings it back, with every class
// the configuration has and as many healthy slots, so that the servers
// can place replacements there. It reports whether the node is up.
func (w *World) upRemote() bool {
	node := scheduler.Node{ID: remoteID, Name: "node-b"}
	for _, c := range w.cfg.Classes {
		g := scheduler.DeviceGroup{Class: c.Name, Attributes: map[string]string{"pool": pool}}
		for n := 1; n <= c.Slots; n++ {
			g.Instances = append(g.Instances, scheduler.Instance{ID: model.SlotID(c.Name, n), Healthy: true})
		}
		node.Devices = append(node.Devices, g)
	}
	if err := w.cluster.UpsertNode(node); err != nil {
		w.violate("harness", "UpsertNode %s: %v", node.Name, err)
		return w.remoteUp
	}
	if !w.remoteUp {
		w.setNodeStatus(remoteID, structs.NodeStatusReady)
	}
	return true
}

// expireLostAfter: lost_after has passed for the node's unknown
// allocations while it is cut off. Every job here has the same lost_after,
// so all expire at once; a down node makes Nomad's reconciler mark them
// lost (desired stop) and replace them, as expiry does.
func (w *World) expireLostAfter() {
	if w.connected || w.cutStatus != structs.NodeStatusDisconnected || w.now.Sub(w.cutAt) < lostAfter {
		return
	}
	w.cutStatus = structs.NodeStatusDown
	w.logf("lost_after passed: the servers mark the node's unknown allocations lost")
	w.setNodeStatus(nodeID, structs.NodeStatusDown)
}

func (w *World) reconnect() {
	if w.connected {
		return
	}
	w.connected, w.cutStatus = true, ""
	w.setFaults(func(f *apiFaults) { f.connected = true })
	w.registerNode() // servers rebuilt meanwhile do not know it yet
	w.runRemote()
	w.logf("node reconnects: initializing, its jobs evaluated; the client will send every allocation's status")
	w.setNodeStatus(nodeID, structs.NodeStatusReady)
	for _, a := range w.sortedLocal() {
		a.resend = true
	}
	if w.remoteUp {
		w.remoteUp = false
		w.logf("node-b, where replacements went, fails")
		w.setNodeStatus(remoteID, structs.NodeStatusDown)
	}
}

// runRemote reports the replacements placed on the other node running, as
// its client would have by now: the reconnect's reconcile weighs a running
// replacement against the original (best_score may keep either).
func (w *World) runRemote() {
	if !w.remoteUp {
		return
	}
	for _, sa := range w.cluster.Allocs(remoteID) {
		if sa.ClientStatus != structs.AllocClientStatusPending || sa.DesiredStatus != structs.AllocDesiredStatusRun {
			continue
		}
		tasks := map[string]string{}
		if sa.AllocatedResources != nil {
			for name := range sa.AllocatedResources.Tasks {
				tasks[name] = structs.TaskStateRunning
			}
		}
		if _, err := w.cluster.UpdateAllocClient(sa.ID, structs.AllocClientStatusRunning, tasks); err != nil {
			w.violate("harness", "UpdateAllocClient %s on node-b: %v", sa.ID, err)
			return
		}
		w.logf("node-b runs %s", sa.ID[len(sa.ID)-4:])
	}
}

// setNodeStatus sets a node's status on the servers and logs the
// evaluations that follow.
func (w *World) setNodeStatus(id, status string) {
	evs, err := w.cluster.SetNodeStatus(id, status)
	for _, ev := range evs {
		w.eval(ev, nil)
	}
	if err != nil {
		w.logf("eval error: %v", err)
	}
}
