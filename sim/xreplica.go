package sim

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/hashicorp/go-msgpack/codec"
	"github.com/hashicorp/nomad/nomad/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// Replicas (issue 30, docs/node-loss.md) in the two-node world: in a
// third of the worlds pg keeps one replica of each held slot on another
// node, and a third node exists, so that the node a replica is kept on
// need not be the replacement's. Each plugin runs the replica loop of its
// Manager (hooks.Steps.Replicas) on a lock-step goroutine of its own, as
// a pull's (xpull.go): it takes its turn at the pulls' events, and its
// pause between rounds is the world's sleep. Its pulls cross the world's
// wire (xlink.go), so the transport's faults (cuts, a sender's death,
// stalls, lies, hostile streams, the link down) meet them as they meet a
// migration's. The checks XR1-XR6 are in xrcheck.go, the takeover and
// XR7-XR8 in xtakeover.go.

// xReplicaEvery is pg's `every` in a world that keeps replicas.
const xReplicaEvery = 30 * time.Second

// replicaWorld reports whether seed's world keeps replicas: a draw of its
// own, so that the world's other draws are as they were, and none of the
// regressions' seeds (TestTwoNodeRegressions) is one.
func replicaWorld(seed uint64) bool {
	return rand.New(rand.NewPCG(seed, 0x3e9203)).IntN(3) == 0
}

// replicaCopies is pg's copies in seed's world that keeps replicas: two
// in a third of them (both other nodes keep one, so that a replacement
// may find an older one here and a newer one there: NewestCopy), else
// one; a draw of its own, one for the regressions' seeds.
func replicaCopies(seed uint64) int {
	if rand.New(rand.NewPCG(seed, 0xc0b1e9)).IntN(3) == 0 {
		return 2
	}
	return 1
}

// xcluster is what a node's replica loop reads of the servers beyond its
// own node (hooks.Cluster): the node list and any node's allocations;
// cut off from the servers, nothing.
type xcluster struct{ n *xnode }

var _ hooks.Cluster = xcluster{}

func (x xcluster) Nodes(ctx context.Context) ([]nomadapi.NodeStub, error) {
	return xnomad(x).Nodes(ctx)
}

func (x xcluster) NodeAllocations(_ context.Context, node string) ([]model.Alloc, error) {
	if !x.n.connected {
		return nil, errNoServers
	}
	var out []model.Alloc
	for _, sa := range x.n.w.cluster.Allocs(node) {
		out = append(out, x.n.w.toModel(sa))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Loss is what the servers say of an allocation's loss, read by the
// plugin's own code (nomadapi.DecodeLoss, allocwatch.LostAlloc) from the
// agent's JSON of it (its client status, the first time its
// AllocStates say lost, whether it was ever unknown, its group's
// disconnect settings and delays, its place in its job): B's Reserve
// pairs itself with it (model.LostPredecessor) and decides a takeover from
// it (model.DecideTakeover). As Nomad 1.6.2's servers store an
// allocation lost with its node down, its answer records no time of loss
// (no AllocStates: the plan that stopped it was normalized,
// model.LostAlloc.LostSince) and its ModifyTime is when the servers last
// changed it, by their clock (off by skew).
func (x xcluster) Loss(_ context.Context, id string) (model.LostAlloc, error) {
	if !x.n.connected {
		return model.LostAlloc{}, errNoServers
	}
	sa := x.n.w.cluster.Alloc(id)
	if sa == nil {
		return model.LostAlloc{}, fmt.Errorf("allocation %s is unknown to the servers", id)
	}
	// The agent's answer, read as the plugin reads it.
	var buf bytes.Buffer
	if err := codec.NewEncoder(&buf, structs.JsonHandleWithExtensions).Encode(sa); err != nil {
		return model.LostAlloc{}, err
	}
	loss, err := nomadapi.DecodeLoss(buf.Bytes())
	if err != nil {
		return model.LostAlloc{}, err
	}
	l := allocwatch.LostAlloc(loss)
	// The harness's own AllocStates are by the wall clock
	// (scheduler.Cluster.LostSince), and 1.6.2 would have kept none.
	l.LostAt, l.ModifiedAt = time.Time{}, time.Time{}
	if m, ok := x.n.w.modified[sa.ID]; ok {
		l.ModifiedAt = m.at.Add(x.n.w.tk.skew)
	}
	return l, nil
}

// startLoop starts the plugin's replica loop, in lock step: it begins at
// the next pulls' event.
func (p *xplugin) startLoop() {
	if !p.n.w.replicas {
		return
	}
	steps := hooks.StepsOf(p.mgr)
	x := &xpull{p: p, start: make(chan struct{}), parks: make(chan *xpark), done: make(chan struct{})}
	p.loop = x
	go func() {
		defer close(x.done)
		<-x.start
		steps.Replicas(p.ctx)
	}()
}

// runLoop gives the replica loop its turns while it is due.
func (n *xnode) runLoop() {
	p := n.p
	if p == nil || p.loop == nil {
		return
	}
	for turns := 0; p.loop.due(n.w.now) && !n.w.broken; turns++ {
		if turns == maxPullTurns {
			n.w.violate("liveness", "the replica loop of %s took %d turns without time passing", n.name, maxPullTurns)
			n.w.broken = true
			return
		}
		n.w.takeTurn(p.loop)
		if p.run.dead || n.p != p {
			return
		}
	}
}

// xmodified is when an allocation was last changed on the servers (its
// ModifyTime, which the servers stamp with their clock: here the world's):
// the first time the world saw its ModifyIndex.
type xmodified struct {
	index uint64
	at    time.Time
}

// noteModified records the allocations changed since the last event (at
// every event, before its checks and the next reads).
func (w *XWorld) noteModified() {
	if !w.replicas {
		return // only the replica loop reads ModifyTime (DecideReplica)
	}
	if w.modified == nil {
		w.modified = map[string]xmodified{}
	}
	for _, n := range append(slices.Clone(w.nodes), w.lost...) {
		for _, sa := range w.cluster.Allocs(n.id) {
			if m, ok := w.modified[sa.ID]; !ok || m.index != sa.ModifyIndex {
				w.modified[sa.ID] = xmodified{index: sa.ModifyIndex, at: w.now}
			}
		}
	}
}
