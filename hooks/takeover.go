package hooks

import (
	"context"
	"errors"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
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
	name := m.cfg.ReplicaName(c.Name, prev.ID, prevID)
	rows, err := m.zfs.List(ctx, name, model.UserProps)
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

// lostPredecessor is the lost allocation caller replaces though Nomad
// names none (model.LostPredecessor), among those whose replicas of class
// c this node holds for caller's group (as the last scan listed them),
// each as the servers answer for it; "" for none. An answer that fails
// is no loss (logged, and asked again at the Reserve's next look).
func (m *Manager) lostPredecessor(ctx context.Context, c model.Class, caller model.Alloc) string {
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
	m.logger.Info("reserve: replaces a lost allocation Nomad does not name (stop_after_client_disconnect)", "alloc_id", caller.ID,
		"predecessor", l.ID, "name", caller.Name)
	return l.ID
}

// takeover runs a takeover's plan (model.PlanTakeReplica) on replica
// mv.Dataset under its lock (the replica loop's) and then the parked
// name's (a pass's release of parked data, a migration's pull into it).
// The caller holds the slot's lock.
func (m *Manager) takeover(ctx context.Context, mv model.Move) error {
	replica := m.locks.get(mv.Dataset)
	replica.Lock()
	defer replica.Unlock()
	parked := m.locks.get(mv.Parked.Dataset)
	parked.Lock()
	defer parked.Unlock()
	m.logger.Info("reserve: taking over a replica of the lost predecessor's data", "slot", mv.Slot.ID, "alloc_id", mv.Alloc.ID,
		"replica", mv.Dataset, "reason", mv.Reason)
	return m.run(ctx, *mv.Plan)
}
