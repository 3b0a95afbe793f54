package transfer

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/hashicorp/nomad/api"
)

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
// Not wired yet: the NomadAuthorizer serves the migration's requests only,
// and no request asks for a replica.
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
