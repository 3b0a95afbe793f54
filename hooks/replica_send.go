package hooks

import (
	"context"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// SendReplica decides and prepares the holder's answer to a replica pull
// of req.Alloc's slot (model.DecideReplicaSendMove), on the driver, under
// the slot's lock (only tried): the increment from the replica's newest
// snapshot, from its bookmark, to a new @replica-<n> taken (marked, under
// the plugin's hold) and bookmarked before it returns; the bases no pull
// needs any more dropped. A resume token is decoded by this node's zfs.
// The transport calls it for a replica's pull it has authorized
// (transfer.ReplicaSource); the replicate block is still refused in
// configuration.
func (s *Sender) SendReplica(ctx context.Context, req model.ReplicaSendRequest) (model.Send, error) {
	m := s.m
	class, ok := m.cfg.ClassOf(req.Slot)
	loop := model.ReplicaSendLoop{Req: req, Class: class, Replicates: ok && m.cfg.Class(class).Replicate.Enabled(),
		SlotDataset: m.cfg.SlotDataset(class, req.Slot)}
	mv, err := m.drive(ctx, driveLoop{decide: func(_ model.Since, last model.Result) model.Move {
		loop = loop.After(last)
		return model.DecideReplicaSendMove(loop)
	}})
	switch {
	case err != nil:
		return model.Send{}, err
	case mv.Kind == model.MoveFail:
		return model.Send{}, mv.Err
	}
	d := *mv.Send
	m.logger.Debug("sending a replica's increment", "alloc_id", req.Alloc, "slot", req.Slot, "snapshot", d.Options.Snapshot,
		"from", d.Options.From)
	return d, nil
}
