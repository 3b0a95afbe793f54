package hooks

import (
	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
)

// ReplicaNodes is the holder's choice of the nodes that keep allocation
// a's replicas of its slot (transfer.ReplicaChooser): model.ReplicaNodes
// over the node list as the slot's class reads it (allocwatch.ReplicaNodes:
// ready, eligible, offering the class with a transfer block, spread over
// the class's attribute). ok false when the slot is of no class of this
// node's configuration, or of one that keeps no replicas. Each replica
// node's loop computes the same set (replicaTargets).
func (m *Manager) ReplicaNodes(a transfer.Alloc, slot string, nodes []nomadapi.NodeStub) ([]string, bool) {
	class, ok := m.cfg.ClassOf(slot)
	if !ok {
		return nil, false
	}
	r := m.cfg.Class(class).Replicate
	if !r.Enabled() {
		return nil, false
	}
	return model.ReplicaNodes(a.ID, a.NodeID, r.Copies, allocwatch.ReplicaNodes(nodes, class, r.Spread)), true
}

var _ transfer.ReplicaChooser = (*Manager)(nil).ReplicaNodes

var _ transfer.ReplicaSource = (*Sender)(nil)
