package hooks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The sending side of a migration (model/migrate.go): a peer plugin, on
// the node where Nomad placed allocation A's replacement, asks for A's
// data; the transport has checked with this node's Nomad that it may
// (package transfer). What to send is decided here, from the data as it
// is under its lock.

// Sender is the Manager as the transport's Source: what this node sends
// for a peer's request.
type Sender struct{ m *Manager }

// Sender returns the Manager's Source for a transfer.Server.
func (m *Manager) Sender() *Sender { return &Sender{m: m} }

var _ transfer.Source = (*Sender)(nil)

// SendSpec decides the send for req (Manager.prepareSend). A resume token
// is decoded by this node's zfs, never read as the peer says.
func (s *Sender) SendSpec(ctx context.Context, req transfer.Request) (transfer.SendSpec, error) {
	var resume *model.Resume
	if req.ResumeToken != "" {
		t, err := s.m.zfs.DecodeResumeToken(ctx, req.ResumeToken)
		if err != nil {
			return transfer.SendSpec{}, fmt.Errorf("decoding the resume token: %w", err)
		}
		resume = &model.Resume{ToGUID: t.ToGUID, FromGUID: t.FromGUID}
	}
	p, err := s.m.prepareSend(ctx, sendRequest{Alloc: req.Alloc, Slot: req.Slot, Replacement: req.Replacement,
		HaveGUID: req.HaveGUID, Resume: resume})
	if err != nil {
		return transfer.SendSpec{}, err
	}
	if p.Complete {
		return transfer.SendSpec{Complete: true}, nil
	}
	return transfer.SendSpec{
		Send: zfs.SendOptions{Snapshot: p.Snapshot, From: p.From, Raw: p.Encrypted,
			Compressed: !p.Encrypted, LargeBlocks: true, Embedded: !p.Encrypted},
		ToGUID: p.ToGUID, FromGUID: p.FromGUID, Encrypted: p.Encrypted,
	}, nil
}

// sendRequest is a peer's request for the data allocation Alloc had in its
// slot Slot of this node, for its replacement.
type sendRequest struct {
	Alloc, Slot, Replacement string
	// HaveGUID is the guid of the newest snapshot of it the peer holds.
	HaveGUID uint64
	// Resume is what the peer's resume token names, decoded by this
	// node's zfs; nil for none.
	Resume *model.Resume
}

// sendSpec is what the transport streams for a request, as this node
// names it; Sender.SendSpec makes it the transport's.
type sendSpec struct {
	// Complete: the peer holds the final copy; nothing to send.
	Complete bool
	// Snapshot is sent, incremental from From when From is set.
	Snapshot, From   string
	ToGUID, FromGUID uint64
	// Encrypted: sent raw, so the key never travels.
	Encrypted bool
}

// prepareSend decides what this node sends for req (model.DecideSend),
// after taking the snapshot it names (under the plugin's hold). A's data is in
// its slot while A may still write it (a pre-copy), or parked once A has
// ended (the final copy). A peer that names the final snapshot holds the
// whole copy: that is recorded on the data (model.PlanMigrated), and the
// next pass gives it to the class's policy.
func (m *Manager) prepareSend(ctx context.Context, req sendRequest) (sendSpec, error) {
	class, ok := m.cfg.ClassOf(req.Slot)
	if c := m.cfg.Class(class); !ok || !c.Sticky || !c.Migrate.Enabled {
		return sendSpec{}, fmt.Errorf("%w: slot %q is not of a class whose data migrates", transfer.ErrNoData, req.Slot)
	}
	dataset, final, unlock, err := m.lockData(ctx, class, req)
	if err != nil {
		return sendSpec{}, err
	}
	defer unlock()
	rows, err := m.zfs.List(ctx, dataset, model.UserProps)
	if err != nil {
		return sendSpec{}, err
	}
	in := model.SendInput{Dataset: dataset, Rows: rows, Final: final, HaveGUID: req.HaveGUID, Token: req.Resume}
	d, err := model.DecideSend(in)
	if errors.Is(err, model.ErrMigrated) {
		return sendSpec{}, fmt.Errorf("%w: %w", transfer.ErrNoData, err)
	}
	if err != nil {
		return sendSpec{}, err
	}
	if len(d.Drop) > 0 {
		if err := m.run(ctx, model.PlanDropSnapshots(d.Drop)); err != nil {
			m.logger.Warn("cannot drop a migration's old snapshots; next request", "dataset", dataset, "error", err)
		}
	}
	if d.Complete {
		if strings.HasSuffix(d.Snapshot, "@"+model.MigrateFinal) {
			if err := m.run(ctx, model.PlanMigrated(dataset)); err != nil {
				return sendSpec{}, err
			}
			m.trigger() // the original may go by its policy now
		}
		return sendSpec{Complete: true}, nil
	}
	if d.Take != "" {
		if err := m.run(ctx, model.PlanTakeSnapshot(d.Take)); err != nil {
			return sendSpec{}, err
		}
		if rows, err = m.zfs.List(ctx, dataset, model.UserProps); err != nil {
			return sendSpec{}, err
		}
	}
	spec := sendSpec{Snapshot: d.Snapshot, From: d.From, FromGUID: d.FromGUID}
	for _, r := range rows {
		switch r.Name {
		case dataset:
			spec.Encrypted = r.Encryption != "" && r.Encryption != "off"
		case d.Snapshot:
			if spec.ToGUID, err = strconv.ParseUint(r.GUID, 10, 64); err != nil {
				return sendSpec{}, fmt.Errorf("snapshot %s: guid %q: %w", r.Name, r.GUID, err)
			}
		}
	}
	if spec.ToGUID == 0 {
		return sendSpec{}, fmt.Errorf("%s is not there after it was taken", d.Snapshot)
	}
	m.logger.Info("sending a copy to the replacement's node", "alloc_id", req.Alloc, "replacement_id", req.Replacement,
		"slot", req.Slot, "snapshot", spec.Snapshot, "from", spec.From, "final", final)
	return spec, nil
}

// lockData finds where allocation req.Alloc's data of slot req.Slot is and
// takes its lock: parked (the holder ended: final), or still in the slot
// the allocation holds. The slot's lock is taken as a pass's step and a
// Reserve take it, so no release renames or destroys the data while a
// snapshot is taken.
func (m *Manager) lockData(ctx context.Context, class string, req sendRequest) (dataset string, final bool, unlock func(), err error) {
	parked := m.cfg.ParkedName(class, req.Alloc, req.Slot)
	lock := m.locks.get(parked)
	lock.Lock()
	p, err := m.readParked(ctx, parked)
	switch {
	case err != nil:
		lock.Unlock()
		return "", false, nil, err
	case p != nil && p.Holder == req.Alloc && p.State == model.StateParked && p.Outcome != model.OutcomeMigrated:
		return parked, true, lock.Unlock, nil
	}
	lock.Unlock()
	lock = m.locks.get(req.Slot)
	if !lock.TryLock() {
		// A Reserve fences it, or a pass releases it: its data may be
		// moving. The peer asks again.
		return "", false, nil, fmt.Errorf("%w: slot %s is busy", transfer.ErrPeerBusy, req.Slot)
	}
	s, err := m.reread(ctx, class, m.cfg.SlotDataset(class, req.Slot))
	switch {
	case err != nil:
		lock.Unlock()
		return "", false, nil, err
	case !s.Exists || s.Holder != req.Alloc || (s.State != model.StateHeld && s.State != model.StateReleasing):
		lock.Unlock()
		return "", false, nil, fmt.Errorf("%w: %s holds no data of allocation %s (state %s, holder %q), nor is it parked",
			transfer.ErrNoData, req.Slot, req.Alloc, s.State, s.Holder)
	}
	return s.Dataset, false, lock.Unlock, nil
}
