package transfer_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
)

// TestDecideReplica: the holder sends a replica of A only to a node that
// keeps A's replicas, and only while A runs.
func TestDecideReplica(t *testing.T) {
	a := transfer.Alloc{ID: allocA, NodeID: nodeA, Namespace: "default", JobID: "pg", TaskGroup: "db",
		DesiredStatus: "run", ClientStatus: "running"}
	nb := transfer.Node{ID: nodeB, Name: "b", Addresses: []netip.Addr{netip.MustParseAddr(addrOfB), netip.MustParseAddr("192.168.7.2")}}
	nc := transfer.Node{ID: nodeC, Name: "c", Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.3")}}
	na := transfer.Node{ID: nodeA, Name: "a", Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}
	cases := []struct {
		name    string
		self    string
		change  func(a *transfer.Alloc)
		chosen  []transfer.Node
		from    string
		wantErr string // "" allows
	}{
		{name: "a replica node asks", self: nodeA, chosen: []transfer.Node{nb}, from: addrOfB},
		{name: "the second of two replica nodes asks", self: nodeA, chosen: []transfer.Node{nb, nc}, from: "10.0.0.3"},
		{name: "from another of its addresses", self: nodeA, chosen: []transfer.Node{nb}, from: "192.168.7.2"},
		{name: "as an IPv4-mapped IPv6 address", self: nodeA, chosen: []transfer.Node{nb}, from: "::ffff:10.0.0.2"},
		{name: "A pending (its task not started yet)", self: nodeA, chosen: []transfer.Node{nb}, from: addrOfB,
			change: func(a *transfer.Alloc) { a.ClientStatus = "pending" }},
		{name: "a node that keeps no replica of A asks", self: nodeA, chosen: []transfer.Node{nb}, from: "10.0.0.3",
			wantErr: "not an address of a node that keeps allocation " + allocA + "'s replicas [" + nodeB + "]"},
		{name: "no node keeps replicas", self: nodeA, from: addrOfB, wantErr: "not an address of a node"},
		{name: "the holder's own node, listed by mistake", self: nodeA, chosen: []transfer.Node{na}, from: "10.0.0.1",
			wantErr: "not an address of a node"},
		{name: "A is not on this node", self: nodeC, chosen: []transfer.Node{nb}, from: addrOfB,
			wantErr: "is on node " + nodeA + ", not on this node " + nodeC},
		{name: "A is stopping", self: nodeA, chosen: []transfer.Node{nb}, from: addrOfB,
			change: func(a *transfer.Alloc) { a.DesiredStatus = "stop" }, wantErr: "is not to run"},
		{name: "A has ended", self: nodeA, chosen: []transfer.Node{nb}, from: addrOfB,
			change: func(a *transfer.Alloc) { a.ClientStatus = "complete" }, wantErr: "does not run"},
		{name: "A is lost", self: nodeA, chosen: []transfer.Node{nb}, from: addrOfB,
			change: func(a *transfer.Alloc) { a.ClientStatus = "lost" }, wantErr: "does not run"},
		{name: "A is unknown (this node was cut off)", self: nodeA, chosen: []transfer.Node{nb}, from: addrOfB,
			change: func(a *transfer.Alloc) { a.ClientStatus = "unknown" }, wantErr: "does not run"},
		{name: "no source address", self: nodeA, chosen: []transfer.Node{nb}, wantErr: "source address is unknown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			alloc := a
			if tc.change != nil {
				tc.change(&alloc)
			}
			var from netip.Addr
			if tc.from != "" {
				from = netip.MustParseAddr(tc.from)
			}
			err := transfer.DecideReplica(tc.self, alloc, tc.chosen, from)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, transfer.ErrRefused) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err %v, want a refusal saying %q", err, tc.wantErr)
			}
		})
	}
}
