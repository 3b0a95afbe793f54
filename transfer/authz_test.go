package transfer_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer/transfertest"
)

const (
	nodeA   = "aaaaaaaa-0000-0000-0000-000000000001"
	nodeB   = "bbbbbbbb-0000-0000-0000-000000000002"
	nodeC   = "cccccccc-0000-0000-0000-000000000003"
	allocA  = "a11ca11c-0000-0000-0000-00000000000a"
	allocB  = "b11cb11c-0000-0000-0000-00000000000b"
	allocC  = "c11cc11c-0000-0000-0000-00000000000c"
	addrOfB = "10.0.0.2"
)

// world is A on node A, replaced by B on node B (10.0.0.2), and an
// unrelated C on node C.
func world() (a, b transfer.Alloc, nb transfer.Node) {
	a = transfer.Alloc{ID: allocA, NodeID: nodeA, Namespace: "default", JobID: "pg", TaskGroup: "db",
		DesiredStatus: "stop", ClientStatus: "running"}
	b = transfer.Alloc{ID: allocB, NodeID: nodeB, Namespace: "default", JobID: "pg", TaskGroup: "db",
		PreviousAllocation: allocA, DesiredStatus: "run", ClientStatus: "pending"}
	nb = transfer.Node{ID: nodeB, Name: "b", Addresses: []netip.Addr{netip.MustParseAddr(addrOfB), netip.MustParseAddr("192.168.7.2")}}
	return a, b, nb
}

// TestDecide: the sender allows A's data only to the node where its own
// Nomad placed A's replacement. Each way of asking for it otherwise is a
// row.
func TestDecide(t *testing.T) {
	req := transfer.Request{Alloc: allocA, Replacement: allocB, Slot: "data-1"}
	from := netip.MustParseAddr(addrOfB)
	// unlinked is Nomad 1.6.2's replacement of an allocation lost under
	// stop_after_client_disconnect: B names no predecessor, A no
	// replacement; the servers stopped A as lost, and its node, back,
	// ended it. then changes it further.
	unlinked := func(then func(a, b *transfer.Alloc)) func(a, b *transfer.Alloc, nb *transfer.Node) {
		return func(a, b *transfer.Alloc, nb *transfer.Node) {
			b.PreviousAllocation = ""
			a.Name, b.Name = "pg.db[0]", "pg.db[0]"
			a.ClientStatus, a.LostByServers = "complete", true
			a.CreateIndex, b.CreateIndex = 10, 20
			if then != nil {
				then(a, b)
			}
		}
	}
	cases := []struct {
		name    string
		self    string
		req     transfer.Request
		change  func(a, b *transfer.Alloc, nb *transfer.Node)
		from    netip.Addr
		wantErr string // "" allows
	}{
		{name: "B's node asks for A's data", self: nodeA, req: req, from: from},
		{name: "from another address of B's node", self: nodeA, req: req, from: netip.MustParseAddr("192.168.7.2")},
		{name: "as an IPv4-mapped IPv6 address", self: nodeA, req: req, from: netip.MustParseAddr("::ffff:10.0.0.2")},
		{name: "B already running", self: nodeA, req: req, from: from,
			change: func(a, b *transfer.Alloc, nb *transfer.Node) { b.ClientStatus = "running" }},
		{name: "another node asks", self: nodeA, req: req, from: netip.MustParseAddr("10.0.0.3"),
			wantErr: "comes from 10.0.0.3, which is not an address of node " + nodeB},
		{name: "A is not on this node", self: nodeC, req: req, from: from,
			wantErr: "is on node " + nodeA + ", not on this node " + nodeC},
		{name: "B does not replace A", self: nodeA, req: req, from: from,
			change:  func(a, b *transfer.Alloc, nb *transfer.Node) { b.PreviousAllocation = allocC },
			wantErr: "does not replace"},
		{name: "B replaces nothing", self: nodeA, req: req, from: from,
			change:  func(a, b *transfer.Alloc, nb *transfer.Node) { b.PreviousAllocation = "" },
			wantErr: "does not replace"},
		{name: "B names no predecessor: Nomad 1.6.2's replacement of A, stopped as lost, under A's name", self: nodeA, req: req, from: from,
			change: unlinked(nil)},
		{name: "B names no predecessor, A still lost (its node not back)", self: nodeA, req: req, from: from,
			change: unlinked(func(a, b *transfer.Alloc) { a.ClientStatus = "lost" })},
		{name: "B names no predecessor, A names another replacement", self: nodeA, req: req, from: from,
			change:  unlinked(func(a, b *transfer.Alloc) { a.NextAllocation = allocC }),
			wantErr: "names its replacement " + allocC},
		{name: "B names no predecessor, A not stopped as lost (a job update, a stop)", self: nodeA, req: req, from: from,
			change:  unlinked(func(a, b *transfer.Alloc) { a.LostByServers = false }),
			wantErr: "was not stopped as lost"},
		{name: "B names no predecessor, A lost but to run again", self: nodeA, req: req, from: from,
			change:  unlinked(func(a, b *transfer.Alloc) { a.DesiredStatus = "run" }),
			wantErr: "was not stopped as lost"},
		{name: "B names no predecessor, another index of the group", self: nodeA, req: req, from: from,
			change:  unlinked(func(a, b *transfer.Alloc) { b.Name = "pg.db[1]" }),
			wantErr: "is not " + allocA + "'s"},
		{name: "B names no predecessor, both without a name", self: nodeA, req: req, from: from,
			change:  unlinked(func(a, b *transfer.Alloc) { a.Name, b.Name = "", "" }),
			wantErr: "is not " + allocA + "'s"},
		{name: "B names no predecessor, created before A", self: nodeA, req: req, from: from,
			change:  unlinked(func(a, b *transfer.Alloc) { b.CreateIndex = 5 }),
			wantErr: "was not created after it"},
		{name: "B names no predecessor, created at A's index", self: nodeA, req: req, from: from,
			change:  unlinked(func(a, b *transfer.Alloc) { b.CreateIndex = 10 }),
			wantErr: "was not created after it"},
		{name: "B names no predecessor, of another job", self: nodeA, req: req, from: from,
			change:  unlinked(func(a, b *transfer.Alloc) { b.JobID = "other" }),
			wantErr: "job and group"},
		{name: "B names no predecessor, in another namespace", self: nodeA, req: req, from: from,
			change:  unlinked(func(a, b *transfer.Alloc) { b.Namespace = "team2" }),
			wantErr: "job and group"},
		{name: "B names no predecessor, stopped", self: nodeA, req: req, from: from,
			change:  unlinked(func(a, b *transfer.Alloc) { b.DesiredStatus = "stop" }),
			wantErr: "is not to run"},
		{name: "B names no predecessor, asked from another node", self: nodeA, req: req, from: netip.MustParseAddr("10.0.0.3"),
			change:  unlinked(nil),
			wantErr: "not an address of node " + nodeB},
		{name: "B names another predecessor, A stopped as lost under B's name", self: nodeA, req: req, from: from,
			change:  unlinked(func(a, b *transfer.Alloc) { b.PreviousAllocation = allocC }),
			wantErr: "does not replace"},
		{name: "B of another job", self: nodeA, req: req, from: from,
			change:  func(a, b *transfer.Alloc, nb *transfer.Node) { b.JobID = "other" },
			wantErr: "is not of " + allocA + "'s job and group"},
		{name: "B in another namespace", self: nodeA, req: req, from: from,
			change:  func(a, b *transfer.Alloc, nb *transfer.Node) { b.Namespace = "team2" },
			wantErr: "job and group"},
		{name: "B of another group", self: nodeA, req: req, from: from,
			change:  func(a, b *transfer.Alloc, nb *transfer.Node) { b.TaskGroup = "web" },
			wantErr: "job and group"},
		{name: "B stopped", self: nodeA, req: req, from: from,
			change:  func(a, b *transfer.Alloc, nb *transfer.Node) { b.DesiredStatus = "stop" },
			wantErr: "is not to run"},
		{name: "B ended", self: nodeA, req: req, from: from,
			change:  func(a, b *transfer.Alloc, nb *transfer.Node) { b.ClientStatus = "failed" },
			wantErr: "has ended"},
		{name: "B lost", self: nodeA, req: req, from: from,
			change:  func(a, b *transfer.Alloc, nb *transfer.Node) { b.ClientStatus = "lost" },
			wantErr: "has ended"},
		{name: "B not placed", self: nodeA, req: req, from: from,
			change:  func(a, b *transfer.Alloc, nb *transfer.Node) { b.NodeID = "" },
			wantErr: "placed on no node"},
		{name: "the node lookup answered for another node", self: nodeA, req: req, from: from,
			change:  func(a, b *transfer.Alloc, nb *transfer.Node) { nb.ID = nodeC },
			wantErr: "placed on no node"},
		{name: "no source address", self: nodeA, req: req,
			wantErr: "source address is unknown"},
		{name: "the request and the lookups disagree", self: nodeA, req: transfer.Request{Alloc: allocC, Replacement: allocB, Slot: "data-1"}, from: from,
			wantErr: "other allocations"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b, nb := world()
			if tc.change != nil {
				tc.change(&a, &b, &nb)
			}
			err := transfer.Decide(tc.self, tc.req, a, b, nb, tc.from)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, transfer.ErrRefused) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want a refusal saying %q", err, tc.wantErr)
			}
		})
	}
}

// TestNomadAuthorizer: the lookups behind Decide. What Nomad does not
// know is refused; a Nomad that does not answer is not a refusal (the
// peer asks again).
func TestNomadAuthorizer(t *testing.T) {
	self := func(context.Context) (string, error) { return nodeA, nil }
	peer := transfer.Peer{Addr: netip.MustParseAddr(addrOfB)}
	cases := []struct {
		name        string
		req         transfer.Request
		setup       func(n *transfertest.Nomad)
		wantRefused bool
		wantErr     string
	}{
		{name: "allowed", req: transfer.Request{Alloc: allocA, Replacement: allocB, Slot: "data-1"}},
		{name: "A garbage-collected", req: transfer.Request{Alloc: allocC, Replacement: allocB, Slot: "data-1"}, wantRefused: true,
			wantErr: "the allocation whose data is asked for"},
		{name: "B unknown", req: transfer.Request{Alloc: allocA, Replacement: allocC, Slot: "data-1"}, wantRefused: true, wantErr: "the replacement"},
		{name: "B's node unknown", req: transfer.Request{Alloc: allocA, Replacement: allocB, Slot: "data-1"},
			setup: func(n *transfertest.Nomad) {
				_, b, _ := world()
				b.NodeID = nodeC
				n.SetAlloc(b)
			}, wantRefused: true, wantErr: "the replacement's node"},
		{name: "Nomad does not answer", req: transfer.Request{Alloc: allocA, Replacement: allocB, Slot: "data-1"},
			setup: func(n *transfertest.Nomad) { n.SetErr(errors.New("connection refused")) }, wantErr: "connection refused"},
		{name: "not an allocation ID", req: transfer.Request{Alloc: "../../agent/self", Replacement: allocB, Slot: "data-1"},
			wantRefused: true, wantErr: "is not an allocation ID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := transfertest.NewNomad()
			a, b, nb := world()
			n.SetAlloc(a)
			n.SetAlloc(b)
			n.SetNode(nb)
			if tc.setup != nil {
				tc.setup(n)
			}
			err := (&transfer.NomadAuthorizer{Nomad: n, Self: self}).Authorize(t.Context(), tc.req, peer)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want an error saying %q", err, tc.wantErr)
			}
			if errors.Is(err, transfer.ErrRefused) != tc.wantRefused {
				t.Fatalf("refused = %v, want %v (%v)", errors.Is(err, transfer.ErrRefused), tc.wantRefused, err)
			}
		})
	}
}

func TestNomadLocator(t *testing.T) {
	nodeOf := func(port int, addr string, addrs ...string) transfer.Node {
		n := transfer.Node{ID: nodeA, Name: "a", TransferPort: port}
		if addr != "" {
			n.TransferAddr = netip.MustParseAddr(addr)
		}
		for _, s := range addrs {
			n.Addresses = append(n.Addresses, netip.MustParseAddr(s))
		}
		return n
	}
	cases := []struct {
		name    string
		node    *transfer.Node
		alloc   string
		want    string
		wantErr error
	}{
		{name: "the published address", node: ptr(nodeOf(4680, "10.0.0.9", "10.0.0.1")), alloc: allocA, want: "10.0.0.9:4680"},
		{name: "the node's first address", node: ptr(nodeOf(4680, "", "10.0.0.1", "10.0.0.5")), alloc: allocA, want: "10.0.0.1:4680"},
		{name: "no port published", node: ptr(nodeOf(0, "", "10.0.0.1")), alloc: allocA, wantErr: transfer.ErrNoPeer},
		{name: "no address", node: ptr(nodeOf(4680, "")), alloc: allocA, wantErr: transfer.ErrNoPeer},
		{name: "node gone", alloc: allocA, wantErr: transfer.ErrNoPeer},
		{name: "allocation gone", node: ptr(nodeOf(4680, "", "10.0.0.1")), alloc: allocC, wantErr: transfer.ErrNoPeer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := transfertest.NewNomad()
			a, _, _ := world()
			n.SetAlloc(a)
			if tc.node != nil {
				n.SetNode(*tc.node)
			}
			got, err := transfer.NomadLocator{Nomad: n}.Locate(t.Context(), tc.alloc)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got %v, %v; want %v", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got.String() != tc.want {
				t.Fatalf("got %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
