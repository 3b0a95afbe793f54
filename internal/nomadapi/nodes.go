package nomadapi

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/nomad/api"
)

// NodeStub is what the choice of a replica's nodes reads of one node
// (model.ReplicaNodes, issue 30), as GET /v1/nodes?resources=true answers
// it: Nomad's structs.NodeListStub with the node's resources
// (command/agent/node_endpoint.go NodesRequest, http.go
// parseNodeListStubFields; nomad/structs/structs.go Node.Stub).
type NodeStub struct {
	ID, Datacenter, NodeClass, NodePool string
	// Status ("ready", "down", "disconnected", "initializing") and
	// SchedulingEligibility ("eligible", "ineligible"), as the servers
	// have them.
	Status, SchedulingEligibility string
	// Devices are the node's device groups as its plugins fingerprint
	// them, with the names of each group's attributes.
	Devices []DeviceGroup
}

// DeviceGroup is one device group of a node: vendor/type/name and the
// names of its attributes (their values are not read).
type DeviceGroup struct {
	Vendor, Type, Name string
	Attributes         []string
}

// nodeStubAnswer is the part of structs.NodeListStub's JSON NodeStub
// reads.
type nodeStubAnswer struct {
	ID, Datacenter, NodeClass, NodePool, Status, SchedulingEligibility string
	NodeResources                                                      *struct {
		Devices []struct {
			Vendor, Type, Name string
			Attributes         map[string]any
		}
	}
}

// Nodes is GET /v1/nodes?resources=true: every node the servers know,
// with its device groups. It needs node:read, as the transfer's other
// lookups.
func (c *Client) Nodes(ctx context.Context) ([]NodeStub, error) {
	var raw []nodeStubAnswer
	q := &api.QueryOptions{Params: map[string]string{"resources": "true"}}
	if err := c.Query(ctx, "/v1/nodes", q, &raw); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	out := make([]NodeStub, 0, len(raw))
	for _, n := range raw {
		s := NodeStub{ID: n.ID, Datacenter: n.Datacenter, NodeClass: n.NodeClass, NodePool: n.NodePool,
			Status: n.Status, SchedulingEligibility: n.SchedulingEligibility}
		if n.NodeResources != nil {
			for _, d := range n.NodeResources.Devices {
				g := DeviceGroup{Vendor: d.Vendor, Type: d.Type, Name: d.Name}
				for k := range d.Attributes {
					g.Attributes = append(g.Attributes, k)
				}
				slices.Sort(g.Attributes)
				s.Devices = append(s.Devices, g)
			}
		}
		out = append(out, s)
	}
	return out, nil
}
