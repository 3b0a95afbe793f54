package hooks

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The takeover in B's Reserve (issue 30, docs/node-loss.md): B replaces
// A, which ran on another node, in a class that keeps replicas, and no
// copy from A's node is here. The Reserve reads what the servers say of
// A's loss and this node's replica of A's slot (readTakeover);
// model.DecideInherit decides (claim, wait, or the class's on_timeout);
// a claim runs model.PlanTakeReplica (takeover), which makes the replica
// A's parked data, and the Reserve's next reading claims that as any
// parked data. Replicas on other nodes are not asked for yet: a Reserve
// whose newest replica is elsewhere waits, and says so.

// readTakeover reads what B's Reserve decides a takeover of a replica of
// prev's slot prevID from: the servers' answer about prev's loss (one
// request, GET /v1/allocation/<id>) and this node's replica of that slot
// (one zfs list of it). Either failing decides no takeover: the Reserve
// waits for a copy as before, and the next reading asks again; an
// unknown answer is never read as "lost".
func (m *Manager) readTakeover(ctx context.Context, c model.Class, prev model.Alloc, prevID string) *model.TakeoverInput {
	log := m.logger.With("alloc_id", prev.ID, "slot", prevID)
	loss, err := m.cluster.Loss(ctx, prev.ID)
	if err != nil {
		log.Warn("reserve: cannot read the predecessor's loss from Nomad; no takeover of a replica this time", "error", err)
		return nil
	}
	tk := &model.TakeoverInput{Loss: loss, Now: m.now()}
	unsure, err := m.takeoverUnsure(ctx, c, prev, prevID)
	if err != nil {
		log.Warn("reserve: cannot read which nodes keep the predecessor's replica; no takeover this time", "error", err)
		return nil
	}
	tk.Unsure = unsure
	name := m.cfg.ReplicaName(c.Name, prev.ID, prevID)
	// With volumes and resume tokens (ListAll): a partial receive is
	// abandoned before the takeover (model.PlanTakeReplica).
	rows, err := m.zfs.ListAll(ctx, name, model.UserProps)
	switch {
	case errors.Is(err, zfs.ErrNotExist):
	case err != nil:
		log.Warn("reserve: cannot read this node's replica of the predecessor's data; no takeover this time", "replica", name, "error", err)
		return nil
	default:
		if r, ok := model.LocalReplica(m.cfg.ClassDataset(c.Name), name, rows); ok {
			tk.Copies = append(tk.Copies, r)
		}
	}
	return tk
}

// takeoverUnsure says why this node cannot tell its replica of prev's
// slot prevID is the newest there is ("" when it can): the class keeps
// more than one copy, or this node is not the one model.ReplicaNodes
// chooses for it over the node list now (a node chosen before keeps its
// copy, maybe newer). prev's own node never keeps one, so its loss moves
// no choice.
func (m *Manager) takeoverUnsure(ctx context.Context, c model.Class, prev model.Alloc, prevID string) (string, error) {
	if c.Replicate.Copies > 1 {
		return fmt.Sprintf("the class keeps %d copies, and no node is asked which replica it holds", c.Replicate.Copies), nil
	}
	stubs, err := m.cluster.Nodes(ctx)
	if err != nil {
		return "", err
	}
	self, err := m.NodeID(ctx)
	if err != nil {
		return "", err
	}
	chosen, _ := m.ReplicaNodes(transfer.Alloc{ID: prev.ID, NodeID: prev.NodeID, Namespace: prev.Namespace, JobID: prev.JobID,
		TaskGroup: prev.TaskGroup}, prevID, stubs)
	if !slices.Contains(chosen, self) {
		return "this node is no longer the one chosen for its replica: the one chosen may hold a newer one", nil
	}
	return "", nil
}

// lostPredecessor is the lost allocation caller replaces though Nomad
// names none (model.LostPredecessor), among those whose replicas of class
// c this node holds for caller's group (as the last scan listed them),
// each as the servers answer for it; "" for none. An answer that fails
// is no loss (logged, and asked again at the Reserve's next look).
func (m *Manager) lostPredecessor(ctx context.Context, c model.Class, slot string, caller model.Alloc) string {
	v, _ := m.View()
	if v == nil {
		return ""
	}
	group := model.ReplicaGroup(caller)
	var lost []model.LostAlloc
	seen := map[string]bool{}
	var reps []model.Replica
	for i := range v.Classes {
		if v.Classes[i].Class.Name == c.Name {
			reps = v.Classes[i].Replicas
		}
	}
	for _, r := range reps {
		if r.Group != group || r.Source == caller.ID || seen[r.Source] {
			continue
		}
		seen[r.Source] = true
		l, err := m.cluster.Loss(ctx, r.Source)
		if err != nil {
			m.logger.Warn("reserve: cannot read the loss of an allocation whose replica is here", "alloc_id", caller.ID,
				"replica_of", r.Source, "error", err)
			continue
		}
		lost = append(lost, l)
	}
	l, ok := model.LostPredecessor(caller, lost)
	if !ok {
		return ""
	}
	if model.PulledUnlinked(l) {
		// Its node is back and ended it: the migrations pull its final
		// data for caller (driveMigrations).
		m.unlinked.set(caller.ID, l.ID)
	}
	level := hclog.Debug
	if m.paired.note(slot, caller.ID, l.ID) {
		level = hclog.Info
	}
	m.logger.Log(level, "reserve: replaces a lost allocation Nomad does not name (stop_after_client_disconnect)", "alloc_id", caller.ID,
		"predecessor", l.ID, "name", caller.Name, "slot", slot)
	return l.ID
}

// pairings is, for each slot, the pairing of lostPredecessor a Reserve of
// it last logged (its caller and the lost allocation): a Reserve looks
// every few seconds until the takeover time, and says a pairing once.
// One entry per slot, replaced by the slot's next pairing.
type pairings struct {
	mu   sync.Mutex
	last map[string][2]string
}

// note records caller's pairing with lost on slot and reports whether it
// is new there.
func (p *pairings) note(slot, caller, lost string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	pair := [2]string{caller, lost}
	if p.last[slot] == pair {
		return false
	}
	if p.last == nil {
		p.last = map[string][2]string{}
	}
	p.last[slot] = pair
	return true
}

// links are the replacements this node's Reserves paired with an
// allocation Nomad does not link them to, once that allocation has ended
// on its node (model.PulledUnlinked): the replacement's ID → the
// predecessor's. The migrations pull by them (model.Linked), and the
// predecessor looked up is kept (forgetRemote). An entry goes once the
// watcher no longer lists its replacement.
type links struct {
	mu sync.Mutex
	of map[string]string
}

// set links replacement b to predecessor a.
func (l *links) set(b, a string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.of == nil {
		l.of = map[string]string{}
	}
	l.of[b] = a
}

// all is a copy of the links.
func (l *links) all() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.of)
}

// keepListed drops the links of replacements s does not list.
func (l *links) keepListed(s model.Snapshot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.of) == 0 {
		return
	}
	listed := make(map[string]bool, len(s.Allocs))
	for _, a := range s.Allocs {
		listed[a.ID] = true
	}
	for b := range l.of {
		if !listed[b] {
			delete(l.of, b)
		}
	}
}

// takeover runs a takeover's plan (model.PlanTakeReplica) on replica
// mv.Dataset under its lock (the replica loop's) and then the parked
// name's (a pass's release of parked data, a migration's pull into it).
// The caller holds the slot's lock. Each of the two is only tried: a
// replica round may hold the replica's through a fetch from the lost
// node, which ends when that stream times out; a Reserve blocked on it
// would wait unseen (seed 9799903: the simulation hung there). Busy, the
// step fails, and the Reserve looks again after a pause.
func (m *Manager) takeover(ctx context.Context, mv model.Move) error {
	replica := m.locks.get(mv.Dataset)
	if !replica.TryLock() {
		return fmt.Errorf("the replica %s is busy (a round pulls it): looking again", mv.Dataset)
	}
	defer replica.Unlock()
	parked := m.locks.get(mv.Parked.Dataset)
	if !parked.TryLock() {
		return fmt.Errorf("%s is busy (a pull into it, or its release): looking again", mv.Parked.Dataset)
	}
	defer parked.Unlock()
	m.logger.Info("reserve: taking over a replica of the lost predecessor's data", "slot", mv.Slot.ID, "alloc_id", mv.Alloc.ID,
		"replica", mv.Dataset, "reason", mv.Reason)
	return m.run(ctx, *mv.Plan)
}
