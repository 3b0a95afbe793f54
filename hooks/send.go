package hooks

import (
	"context"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
)

// The sending side of a migration (model/send_move.go): a peer plugin, on
// the node where Nomad placed allocation A's replacement, asks for A's
// data; the transport has checked with this node's Nomad that it may
// (package transfer). What to send is decided by model.DecideSendMove,
// from the data as it is under its lock, on the driver.

// Sender is the Manager as the transport's Source: what this node sends
// for a peer's request.
type Sender struct{ m *Manager }

// Sender returns the Manager's Source for a transfer.Server.
func (m *Manager) Sender() *Sender { return &Sender{m: m} }

var _ transfer.Source = (*Sender)(nil)

// Send decides and prepares the send for req (model.DecideSendMove): A's
// data is in its slot while A may still write it (a pre-copy), or parked
// once A has ended (the final copy). The snapshot it names is taken, under
// the plugin's hold, before it returns; a resume token is decoded by this
// node's zfs, never read as the peer says. A peer that names the final
// snapshot holds the whole copy: that is recorded on the data, and the
// next pass gives it to the class's policy.
func (s *Sender) Send(ctx context.Context, req model.SendRequest) (model.Send, error) {
	m := s.m
	class, ok := m.cfg.ClassOf(req.Slot)
	c := m.cfg.Class(class)
	loop := model.SendLoop{Req: req, Class: class, Migrates: ok && c.Sticky && c.Migrate.Enabled,
		ParkedName: m.cfg.ParkedName(class, req.Alloc, req.Slot), SlotDataset: m.cfg.SlotDataset(class, req.Slot)}
	mv, err := m.drive(ctx, driveLoop{decide: func(_ model.Since, last model.Result) model.Move {
		loop = loop.After(last)
		return model.DecideSendMove(loop)
	}})
	switch {
	case err != nil:
		return model.Send{}, err
	case mv.Kind == model.MoveFail:
		return model.Send{}, mv.Err
	}
	if mv.Wake {
		m.trigger() // the original may go by its policy now
	}
	if d := mv.Send; !d.Complete {
		m.logger.Info("sending a copy to the replacement's node", "alloc_id", req.Alloc, "replacement_id", req.Replacement,
			"slot", req.Slot, "snapshot", d.Options.Snapshot, "from", d.Options.From, "final", d.Final)
	}
	return *mv.Send, nil
}

// decodeToken decodes a peer's resume token with this node's zfs.
func (m *Manager) decodeToken(ctx context.Context, token string) (*model.Resume, error) {
	t, err := m.zfs.DecodeResumeToken(ctx, token)
	if err != nil {
		return nil, err
	}
	return &model.Resume{ToGUID: t.ToGUID, FromGUID: t.FromGUID}, nil
}
