package allocwatch

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
)

// source is the seam to the Nomad HTTP API: the calls of nomadapi.Client
// the watcher makes, one per request kind. nomadapi classifies their
// errors (ErrNodeNotFound, ErrAllocNotFound, ErrUnknownAlloc,
// ErrPermissionDenied, ErrNoIndex); tests answer from a script.
type source interface {
	// NodeAllocations is GET /v1/node/<id>/allocations. waitIndex 0 does
	// not block. The index is the answer's X-Nomad-Index.
	NodeAllocations(ctx context.Context, nodeID string, waitIndex uint64, wait time.Duration) ([]*api.Allocation, uint64, error)
	// Node is GET /v1/node/<id>.
	Node(ctx context.Context, nodeID string) (*api.Node, error)
	// AgentSelf is GET /v1/agent/self.
	AgentSelf(ctx context.Context) (*api.AgentSelf, error)
	// Allocation is GET /v1/allocation/<id>.
	Allocation(ctx context.Context, allocID string) (*api.Allocation, error)
	// AllocationStats is GET /v1/client/allocation/<id>/stats.
	AllocationStats(ctx context.Context, allocID string) error
	// Nodes is GET /v1/nodes?resources=true (a replica node's view).
	Nodes(ctx context.Context) ([]nomadapi.NodeStub, error)
	// AllocationLoss is GET /v1/allocation/<id> read for a takeover.
	AllocationLoss(ctx context.Context, allocID string) (nomadapi.AllocLoss, error)
	// Requests counts the requests made, by kind (nomadapi's Kind*).
	Requests() map[string]uint64
}

var _ source = (*nomadapi.Client)(nil)

// The watcher's own failures, beside nomadapi's.
var (
	// errClientIDFile: Config.ClientIDFile cannot be read (yet).
	errClientIDFile = errors.New("reading the client ID file")
	// errNoClientNode: /v1/agent/self names no client node.
	errNoClientNode = errors.New("agent has no client node ID")
)
