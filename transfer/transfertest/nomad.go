package transfertest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
)

// Nomad is a fake of the lookups a transfer asks of the Nomad API: the
// allocations and nodes it is given, ErrUnknown for any other, and Err
// (when set) for every lookup, as an API that does not answer.
type Nomad struct {
	mu     sync.Mutex
	allocs map[string]transfer.Alloc
	nodes  map[string]transfer.Node
	list   []nomadapi.NodeStub
	err    error
	calls  int
	lists  int
}

var _ transfer.Nomad = (*Nomad)(nil)

// NewNomad returns a fake that knows nothing yet.
func NewNomad() *Nomad {
	return &Nomad{allocs: map[string]transfer.Alloc{}, nodes: map[string]transfer.Node{}}
}

// SetAlloc adds or replaces an allocation.
func (n *Nomad) SetAlloc(a transfer.Alloc) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.allocs[a.ID] = a
}

// SetNode adds or replaces a node.
func (n *Nomad) SetNode(node transfer.Node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nodes[node.ID] = node
}

// SetErr makes every lookup fail with err (nil: answer again).
func (n *Nomad) SetErr(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.err = err
}

// Calls is how many lookups were made.
func (n *Nomad) Calls() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls
}

// Allocation implements transfer.Nomad.
func (n *Nomad) Allocation(_ context.Context, id string) (transfer.Alloc, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls++
	if n.err != nil {
		return transfer.Alloc{}, n.err
	}
	a, ok := n.allocs[id]
	if !ok {
		return transfer.Alloc{}, fmt.Errorf("allocation %s: %w", id, transfer.ErrUnknown)
	}
	return a, nil
}

// Node implements transfer.Nomad.
func (n *Nomad) Node(_ context.Context, id string) (transfer.Node, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls++
	if n.err != nil {
		return transfer.Node{}, n.err
	}
	node, ok := n.nodes[id]
	if !ok {
		return transfer.Node{}, fmt.Errorf("node %s: %w", id, transfer.ErrUnknown)
	}
	return node, nil
}

// SetNodeList sets what Nodes answers: the node list as the servers list
// it (GET /v1/nodes?resources=true).
func (n *Nomad) SetNodeList(list []nomadapi.NodeStub) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.list = slices.Clone(list)
}

// NodeLists is how many times the node list was asked for (also counted
// in Calls).
func (n *Nomad) NodeLists() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lists
}

// Nodes implements transfer.Nomad.
func (n *Nomad) Nodes(_ context.Context) ([]nomadapi.NodeStub, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls++
	n.lists++
	if n.err != nil {
		return nil, n.err
	}
	return slices.Clone(n.list), nil
}
