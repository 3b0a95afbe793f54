package transfer

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Authorizer decides whether a peer may have the data a request asks for.
// A refusal wraps ErrRefused; any other error means the decision could not
// be made now (the Nomad API did not answer) and the peer may ask again.
type Authorizer interface {
	Authorize(ctx context.Context, req Request, peer Peer) error
}

// Peer is who sent a request: the connection's remote address and the
// certificate it presented (already verified: an agent of this cluster).
type Peer struct {
	Addr netip.Addr
	Cert *x509.Certificate
}

// NomadAuthorizer allows a request only as the sending node's own Nomad
// API says: the data of allocation A goes to the node where Nomad placed
// the allocation B that replaces A, and nowhere else (Decide).
type NomadAuthorizer struct {
	// Nomad is this node's agent's API.
	Nomad Nomad
	// Self returns this node's ID (the allocation watcher discovers it).
	Self func(ctx context.Context) (string, error)
	// RequireNodeIdentity, with Region, also asks the peer's certificate
	// to name the replacement's node (identity.go).
	RequireNodeIdentity bool
	Region              string
	// ReplicaNodes chooses the nodes that keep allocation a's replicas of
	// its slot from the node list (model.ReplicaNodes over the list
	// converted for the slot's class: hooks.Manager.ReplicaNodes); ok
	// false when the slot's class keeps none. Nil: every replica's pull
	// is refused.
	ReplicaNodes ReplicaChooser
	// NodeListTTL is how long the node list is kept for the replicas'
	// pulls (default DefaultNodeListTTL).
	NodeListTTL time.Duration

	nodes nodeList
}

var _ Authorizer = (*NomadAuthorizer)(nil)

// Authorize looks A, B and B's node up and applies Decide. An allocation
// or node Nomad does not know is a refusal; a lookup that failed is not.
func (a *NomadAuthorizer) Authorize(ctx context.Context, req Request, peer Peer) error {
	if err := req.validateIDs(); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if req.Kind == KindReplica {
		return a.authorizeReplica(ctx, req, peer)
	}
	self, err := a.Self(ctx)
	if err != nil {
		return fmt.Errorf("this node's ID: %w", err)
	}
	lookup := func(what string, err error) error {
		if errors.Is(err, ErrUnknown) {
			return fmt.Errorf("%w: %s: %w", ErrRefused, what, err)
		}
		return fmt.Errorf("looking up %s: %w", what, err)
	}
	allocA, err := a.Nomad.Allocation(ctx, req.Alloc)
	if err != nil {
		return lookup("the allocation whose data is asked for", err)
	}
	allocB, err := a.Nomad.Allocation(ctx, req.Replacement)
	if err != nil {
		return lookup("the replacement", err)
	}
	var nodeB Node
	if allocB.NodeID != "" {
		if nodeB, err = a.Nomad.Node(ctx, allocB.NodeID); err != nil {
			return lookup("the replacement's node", err)
		}
	}
	if err := Decide(self, req, allocA, allocB, nodeB, peer.Addr); err != nil {
		return err
	}
	if a.RequireNodeIdentity {
		if err := checkNodeIdentity(peer.Cert, nodeB.Name, a.Region); err != nil {
			return fmt.Errorf("%w: the request comes from node %s's address, and %w", ErrRefused, nodeB.Name, err)
		}
	}
	return nil
}

// Decide is the rule, pure: the node self may send allocation a's data to
// the requester at from only if
//
//   - a is on self (this node holds the data),
//   - b is a's replacement: b.PreviousAllocation is a, in the same
//     namespace, job and group; or b is the replacement Nomad 1.6.2
//     places without naming a (replaces),
//   - b is still to run (desired run, not yet terminal),
//   - the request comes from b's node: from is one of the addresses Nomad
//     lists for the node b is placed on.
//
// The last rule is how a requester proves which node it is. Every client
// certificate of a cluster made with `nomad tls cert create -client` is
// alike (client.<region>.nomad), so the certificate proves only that the
// requester is some agent of the cluster; the address it connects from,
// checked against the sending node's own view of where b runs, says which
// one. To pass, a hostile agent would have to hold a cluster certificate
// and send from b's node's address (be on b's node, or spoof its address
// and complete a TCP and TLS handshake through the route back to it). See
// doc.go for what this leaves and what would close it.
func Decide(self string, req Request, a, b Alloc, nodeB Node, from netip.Addr) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
	}
	switch {
	case a.ID != req.Alloc || b.ID != req.Replacement:
		return refuse("the lookups answered for other allocations (%s, %s)", a.ID, b.ID)
	case a.NodeID != self:
		return refuse("allocation %s is on node %s, not on this node %s", a.ID, a.NodeID, self)
	case replaces(a, b) != "":
		return refuse("%s", replaces(a, b))
	case b.Namespace != a.Namespace || b.JobID != a.JobID || b.TaskGroup != a.TaskGroup:
		return refuse("allocation %s (%s/%s/%s) is not of %s's job and group (%s/%s/%s)", b.ID,
			b.Namespace, b.JobID, b.TaskGroup, a.ID, a.Namespace, a.JobID, a.TaskGroup)
	case b.DesiredStatus != api.AllocDesiredStatusRun:
		return refuse("allocation %s is not to run (desired status %q)", b.ID, b.DesiredStatus)
	case b.ClientStatus != api.AllocClientStatusPending && b.ClientStatus != api.AllocClientStatusRunning:
		return refuse("allocation %s has ended (client status %q)", b.ID, b.ClientStatus)
	case b.NodeID == "" || nodeB.ID != b.NodeID:
		return refuse("allocation %s is placed on no node Nomad knows (%q)", b.ID, b.NodeID)
	case !from.IsValid():
		return refuse("the request's source address is unknown")
	case !slices.Contains(nodeB.Addresses, from.Unmap()):
		return refuse("the request comes from %s, which is not an address of node %s (%s), where %s is placed: %v",
			from, nodeB.ID, nodeB.Name, b.ID, nodeB.Addresses)
	}
	return nil
}

// replaces says why b is not a's replacement, "" when it is: b names a
// (PreviousAllocation), or b is the one replacement Nomad 1.6.2 places
// without naming it. Under stop_after_client_disconnect, an allocation
// lost with its node is stopped by the servers and its replacement placed
// as a new allocation under its name, the two unlinked both ways
// (model.LostPredecessor; scheduler.TestStopAfterClientDisconnectNamesNoPredecessor).
// When a's node comes back before the takeover and ends a, its data is
// parked here for that replacement (model.Class.Parks), which pulls it.
// So b naming nothing is a's replacement only when: a names no
// replacement, the servers stopped a as lost with its node (its desired
// status stop, its desired description allocLost), b has a's name
// (Decide checks the namespace, job and group), and b was created after
// a. Decide's other rules (b to run, from b's node) hold as for a link.
func replaces(a, b Alloc) string {
	switch {
	case b.PreviousAllocation == a.ID:
		return ""
	case b.PreviousAllocation != "":
		return fmt.Sprintf("allocation %s does not replace %s (its previous allocation is %q)", b.ID, a.ID, b.PreviousAllocation)
	case a.NextAllocation != "":
		return fmt.Sprintf("allocation %s does not replace %s: it names no previous allocation, and %s names its replacement %s",
			b.ID, a.ID, a.ID, a.NextAllocation)
	case !a.LostByServers || a.DesiredStatus != api.AllocDesiredStatusStop:
		return fmt.Sprintf("allocation %s does not replace %s: it names no previous allocation, and %s was not stopped as lost "+
			"with its node (desired status %q)", b.ID, a.ID, a.ID, a.DesiredStatus)
	case b.Name == "" || b.Name != a.Name:
		return fmt.Sprintf("allocation %s does not replace %s: it names no previous allocation, and its name %q is not %s's (%q)",
			b.ID, a.ID, b.Name, a.ID, a.Name)
	case b.CreateIndex <= a.CreateIndex:
		return fmt.Sprintf("allocation %s does not replace %s: it names no previous allocation, and was not created after it "+
			"(create index %d, %s's %d)", b.ID, a.ID, b.CreateIndex, a.ID, a.CreateIndex)
	}
	return ""
}
