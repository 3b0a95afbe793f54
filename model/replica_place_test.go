package model_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// node is a ready node offering the class, in datacenter dc.
func node(id, dc string) model.ReplicaNode {
	return model.ReplicaNode{ID: id, Ready: true, Offers: true, Spread: dc}
}

func TestReplicaNodes(t *testing.T) {
	const alloc = "0b5e9d2c-6f7a-4c8e-9a1b-2c3d4e5f6a7b"
	// The scores of these five for alloc, highest first, are those of
	// order; the table's expectations are read from it, so a change of
	// the hash shows here first.
	five := []model.ReplicaNode{node("n1", ""), node("n2", ""), node("n3", ""), node("n4", ""), node("n5", "")}
	order := model.ReplicaNodes(alloc, "", 5, five)
	if len(order) != 5 {
		t.Fatalf("all five ranked: %v", order)
	}
	first, second := order[0], order[1]
	tests := []struct {
		name   string
		holder string
		copies int
		nodes  []model.ReplicaNode
		want   []string
	}{
		{name: "one copy: the highest score", holder: "h", copies: 1, nodes: five, want: []string{first}},
		{name: "two copies: the two highest", holder: "h", copies: 2, nodes: five, want: []string{first, second}},
		{name: "never the holder's node", holder: first, copies: 1, nodes: five, want: []string{second}},
		{name: "no copies asked: none", holder: "h", copies: 0, nodes: five},
		{name: "fewer nodes than copies: all there are", holder: "h", copies: 3, nodes: []model.ReplicaNode{node("n1", "")},
			want: []string{"n1"}},
		{name: "a node not ready (down, draining) is skipped", holder: "h", copies: 1,
			nodes: func() []model.ReplicaNode {
				ns := slices.Clone(five)
				for i := range ns {
					ns[i].Ready = ns[i].ID != first
				}
				return ns
			}(), want: []string{second}},
		{name: "a node without the class and a transfer block is skipped", holder: "h", copies: 1,
			nodes: func() []model.ReplicaNode {
				ns := slices.Clone(five)
				for i := range ns {
					ns[i].Offers = ns[i].ID != first
				}
				return ns
			}(), want: []string{second}},
		{name: "only the holder's node: none", holder: "n1", copies: 1, nodes: []model.ReplicaNode{node("n1", "")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := model.ReplicaNodes(alloc, tc.holder, tc.copies, tc.nodes)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReplicaNodesSpread(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name   string
		nodes  []model.ReplicaNode
		copies int
		// wantDCs are the datacenters the copies must land in, as a set.
		wantDCs []string
	}{
		{name: "one copy goes to another datacenter than the holder's",
			nodes:  []model.ReplicaNode{node("h", "dc1"), node("a", "dc1"), node("b", "dc1"), node("c", "dc2")},
			copies: 1, wantDCs: []string{"dc2"}},
		{name: "two copies go to two other datacenters",
			nodes: []model.ReplicaNode{node("h", "dc1"), node("a", "dc1"), node("b", "dc2"), node("c", "dc2"),
				node("d", "dc3"), node("e", "dc3")},
			copies: 2, wantDCs: []string{"dc2", "dc3"}},
		{name: "more copies than other datacenters: the rest by score",
			nodes:  []model.ReplicaNode{node("h", "dc1"), node("a", "dc1"), node("b", "dc2")},
			copies: 2, wantDCs: []string{"dc1", "dc2"}},
		{name: "one datacenter only: by score, as without spread",
			nodes:  []model.ReplicaNode{node("h", "dc1"), node("a", "dc1"), node("b", "dc1")},
			copies: 1, wantDCs: []string{"dc1"}},
		{name: "the holder's node down still counts its datacenter as taken",
			nodes: []model.ReplicaNode{{ID: "h", Spread: "dc1"}, node("a", "dc1"), node("b", "dc1"), node("c", "dc1"),
				node("d", "dc2")},
			copies: 1, wantDCs: []string{"dc2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dc := map[string]string{}
			for _, n := range tc.nodes {
				dc[n.ID] = n.Spread
			}
			// Whatever the allocation, the datacenters are the same.
			for range 200 {
				alloc := fmt.Sprintf("%08x-0000-4000-8000-%012x", r.Uint32(), r.Uint64()&(1<<48-1))
				got := model.ReplicaNodes(alloc, "h", tc.copies, tc.nodes)
				var dcs []string
				for _, id := range got {
					dcs = append(dcs, dc[id])
				}
				slices.Sort(dcs)
				if !slices.Equal(dcs, tc.wantDCs) {
					t.Fatalf("alloc %s: nodes %v in %v, want %v", alloc, got, dcs, tc.wantDCs)
				}
			}
		})
	}
}

// TestReplicaNodesAgree: the holder, a replica node and the replacement
// see the node list in different orders (and each node's own view); the
// set is the same.
func TestReplicaNodesAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	nodes := []model.ReplicaNode{node("n1", "dc1"), node("n2", "dc1"), node("n3", "dc2"), node("n4", "dc2"), node("n5", "dc3"),
		{ID: "n6", Ready: false, Offers: true, Spread: "dc3"}}
	for i := range 500 {
		alloc := fmt.Sprintf("alloc-%d", i)
		want := model.ReplicaNodes(alloc, "n1", 2, nodes)
		shuffled := slices.Clone(nodes)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := model.ReplicaNodes(alloc, "n1", 2, shuffled); !slices.Equal(got, want) {
			t.Fatalf("%s: %v in one order, %v in another", alloc, want, got)
		}
		for _, id := range want {
			if !model.IsReplicaNode(id, alloc, "n1", 2, shuffled) {
				t.Fatalf("%s: %s chosen but not authorized", alloc, id)
			}
		}
		if model.IsReplicaNode("n1", alloc, "n1", 2, shuffled) || model.IsReplicaNode("n6", alloc, "n1", 2, shuffled) {
			t.Fatalf("%s: the holder's node or a node not ready authorized", alloc)
		}
	}
}

// TestReplicaNodesChurn: rendezvous hashing moves only what a joining or
// leaving node wins or held. Without spread, a node joining changes at
// most one of the copies, and a node leaving that held none changes none.
func TestReplicaNodesChurn(t *testing.T) {
	var nodes []model.ReplicaNode
	for i := range 8 {
		nodes = append(nodes, node(fmt.Sprintf("n%d", i), ""))
	}
	joined := append(slices.Clone(nodes), node("n8", ""))
	moved := 0
	for i := range 1000 {
		alloc := fmt.Sprintf("alloc-%d", i)
		before := model.ReplicaNodes(alloc, "n0", 2, nodes)
		after := model.ReplicaNodes(alloc, "n0", 2, joined)
		changed := 0
		for _, id := range after {
			if !slices.Contains(before, id) {
				changed++
			}
		}
		if changed > 1 || (changed == 1 && !slices.Contains(after, "n8")) {
			t.Fatalf("%s: a node joining moved %d copies: %v → %v", alloc, changed, before, after)
		}
		moved += changed
		for _, leaving := range nodes[1:] {
			if slices.Contains(before, leaving.ID) {
				continue
			}
			left := slices.DeleteFunc(slices.Clone(nodes), func(n model.ReplicaNode) bool { return n.ID == leaving.ID })
			if got := model.ReplicaNodes(alloc, "n0", 2, left); !slices.Equal(got, before) {
				t.Fatalf("%s: %s, holding no copy, left and moved them: %v → %v", alloc, leaving.ID, before, got)
			}
		}
	}
	// n8 is one of 8 candidates and wins one of the two copies about 2/8
	// of the time.
	if moved < 150 || moved > 350 {
		t.Errorf("a ninth node took %d of 1000 allocations' copies, want about 250", moved)
	}
}

// TestReplicaNodesEven: the copies spread evenly over the nodes.
func TestReplicaNodesEven(t *testing.T) {
	nodes := []model.ReplicaNode{node("n1", ""), node("n2", ""), node("n3", ""), node("n4", ""), node("n5", "")}
	count := map[string]int{}
	for i := range 5000 {
		for _, id := range model.ReplicaNodes(fmt.Sprintf("%08x-1111-4222-8333-444455556666", i), "", 1, nodes) {
			count[id]++
		}
	}
	for _, n := range nodes {
		if c := count[n.ID]; c < 850 || c > 1150 {
			t.Errorf("%s holds %d of 5000 copies, want about 1000: %v", n.ID, c, count)
		}
	}
}
