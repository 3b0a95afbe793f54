package allocwatch

import (
	"context"
	"fmt"
	"slices"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// The conversions of Nomad's answers that replicas' rules take (issue 30):
// an allocation's loss, for DecideTakeover (B's Reserve), and
// the node list, for ReplicaNodes; and a replica node's view of the
// cluster (hooks.Cluster): the node list and another node's allocations.

// LostAlloc converts what the servers say of an allocation's loss
// (nomadapi.AllocationLoss) into what model.DecideTakeover reads.
func LostAlloc(l nomadapi.AllocLoss) model.LostAlloc {
	return model.LostAlloc{ID: l.ID, Namespace: l.Namespace, JobID: l.JobID, TaskGroup: l.TaskGroup, Name: l.Name,
		ClientStatus: l.ClientStatus, LostByServers: l.LostByServers, CreateIndex: l.CreateIndex, LostAt: l.LostAt, ModifiedAt: l.ModifiedAt, WasUnknown: l.WasUnknown,
		StopAfter: l.StopAfterClientDisconnect, MaxClientDisconnect: l.MaxClientDisconnect, KillTimeout: l.KillTimeout,
		ShutdownDelay: l.ShutdownDelay}
}

// transferPortAttr is the device-group attribute a plugin with a transfer
// block publishes (transfer.AttrPort; the watcher does not import the
// transport, and a test holds the two equal).
const transferPortAttr = "transfer_port"

// ReplicaNodes converts the node list (nomadapi.Nodes) into what
// model.ReplicaNodes chooses from, for class: a node is ready when Nomad
// has it ready and eligible; it offers the class when it fingerprints
// its device group (zfs/dataset/<class>) with a transfer port; its spread
// value is the attribute spread names (node.datacenter, node.class,
// node.pool; "" for none or any other).
func ReplicaNodes(nodes []nomadapi.NodeStub, class, spread string) []model.ReplicaNode {
	out := make([]model.ReplicaNode, 0, len(nodes))
	for _, n := range nodes {
		r := model.ReplicaNode{ID: n.ID, Ready: n.Status == "ready" && n.SchedulingEligibility == "eligible"}
		for _, d := range n.Devices {
			if d.Vendor == model.Vendor && d.Type == model.DeviceType && d.Name == class && slices.Contains(d.Attributes, transferPortAttr) {
				r.Offers = true
			}
		}
		switch spread {
		case "node.datacenter":
			r.Spread = n.Datacenter
		case "node.class":
			r.Spread = n.NodeClass
		case "node.pool":
			r.Spread = n.NodePool
		}
		out = append(out, r)
	}
	return out
}

// Loss is what the servers say of allocation id's loss (GET
// /v1/allocation/<id>), as model.DecideTakeover reads it: B's Reserve
// asks it of its predecessor on another node, in a class that keeps
// replicas.
func (w *Watcher) Loss(ctx context.Context, id string) (model.LostAlloc, error) {
	if !nomadapi.IsUUID(id) {
		return model.LostAlloc{}, fmt.Errorf("allocation ID %q is not a UUID", id)
	}
	l, err := w.src.AllocationLoss(ctx, id)
	if err != nil {
		return model.LostAlloc{}, err
	}
	return LostAlloc(l), nil
}

// Nodes is every node the servers know (GET /v1/nodes?resources=true), as
// the choice of replica nodes reads them (ReplicaNodes).
func (w *Watcher) Nodes(ctx context.Context) ([]nomadapi.NodeStub, error) {
	return w.src.Nodes(ctx)
}

// NodeAllocations are the allocations Nomad places on node (GET
// /v1/node/<id>/allocations, not blocking), converted as this node's own
// are: a replica node finds there the allocations it keeps replicas of.
func (w *Watcher) NodeAllocations(ctx context.Context, node string) ([]model.Alloc, error) {
	if !nomadapi.IsUUID(node) {
		return nil, fmt.Errorf("node ID %q is not a UUID", node)
	}
	as, _, err := w.src.NodeAllocations(ctx, node, 0, 0)
	if err != nil {
		return nil, err
	}
	out := make([]model.Alloc, 0, len(as))
	for _, a := range as {
		if a != nil {
			out = append(out, convertAlloc(a))
		}
	}
	return out, nil
}
