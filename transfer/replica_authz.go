package transfer

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
)

// ReplicaChooser is the choice of the nodes that keep allocation a's
// replicas of its slot, from Nomad's node list: their IDs, in the order
// chosen; ok false when the slot's class keeps no replicas. The holder's
// plugin knows its slots' classes and their replicate blocks; the
// transport does not (hooks.Manager.ReplicaNodes).
type ReplicaChooser func(a Alloc, slot string, nodes []nomadapi.NodeStub) (chosen []string, ok bool)

// DefaultNodeListTTL: a replica node pulls every `every` (10 s at the
// least), and each of a holder's allocations has its own; the list is
// asked once in this long, not once a pull. A node that joins or leaves
// is seen that much later at most.
const DefaultNodeListTTL = 5 * time.Second

// nodeList is the node list, kept NodeListTTL.
type nodeList struct {
	mu    sync.Mutex
	at    time.Time
	nodes []nomadapi.NodeStub
}

// get is the list, asked of n when older than ttl; a failed lookup is not
// kept. Asked under the lock: concurrent pulls wait for one answer.
func (l *nodeList) get(ctx context.Context, n Nomad, ttl time.Duration, now time.Time) ([]nomadapi.NodeStub, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.at.IsZero() && now.Sub(l.at) < ttl && now.Sub(l.at) >= 0 {
		return l.nodes, nil
	}
	nodes, err := n.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	l.at, l.nodes = now, nodes
	return nodes, nil
}

// authorizeReplica looks up A, the node list (kept NodeListTTL) and the
// nodes chosen from it, and applies DecideReplica. An allocation Nomad
// does not know is a refusal, and so is a slot of a class that keeps no
// replicas; a lookup that failed is not.
func (a *NomadAuthorizer) authorizeReplica(ctx context.Context, req Request, peer Peer) error {
	if a.ReplicaNodes == nil {
		return fmt.Errorf("%w: this node serves no replica pulls", ErrRefused)
	}
	self, err := a.Self(ctx)
	if err != nil {
		return fmt.Errorf("this node's ID: %w", err)
	}
	alloc, err := a.Nomad.Allocation(ctx, req.Alloc)
	if errors.Is(err, ErrUnknown) {
		return fmt.Errorf("%w: the allocation whose replica is asked for: %w", ErrRefused, err)
	}
	if err != nil {
		return fmt.Errorf("looking up the allocation whose replica is asked for: %w", err)
	}
	ttl := a.NodeListTTL
	if ttl <= 0 {
		ttl = DefaultNodeListTTL
	}
	list, err := a.nodes.get(ctx, a.Nomad, ttl, time.Now())
	if err != nil {
		return fmt.Errorf("listing the nodes: %w", err)
	}
	ids, ok := a.ReplicaNodes(alloc, req.Slot, list)
	if !ok {
		return fmt.Errorf("%w: slot %q is not of a class that keeps replicas", ErrRefused, req.Slot)
	}
	chosen := make([]Node, 0, len(ids))
	for _, id := range ids {
		n, err := a.Nomad.Node(ctx, id)
		if errors.Is(err, ErrUnknown) {
			continue // gone since the list: it keeps nothing
		}
		if err != nil {
			return fmt.Errorf("looking up replica node %s: %w", id, err)
		}
		chosen = append(chosen, n)
	}
	if err := DecideReplica(self, alloc, chosen, peer.Addr); err != nil {
		return err
	}
	if a.RequireNodeIdentity {
		for _, n := range chosen {
			if n.ID != self && slices.Contains(n.Addresses, peer.Addr.Unmap()) {
				if err := checkNodeIdentity(peer.Cert, n.Name, a.Region); err != nil {
					return fmt.Errorf("%w: the request comes from node %s's address, and %w", ErrRefused, n.Name, err)
				}
				return nil
			}
		}
	}
	return nil
}

// DecideReplica is the rule for a replica's pull (issue 30), pure: the
// node self may send allocation a's data to the requester at from, to keep
// as a replica, only if
//
//   - a is on self (this node holds the data),
//   - a still runs (desired run, client pending or running): a replica is
//     of live data; once a has ended its data goes by the migration's
//     rules to its replacement, never to a replica,
//   - the request comes from one of chosen, the nodes that keep a's
//     replicas (model.ReplicaNodes over this node's own view of Nomad's
//     node list, looked up as Nodes): from is one of the addresses Nomad
//     lists for one of them.
//
// As for Decide, the address is how the requester proves which node it
// is (doc.go says what that leaves).
//
// NomadAuthorizer applies it to a replica's pull (KindReplica).
func DecideReplica(self string, a Alloc, chosen []Node, from netip.Addr) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
	}
	switch {
	case a.NodeID != self:
		return refuse("allocation %s is on node %s, not on this node %s", a.ID, a.NodeID, self)
	case a.DesiredStatus != api.AllocDesiredStatusRun:
		return refuse("allocation %s is not to run (desired status %q): no replica is made of it", a.ID, a.DesiredStatus)
	case a.ClientStatus != api.AllocClientStatusPending && a.ClientStatus != api.AllocClientStatusRunning:
		return refuse("allocation %s does not run (client status %q): no replica is made of it", a.ID, a.ClientStatus)
	case !from.IsValid():
		return refuse("the request's source address is unknown")
	}
	for _, n := range chosen {
		if n.ID != self && slices.Contains(n.Addresses, from.Unmap()) {
			return nil
		}
	}
	ids := make([]string, 0, len(chosen))
	for _, n := range chosen {
		ids = append(ids, n.ID)
	}
	return refuse("the request comes from %s, which is not an address of a node that keeps allocation %s's replicas %v",
		from, a.ID, ids)
}
