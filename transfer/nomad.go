package transfer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
)

// Nomad is what a transfer asks of the Nomad API: the sender to decide
// whether a request is allowed, the receiver to find the sender. Both ask
// their own local agent. APINomad answers with nomad/api; tests use fakes.
type Nomad interface {
	// Allocation is GET /v1/allocation/<id>. An allocation Nomad does not
	// know (never, or garbage-collected) is ErrUnknown.
	Allocation(ctx context.Context, id string) (Alloc, error)
	// Node is GET /v1/node/<id>; ErrUnknown if Nomad has no such node.
	Node(ctx context.Context, id string) (Node, error)
	// Nodes is GET /v1/nodes?resources=true (nomadapi.Nodes): every node
	// the servers know, what the choice of an allocation's replica nodes
	// reads (a replica's pull: DecideReplica). The authorizer keeps it a
	// few seconds (NodeListTTL).
	Nodes(ctx context.Context) ([]nomadapi.NodeStub, error)
}

// ErrUnknown: Nomad does not know the allocation or node.
var ErrUnknown = errors.New("not known to Nomad")

// Alloc is what a transfer reads of an allocation.
type Alloc struct {
	ID, NodeID, Namespace, JobID, TaskGroup string
	// Name is Nomad's "<job>.<group>[<index>]": a replacement Nomad
	// places without naming its predecessor takes its name (Decide's
	// unlinked case).
	Name string
	// PreviousAllocation is the allocation this one replaces: the one
	// whose data it may have; NextAllocation, its replacement.
	PreviousAllocation, NextAllocation string
	DesiredStatus                      string // api.AllocDesiredStatusRun, ...
	ClientStatus                       string // api.AllocClientStatusPending, ...
	// LostByServers: the servers stopped it as lost with its node (its
	// desired description, nomadapi.LostByServers).
	LostByServers bool
	// CreateIndex is the servers' index at its creation.
	CreateIndex uint64
}

// Node is what a transfer reads of a node.
type Node struct {
	ID, Name, Status string
	// Addresses are every address Nomad lists for the node: its HTTP
	// advertise address, unique.network.ip-address, and its networks' IPs.
	Addresses []netip.Addr
	// TransferAddr and TransferPort are what the node's plugin publishes
	// (device-group attributes AttrAddress, AttrPort); TransferAddr is
	// invalid when the plugin listens on every address.
	TransferAddr netip.Addr
	TransferPort int
}

// The device-group attributes a plugin publishes its transport under, on
// its zfs/dataset groups (DeviceVendor, DeviceType): read by peers through
// the Nomad API, which needs no more than node:read.
const (
	AttrPort    = "transfer_port"
	AttrAddress = "transfer_address"
	// DeviceVendor and DeviceType are the plugin's device groups'
	// (model.Vendor, model.DeviceType).
	DeviceVendor = "zfs"
	DeviceType   = "dataset"
)

// APINomad answers through a Nomad agent's HTTP API with the plugin's
// `nomad` block (internal/nomadapi: its token and TLS, the token file
// re-read when the API answers 401 or 403).
type APINomad struct {
	client *nomadapi.Client
}

var _ Nomad = (*APINomad)(nil)

// NewAPINomad makes a client from the plugin's `nomad` block, over the
// NOMAD_* environment.
func NewAPINomad(cfg nomadapi.Config) (*APINomad, error) {
	c, err := nomadapi.New(cfg, nil)
	if err != nil {
		return nil, err
	}
	return &APINomad{client: c}, nil
}

// Allocation implements Nomad. Any 404 is ErrUnknown; a token that cannot
// read the allocation's namespace is an error (nomadapi's
// ErrPermissionDenied), never ErrUnknown.
func (n *APINomad) Allocation(ctx context.Context, id string) (Alloc, error) {
	if !nomadapi.IsUUID(id) {
		return Alloc{}, fmt.Errorf("allocation ID %q is not a UUID", id)
	}
	a, err := n.client.Allocation(ctx, id)
	if status, _ := nomadapi.HTTPStatus(err); status == http.StatusNotFound {
		return Alloc{}, fmt.Errorf("allocation %s: %w", id, ErrUnknown)
	}
	if err != nil {
		return Alloc{}, err
	}
	return Alloc{ID: a.ID, NodeID: a.NodeID, Namespace: a.Namespace, JobID: a.JobID, TaskGroup: a.TaskGroup, Name: a.Name,
		PreviousAllocation: a.PreviousAllocation, NextAllocation: a.NextAllocation, DesiredStatus: a.DesiredStatus,
		ClientStatus: a.ClientStatus, LostByServers: nomadapi.LostByServers(a.DesiredDescription), CreateIndex: a.CreateIndex}, nil
}

// Node implements Nomad. Any 404 is ErrUnknown.
func (n *APINomad) Node(ctx context.Context, id string) (Node, error) {
	if !nomadapi.IsUUID(id) {
		return Node{}, fmt.Errorf("node ID %q is not a UUID", id)
	}
	node, err := n.client.Node(ctx, id)
	if status, _ := nomadapi.HTTPStatus(err); status == http.StatusNotFound {
		return Node{}, fmt.Errorf("node %s: %w", id, ErrUnknown)
	}
	if err != nil {
		return Node{}, err
	}
	return convertNode(node), nil
}

// Nodes implements Nomad.
func (n *APINomad) Nodes(ctx context.Context) ([]nomadapi.NodeStub, error) {
	return n.client.Nodes(ctx)
}

// convertNode reads a node's addresses and its plugin's published
// transport.
func convertNode(node *api.Node) Node {
	out := Node{ID: node.ID, Name: node.Name, Status: node.Status}
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil && !a.IsUnspecified() {
			a = a.Unmap()
			for _, have := range out.Addresses {
				if have == a {
					return
				}
			}
			out.Addresses = append(out.Addresses, a)
		}
	}
	if host, _, err := net.SplitHostPort(node.HTTPAddr); err == nil {
		add(host)
	}
	add(node.Attributes["unique.network.ip-address"])
	if r := node.NodeResources; r != nil {
		for _, nw := range r.Networks {
			if nw != nil {
				add(nw.IP)
			}
		}
		for _, d := range r.Devices {
			if d == nil || d.Vendor != DeviceVendor || d.Type != DeviceType {
				continue
			}
			if p := d.Attributes[AttrPort]; p != nil && p.IntVal != nil && out.TransferPort == 0 {
				out.TransferPort = int(*p.IntVal)
			}
			if a := d.Attributes[AttrAddress]; a != nil && a.StringVal != nil && !out.TransferAddr.IsValid() {
				if ip, err := netip.ParseAddr(*a.StringVal); err == nil {
					out.TransferAddr = ip.Unmap()
				}
			}
		}
	}
	return out
}
