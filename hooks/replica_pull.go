package hooks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The replica node's side (issue 30, docs/node-loss.md): a loop under the
// Manager's context that, each round, finds the running allocations of
// other nodes holding slots of this node's classes that keep replicas and
// for which it is chosen (model.ReplicaTargets), decides each replica's
// fate (model.ReplicaWork), and pulls each due replica's increment, or
// drops it, on the driver (model.DecideReplicaPullMove), under the
// replica's lock. What to do is the model's; this file only acts.

// Cluster is what a replica node reads of Nomad beyond its own node.
// *allocwatch.Watcher is the real one; nil: this node keeps no replicas.
type Cluster interface {
	// Nodes is every node the servers know (nomadapi.Nodes).
	Nodes(ctx context.Context) ([]nomadapi.NodeStub, error)
	// NodeAllocations are the allocations Nomad places on node, converted.
	NodeAllocations(ctx context.Context, node string) ([]model.Alloc, error)
	// Loss is what the servers say of an allocation's loss
	// (allocwatch.LostAlloc): B's Reserve decides a takeover from it.
	Loss(ctx context.Context, id string) (model.LostAlloc, error)
}

// replicas is the loop's memory between rounds: what failed, and when it
// is tried again; what was refused for good.
type replicas struct {
	mu       sync.Mutex
	failures map[string]int
	retryAt  map[string]time.Time
	refused  map[string]bool
	wg       sync.WaitGroup
}

// replicaRoundMin bounds the pause between rounds from below: a round is
// due when the first replica is, but never more often than this (a busy
// holder), nor rarer than the shortest `every` (longestRound).
const replicaRoundMin = time.Second

// keepsReplicas reports whether this Manager runs the replica loop: a
// class keeps replicas, and there is a transport and a view of the
// cluster.
func (m *Manager) keepsReplicas() bool {
	if m.cluster == nil || m.fetcher == nil || m.allocs == nil {
		return false
	}
	for _, c := range m.cfg.Classes {
		if c.Replicate.Enabled() {
			return true
		}
	}
	return false
}

// startReplicas starts the loop on its own goroutine, under ctx (Run's).
func (m *Manager) startReplicas(ctx context.Context) {
	if !m.keepsReplicas() {
		return
	}
	m.replicas.wg.Add(1)
	go func() {
		defer m.replicas.wg.Done()
		m.runReplicas(ctx)
	}()
}

// runReplicas runs rounds until ctx ends.
func (m *Manager) runReplicas(ctx context.Context) {
	for {
		wait, err := m.replicaRound(ctx)
		if err != nil && ctx.Err() == nil {
			m.logger.Warn("replicas: cannot look at the cluster; next round", "error", err)
		}
		if err := m.sleep(ctx, wait); err != nil {
			return
		}
	}
}

// longestRound is the shortest `every` of the classes that keep replicas:
// targets appear and go between rounds, so a round comes at least that
// often.
func (m *Manager) longestRound() time.Duration {
	d := time.Duration(0)
	for _, c := range m.cfg.Classes {
		if c.Replicate.Enabled() && (d == 0 || c.Replicate.Every < d) {
			d = c.Replicate.Every
		}
	}
	return max(d, replicaRoundMin)
}

// replicaRound is one round: it reads the cluster and this node's
// replicas, decides, and pulls or drops each due replica in turn. It
// returns the pause before the next round.
func (m *Manager) replicaRound(ctx context.Context) (time.Duration, error) {
	longest := m.longestRound()
	self, err := m.NodeID(ctx)
	if err != nil {
		// The watcher has not answered yet: it will within seconds.
		return min(longest, 5*replicaRoundMin), nil
	}
	stubs, err := m.cluster.Nodes(ctx)
	if err != nil {
		return longest, fmt.Errorf("listing the nodes: %w", err)
	}
	nodes := map[string][]model.ReplicaNode{}
	offered := map[string]bool{}
	for _, c := range m.cfg.Classes {
		if !c.Replicate.Enabled() {
			continue
		}
		nodes[c.Name] = allocwatch.ReplicaNodes(stubs, c.Name, c.Replicate.Spread)
		for _, n := range nodes[c.Name] {
			if n.Ready && n.Offers && n.ID != self {
				offered[n.ID] = true
			}
		}
	}
	var allocs []model.Alloc
	for _, s := range stubs { // in the list's order
		if !offered[s.ID] {
			continue
		}
		as, err := m.cluster.NodeAllocations(ctx, s.ID)
		if err != nil {
			return longest, fmt.Errorf("listing node %s's allocations: %w", s.ID, err)
		}
		allocs = append(allocs, as...)
	}
	targets := model.ReplicaTargets(m.cfg, self, allocs, nodes)
	held, sources, err := m.heldReplicas(ctx, targets, allocs)
	if err != nil {
		return longest, err
	}
	now := m.now()
	acts := model.ReplicaWork(model.ReplicaRound{Config: m.cfg, Targets: targets, Held: held, Sources: sources, Now: now})
	wait := longest
	for _, a := range acts {
		due := m.replicaDue(a, now)
		if due.IsZero() {
			continue
		}
		if due.After(now) {
			wait = min(wait, due.Sub(now))
			continue
		}
		m.actOnReplica(ctx, a, longest)
		if ctx.Err() != nil {
			return wait, nil
		}
		if at := m.replicaRetryAt(a.Name); !at.IsZero() {
			wait = min(wait, max(at.Sub(m.now()), 0))
		}
	}
	return max(wait, replicaRoundMin), nil
}

// heldReplicas reads this node's replicas of every class that keeps
// them, and looks up the allocations of those no target names (in the
// nodes' lists first, then the servers). A replica whose allocation
// cannot be looked up now is left out of the round: an unknown answer is
// never read as "gone".
func (m *Manager) heldReplicas(ctx context.Context, targets []model.ReplicaTarget, allocs []model.Alloc) ([]model.Replica, map[string]model.Alloc, error) {
	targeted := map[string]bool{}
	for _, t := range targets {
		targeted[t.Name] = true
	}
	listed := map[string]model.Alloc{}
	for _, a := range allocs {
		listed[a.ID] = a
	}
	var held []model.Replica
	sources := map[string]model.Alloc{}
	for _, c := range m.cfg.Classes {
		if !c.Replicate.Enabled() {
			continue
		}
		ds := m.cfg.ClassDataset(c.Name)
		rows, err := m.zfs.List(ctx, ds, model.UserProps)
		if errors.Is(err, zfs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("listing %s's replicas: %w", ds, err)
		}
		for _, r := range model.ReplicasIn(ds, rows) {
			if targeted[r.Dataset] {
				held = append(held, r)
				continue
			}
			if a, ok := listed[r.Source]; ok {
				sources[r.Source] = a
				held = append(held, r)
				continue
			}
			a, found, err := m.allocs.Lookup(ctx, r.Source)
			if err != nil {
				m.logger.Warn("replicas: cannot look up a replica's allocation; kept as it is", "replica", r.Dataset,
					"alloc_id", r.Source, "error", err)
				continue
			}
			if found {
				sources[r.Source] = a
			}
			held = append(held, r)
		}
	}
	return held, sources, nil
}

// replicaDue is when act is to be carried out: a pull when due and past
// its retry time, a drop at once; zero for nothing (kept, or refused).
func (m *Manager) replicaDue(a model.ReplicaAct, now time.Time) time.Time {
	m.replicas.mu.Lock()
	defer m.replicas.mu.Unlock()
	if m.replicas.refused[a.Name] {
		return time.Time{}
	}
	switch a.Fate {
	case model.ReplicaDrop:
		return now
	case model.ReplicaPull:
		due := a.At
		if r := m.replicas.retryAt[a.Name]; r.After(due) {
			due = r
		}
		if due.IsZero() {
			due = now
		}
		return due
	}
	return time.Time{}
}

func (m *Manager) replicaRetryAt(name string) time.Time {
	m.replicas.mu.Lock()
	defer m.replicas.mu.Unlock()
	return m.replicas.retryAt[name]
}

// actOnReplica pulls a's increment, or drops it, on the driver under its
// lock, and keeps what came of it for the next rounds: a failure is
// tried again after a pause that grows with the failures in a row (at
// most longest), a refusal never while the Manager runs.
func (m *Manager) actOnReplica(ctx context.Context, a model.ReplicaAct, longest time.Duration) {
	log := m.logger.With("replica", a.Name, "alloc_id", a.Target.Source.ID, "slot", a.Target.Slot)
	loop := model.ReplicaPullLoop{Target: a.Target, Class: m.cfg.Class(a.Target.Class), Drop: a.Fate == model.ReplicaDrop}
	mv, err := m.drive(ctx, driveLoop{hold: m.locks.get(a.Name), decide: func(_ model.Since, last model.Result) model.Move {
		loop = loop.After(last)
		loop.Now = m.now()
		return model.DecideReplicaPullMove(loop)
	}})
	m.replicas.mu.Lock()
	defer m.replicas.mu.Unlock()
	if m.replicas.failures == nil {
		m.replicas.failures, m.replicas.retryAt, m.replicas.refused = map[string]int{}, map[string]time.Time{}, map[string]bool{}
	}
	switch {
	case err != nil:
		log.Debug("the replica's round ended", "error", err) // its context ended
	case mv.Kind == model.MoveFail && mv.Refused:
		log.Error("refused the replica; not pulled again while the plugin runs", "reason", mv.Reason)
		m.replicas.refused[a.Name] = true
	case mv.Kind == model.MoveFail:
		n := m.replicas.failures[a.Name] + 1
		m.replicas.failures[a.Name] = n
		m.replicas.retryAt[a.Name] = m.now().Add(model.RetryWait(n, longest))
		if errors.Is(mv.Err, model.ErrPeerBusy) {
			log.Debug("the holder's node is busy; asking again shortly", "error", mv.Err)
		} else {
			log.Warn("pulling the replica failed; trying again", "attempt", n, "error", mv.Err)
		}
	default:
		delete(m.replicas.failures, a.Name)
		delete(m.replicas.retryAt, a.Name)
		if loop.Drop {
			log.Info("dropped the replica", "reason", a.Why)
			delete(m.replicas.refused, a.Name)
		} else {
			log.Debug("pulled the replica's increment")
		}
	}
}

// waitReplicas waits for the loop to stop (Run's end).
func (m *Manager) waitReplicas() { m.replicas.wg.Wait() }
