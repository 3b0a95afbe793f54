package hooks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The receiving side of a migration (model/migrate.go): for each copy the
// model says this node is to pull (model.Migrations), one goroutine pulls
// it from the node where the allocation it replaces ran, increment by
// increment, until that node says the copy is final; then the copy is
// parked data, which the replacement's Reserve claims as on one node.
// Everything it needs to resume is in ZFS: the copy's newest snapshot (the
// base of the next increment) and a partial receive's resume token.

// migrations are the pulls running, by the copy's name.
type migrations struct {
	mu      sync.Mutex
	running map[string]context.CancelFunc
	// refused are the copies refused whole (errCopyRefused), not pulled
	// again while the Manager runs.
	refused map[string]bool
	wg      sync.WaitGroup
	// spawn starts a pull (nil: on a goroutine of its own;
	// Simulation.Spawn).
	spawn func(fn func())
	// waiting are the pauses of the Reserves waiting for a copy
	// (takeReady), each cancelled with errCopyParked when a pull has
	// made its copy claimable (wake).
	waiting map[*int]context.CancelCauseFunc
}

// errCopyParked ends a waiting Reserve's pause early: a pull has made its
// copy claimable (migrations.wake).
var errCopyParked = errors.New("a copy from another node is claimable")

// pause is sleep(ctx, d), ended early, with nil, once a pull makes its copy
// claimable: a Reserve waiting for the predecessor's copy claims it then,
// not at its next look, up to d later (measured on a real cluster,
// docs/performance.md: the cutover's pickup). Any other end of the sleep
// is returned as it came.
func (p *migrations) pause(ctx context.Context, sleep func(context.Context, time.Duration) error, d time.Duration) error {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	key := new(int)
	p.mu.Lock()
	if p.waiting == nil {
		p.waiting = map[*int]context.CancelCauseFunc{}
	}
	p.waiting[key] = cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.waiting, key)
		p.mu.Unlock()
	}()
	err := sleep(wctx, d)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(wctx), errCopyParked) {
		return nil
	}
	return err
}

// wake ends every waiting Reserve's pause: a copy is claimable. Which
// Reserve it is for does not matter; each looks again, as after its pause.
func (p *migrations) wake() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cancel := range p.waiting {
		cancel(errCopyParked)
	}
}

// pullEvery paces the pre-copy increments while the allocation the copy is
// of still runs: each brings what it wrote since the last, so the final
// one, after it ends, is small.
const pullEvery = 10 * time.Second

// busyWait is the pause after a sending node said it is busy with the
// data (parking it as its allocation ended): a second or two.
const busyWait = time.Second

// pulled is what one pullOnce brought.
type pulled int

const (
	// pulledMore: an increment, or nothing; ask again after a pause.
	pulledMore pulled = iota
	// pulledFinal: the increment received is the final one: ask again at
	// once for the sender's "complete" (the replacement waits).
	pulledFinal
	// pulledDone: the copy is final and marked so, or the replacement
	// holds its slot already.
	pulledDone
)

// errCopyRefused is pullOnce's news that the copy cannot become a slot of
// its class: whole and larger than its limits (model.CopyOverLimits; it
// was dropped), or not one filesystem (model.CopyNotOneFilesystem; left
// for the operator). The pull ends for good.
var errCopyRefused = errors.New("the copy was refused")

// driveMigrations starts a pull for every copy the model wants pulled now
// and stops those it no longer wants; a pass calls it. The pulls run under
// ctx, the Run loop's.
func (m *Manager) driveMigrations(ctx context.Context) {
	if m.fetcher == nil || m.allocs == nil || !m.cfg.Migrates() {
		return
	}
	m.lookupPredecessors(ctx)
	migs, _ := model.Migrations(m.cfg, m.snapshot())
	m.pulls.mu.Lock()
	defer m.pulls.mu.Unlock()
	if m.pulls.running == nil {
		m.pulls.running = map[string]context.CancelFunc{}
	}
	wanted := map[string]bool{}
	for _, mg := range migs {
		wanted[mg.ParkedName] = true
		if _, ok := m.pulls.running[mg.ParkedName]; ok || m.pulls.refused[mg.ParkedName] {
			continue
		}
		pctx, cancel := context.WithCancel(ctx)
		m.pulls.running[mg.ParkedName] = cancel
		m.pulls.wg.Add(1)
		run := func() {
			defer m.pulls.wg.Done()
			m.pull(pctx, mg)
			m.pulls.mu.Lock()
			delete(m.pulls.running, mg.ParkedName)
			m.pulls.mu.Unlock()
			cancel()
		}
		if m.pulls.spawn != nil {
			m.pulls.spawn(run)
		} else {
			go run()
		}
	}
	for name, cancel := range m.pulls.running {
		if !wanted[name] {
			cancel()
		}
	}
}

// lookupPredecessors looks up the allocations of other nodes that this
// node's replace, in classes that migrate (model.Migrations' need): a pass
// plans with them in the snapshot (model.Snapshot.Others).
func (m *Manager) lookupPredecessors(ctx context.Context) {
	if m.allocs == nil || !m.cfg.Migrates() {
		return
	}
	_, need := model.Migrations(m.cfg, m.snapshot())
	for _, id := range need {
		if err := m.lookupRemote(ctx, id); err != nil {
			m.logger.Warn("cannot look up an allocation whose data is to come here; next pass", "alloc_id", id, "error", err)
		}
	}
}

// waitPulls waits for the pulls to stop (Run's end).
func (m *Manager) waitPulls() { m.pulls.wg.Wait() }

// pull brings one copy over: increments until the sending node says the
// copy is final, retrying failures with a growing pause.
func (m *Manager) pull(ctx context.Context, mg model.Migration) {
	log := m.logger.With("slot", mg.Slot, "alloc_id", mg.Previous.ID, "replacement_id", mg.Replacement.ID, "copy", mg.ParkedName)
	failures := 0
	if nothing, err := m.nothingToPull(ctx, mg); err == nil && nothing {
		return // claimable already, claimed or started empty; Nomad does not show it running yet
	}
	log.Info("pulling the data of the allocation this one replaces from its node", "node_id", mg.Node, "from_slot", mg.PrevSlot)
	for ctx.Err() == nil {
		got, err := m.pullOnce(ctx, mg)
		pause := pullEvery
		switch {
		case got == pulledDone:
			m.pulls.wake()
			m.trigger()
			return
		case errors.Is(err, errCopyRefused):
			log.Error("refused the copy of the data; the replacement starts as the class's migrate on_timeout says", "error", err)
			m.pulls.mu.Lock()
			if m.pulls.refused == nil {
				m.pulls.refused = map[string]bool{}
			}
			m.pulls.refused[mg.ParkedName] = true
			m.pulls.mu.Unlock()
			return
		case got == pulledFinal:
			failures, pause = 0, 0
		case errors.Is(err, transfer.ErrPeerBusy):
			// The sending node parks or releases the data under its lock
			// just now (A has ended): not a failure, a short wait.
			log.Debug("the sending node is busy with the data; asking again shortly", "error", err)
			pause = busyWait
		case err != nil && ctx.Err() == nil:
			failures++
			log.Warn("pulling the copy failed; trying again", "attempt", failures, "error", err)
			pause = retryWait(failures, time.Minute)
		default:
			failures = 0
		}
		if pause > 0 && m.sleep(ctx, pause) != nil {
			return
		}
	}
}

// refuseShape refuses copy name, as just listed (rows, volumes included),
// when it is not one filesystem (model.CopyNotOneFilesystem): a volume,
// marked as the plugin's by its receive, is dropped; datasets below a
// filesystem carry no mark of the plugin's and are left, with the copy,
// for the operator. nil when the copy is one filesystem.
func (m *Manager) refuseShape(ctx context.Context, name string, rows []zfs.Dataset) error {
	why, drop := model.CopyNotOneFilesystem(name, rows)
	if why == "" {
		return nil
	}
	if drop {
		if err := m.run(ctx, model.PlanDropCopy(name, rows)); err != nil {
			return fmt.Errorf("%s; dropping it: %w", why, err)
		}
	}
	return fmt.Errorf("%w: %s", errCopyRefused, why)
}

// nothingToPull reports, read under the copy's lock, whether mg needs no
// pull: its copy is claimable already (a pull marked it parked; the
// replacement's Reserve claims it from there), or the replacement holds
// its slot (model.Migration.Settled). A pass starts a pull for each
// migration until Nomad shows the replacement running; a pull that found
// the copy parked used to end as one that had just marked it, with a
// pass, which started the next such pull: on a real cluster three in 3 s,
// each with its zfs commands, beside the claim's (bench/cutover.sh).
func (m *Manager) nothingToPull(ctx context.Context, mg model.Migration) (bool, error) {
	lock := m.locks.get(mg.ParkedName)
	lock.Lock()
	defer lock.Unlock()
	rows, err := m.zfs.ListAll(ctx, mg.ParkedName, model.UserProps)
	if err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return false, err
	}
	if _, state := model.NewestCopied(mg.ParkedName, rows); state == model.StateParked {
		return true, nil
	}
	return m.readSettled(ctx, mg)
}

// readSettled reports whether mg's replacement holds its slot already
// (model.Migration.Settled); the caller holds the copy's lock.
func (m *Manager) readSettled(ctx context.Context, mg model.Migration) (bool, error) {
	s, err := readSlot(ctx, m.cfg, m.zfs, mg.Class, m.cfg.SlotDataset(mg.Class, mg.Slot), "")
	if err != nil {
		return false, err
	}
	return mg.Settled(s), nil
}

// pullOnce asks for the next increment of the copy and receives it; it
// reports what it brought.
func (m *Manager) pullOnce(ctx context.Context, mg model.Migration) (pulled, error) {
	lock := m.locks.get(mg.ParkedName)
	lock.Lock()
	defer lock.Unlock()
	rows, err := m.zfs.ListAll(ctx, mg.ParkedName, model.UserProps)
	if err != nil && !errors.Is(err, zfs.ErrNotExist) {
		return pulledMore, err
	}
	have, state := model.NewestCopied(mg.ParkedName, rows)
	if state == model.StateParked {
		return pulledDone, nil // final already (a pass before a restart marked it)
	}
	if len(rows) == 0 {
		// No copy: the replacement may have claimed it (under this lock)
		// or started empty.
		if settled, err := m.readSettled(ctx, mg); err != nil || settled {
			return doneIf(settled), err
		}
	}
	req := transfer.Request{Alloc: mg.Previous.ID, Replacement: mg.Replacement.ID, Slot: mg.PrevSlot, HaveGUID: have}
	if len(rows) > 0 {
		if req.ResumeToken, err = m.zfs.ResumeToken(ctx, mg.ParkedName); err != nil {
			return pulledMore, err
		}
	}
	now := m.now()
	c := m.cfg.Class(mg.Class)
	props := model.ReceiveProps(c, mg.ParkedName, mg.Previous.ID, now, now.Add(c.StickyWait))
	into := transfer.Into{Target: mg.ParkedName, Props: props, Exclude: model.ReceiveExclude(props)}
	res, err := m.fetcher.Fetch(ctx, req, into)
	switch {
	case err == nil && res.Complete && !model.HoldsFinal(mg.ParkedName, rows):
		// The sender names no snapshot: its "complete" is believed only
		// of a copy whose newest snapshot is the final one it sent.
		return pulledMore, fmt.Errorf("the sending node says %s is complete, but its newest snapshot is not the final one", mg.ParkedName)
	case err == nil && res.Complete:
		// Whole now; claimable once marked received, so checked first.
		if err := m.refuseShape(ctx, mg.ParkedName, rows); err != nil {
			return pulledMore, err
		}
		for _, r := range rows {
			if why := model.CopyOverLimits(c, r); r.Name == mg.ParkedName && why != "" {
				if derr := m.run(ctx, model.PlanDropCopy(mg.ParkedName, rows)); derr != nil {
					return pulledMore, fmt.Errorf("%s; dropping it: %w", why, derr)
				}
				return pulledMore, fmt.Errorf("%w: %s", errCopyRefused, why)
			}
		}
		return pulledDone, m.run(ctx, model.PlanReceived(mg.ParkedName, now, now.Add(c.StickyWait)))
	case err == nil:
		if rows, err = m.zfs.ListAll(ctx, mg.ParkedName, model.UserProps); err != nil {
			return pulledMore, err
		}
		if err := m.refuseShape(ctx, mg.ParkedName, rows); err != nil {
			return pulledMore, err
		}
		if older := model.OlderCopied(mg.ParkedName, rows); len(older) > 0 {
			if err := m.run(ctx, model.PlanDropSnapshots(older)); err != nil {
				return pulledMore, err
			}
		}
		if model.HoldsFinal(mg.ParkedName, rows) {
			return pulledFinal, nil
		}
		return pulledMore, nil
	case errors.Is(err, zfs.ErrWrongType):
		// A property the class sets (-o quota=...) does not apply to what
		// the stream holds: a volume's stream, refused before anything was
		// written. Every stream from that node is the same.
		return pulledMore, fmt.Errorf("%w: the sending node's stream is not of a filesystem (a volume?): %w", errCopyRefused, err)
	case errors.Is(err, transfer.ErrResumeRefused):
		// The sender will not resume it (its data moved on): drop the
		// partial receive; the next request starts from the last
		// complete snapshot.
		if aerr := m.run(ctx, model.PlanAbortReceive(mg.ParkedName)); aerr != nil {
			return pulledMore, aerr
		}
	case errors.Is(err, zfs.ErrDestinationModified), errors.Is(err, zfs.ErrIncrementalMismatch),
		errors.Is(err, transfer.ErrNotVerified):
		// The copy no longer lines up with what the sender has (its base
		// snapshot is gone there), or what came is not the snapshot the
		// sender named (another guid: not the data asked for): start over
		// with a whole copy, as it is now (the receive may have added a
		// snapshot since the listing above).
		current, lerr := m.zfs.ListAll(ctx, mg.ParkedName, model.UserProps)
		if lerr != nil {
			return pulledMore, lerr
		}
		if derr := m.run(ctx, model.PlanDropCopy(mg.ParkedName, current)); derr != nil {
			return pulledMore, derr
		}
	}
	return pulledMore, err
}

// doneIf is pulledDone when settled, else pulledMore.
func doneIf(settled bool) pulled {
	if settled {
		return pulledDone
	}
	return pulledMore
}
