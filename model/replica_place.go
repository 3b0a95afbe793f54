package model

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"
)

// Where an allocation's replicas are kept (issue 30): a function of the
// allocation and Nomad's node list alone, so that the holder's plugin
// (which authorizes a replica's pull only from these nodes), each replica
// node's (which pulls when it finds itself among them) and the
// replacement's (which looks for a replica there when no node publishes
// one) compute the same set without talking to each other.
//
// Rendezvous hashing: each candidate node's score is a hash of the
// allocation ID and the node ID, and the copies go to the highest scores.
// A node joining or leaving moves only the replicas it wins or held, so a
// set rarely changes under a running allocation; every node agrees as soon
// as their node lists agree.

// ReplicaNode is one node of Nomad's node list (GET /v1/nodes, with its
// resources), as the choice of replica nodes reads it.
type ReplicaNode struct {
	ID string
	// Ready: Nomad's status "ready" and scheduling eligibility
	// "eligible". A down or draining node takes no replica.
	Ready bool
	// Offers: the node's plugin fingerprints the class's device group
	// (zfs/dataset/<class>) with a transfer block (its transfer_port
	// attribute), so it can receive and serve the class's data.
	Offers bool
	// Spread is the node's value of the class's spread attribute, e.g.
	// its datacenter for "${node.datacenter}"; "" when the class spreads
	// over nothing or the node has no such attribute.
	Spread string
}

// ReplicaNodes are the nodes that keep copies of allocation alloc's data
// while its holder runs on holderNode, in the order they were chosen: up to
// copies nodes that are Ready and Offer the class, never holderNode. The
// choice spreads over the Spread values when the cluster allows: each pick
// is the highest-scoring node whose value no earlier pick (and not the
// holder's node, when the list has it, whatever its status) has, and only
// when every value is taken the highest-scoring node left (a node without
// a value never counts as taken). Fewer than copies come back when fewer
// nodes qualify.
func ReplicaNodes(alloc, holderNode string, copies int, nodes []ReplicaNode) []string {
	type cand struct {
		ReplicaNode
		score uint64
	}
	var cands []cand
	used := map[string]bool{}
	for _, n := range nodes {
		if n.ID == holderNode {
			if n.Spread != "" {
				used[n.Spread] = true
			}
			continue
		}
		if n.Ready && n.Offers && n.ID != "" {
			cands = append(cands, cand{n, replicaScore(alloc, n.ID)})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	var out []string
	for len(out) < copies && len(cands) > 0 {
		pick := 0
		for i, c := range cands {
			if c.Spread == "" || !used[c.Spread] {
				pick = i
				break
			}
		}
		if c := cands[pick]; c.Spread != "" {
			used[c.Spread] = true
		}
		out = append(out, cands[pick].ID)
		cands = slices.Delete(cands, pick, pick+1)
	}
	return out
}

// replicaScore is node's rendezvous score for alloc: the first 8 bytes of
// SHA-256(alloc, 0, node). A cryptographic hash, so that Nomad's UUIDs,
// which differ in few characters, still score independently.
func replicaScore(alloc, node string) uint64 {
	h := sha256.Sum256([]byte(alloc + "\x00" + node))
	return binary.BigEndian.Uint64(h[:8])
}

// IsReplicaNode reports whether node is one of ReplicaNodes' choice: the
// check a holder's plugin makes before it serves a replica's pull.
func IsReplicaNode(node, alloc, holderNode string, copies int, nodes []ReplicaNode) bool {
	return slices.Contains(ReplicaNodes(alloc, holderNode, copies, nodes), node)
}
