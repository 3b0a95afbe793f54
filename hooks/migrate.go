package hooks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"

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
	// again while the Manager runs; marked, those a pull marked parked
	// (model.PullLoop.Marked), while their migration is wanted.
	refused map[string]bool
	marked  map[string]bool
	wg      sync.WaitGroup
	// spawn starts a pull (nil: on a goroutine of its own;
	// Simulation.Spawn).
	spawn func(fn func())
	// waiting are the pauses of the Reserves waiting for a copy
	// (takeReady), each cancelled with errCopyParked when a pull has
	// made its copy claimable (wake).
	waiting map[*int]context.CancelCauseFunc
	// napping are the pulls' pauses between two increments (nap), each
	// ended when a Reserve waits for a copy (kick).
	napping map[*int]context.CancelCauseFunc
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
	return p.pauseOn(&p.waiting, errCopyParked, ctx, sleep, d)
}

// pauseOn is sleep(ctx, d), registered in *set until it ends, and ended
// early, with nil, by a cancel with cause why.
func (p *migrations) pauseOn(set *map[*int]context.CancelCauseFunc, why error, ctx context.Context,
	sleep func(context.Context, time.Duration) error, d time.Duration) error {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	key := new(int)
	p.mu.Lock()
	if *set == nil {
		*set = map[*int]context.CancelCauseFunc{}
	}
	(*set)[key] = cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(*set, key)
		p.mu.Unlock()
	}()
	err := sleep(wctx, d)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(wctx), why) {
		return nil
	}
	return err
}

// errCopyAwaited ends a pull's pause between increments early: a Reserve
// waits for a copy (migrations.kick).
var errCopyAwaited = errors.New("a Reserve waits for a copy")

// nap is sleep(ctx, d), a pull's pause before its next increment
// (model.AwaitsIncrement), ended early, with nil, when a Reserve waits for
// a copy (kick; docs/performance.md: the cutover against its floor).
func (p *migrations) nap(ctx context.Context, sleep func(context.Context, time.Duration) error, d time.Duration) error {
	return p.pauseOn(&p.napping, errCopyAwaited, ctx, sleep, d)
}

// kick ends every pull's pause between increments: a Reserve waits for a
// copy. Which copy does not matter; each pull asks again, as after its
// pause.
func (p *migrations) kick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cancel := range p.napping {
		cancel(errCopyAwaited)
	}
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

// errCopyRefused is what a pull logs as it ends for good: the copy cannot
// become a slot of its class (model.DecidePullMove refuses it): whole and
// larger than its limits (model.CopyOverLimits; it was dropped), not one
// filesystem (model.CopyNotOneFilesystem; a volume's dropped, one with
// datasets below it left for the operator), or a stream not of a
// filesystem.
var errCopyRefused = errors.New("the copy was refused")

// driveMigrations starts a pull for every copy the model wants pulled now
// and stops those it no longer wants; a pass calls it. The pulls run under
// ctx, the Run loop's.
func (m *Manager) driveMigrations(ctx context.Context) {
	if m.fetcher == nil || m.allocs == nil || !m.cfg.Migrates() {
		return
	}
	m.lookupPredecessors(ctx)
	migs, _ := model.Migrations(m.cfg, m.linkedSnapshot())
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
	for name := range m.pulls.marked {
		if !wanted[name] {
			delete(m.pulls.marked, name)
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
	_, need := model.Migrations(m.cfg, m.linkedSnapshot())
	for _, id := range need {
		if err := m.lookupRemote(ctx, id); err != nil {
			m.logger.Warn("cannot look up an allocation whose data is to come here; next pass", "alloc_id", id, "error", err)
		}
	}
}

// linkedSnapshot is the snapshot with the links Nomad does not record
// that this node's Reserves found (model.Linked): the migrations pull an
// unlinked replacement's data as a linked one's.
func (m *Manager) linkedSnapshot() *model.Snapshot {
	return model.Linked(m.snapshot(), m.unlinked.all())
}

// waitPulls waits for the pulls to stop (Run's end).
func (m *Manager) waitPulls() { m.pulls.wg.Wait() }

// pull brings one copy over, on the driver (model.DecidePullMove):
// increments until the sending node says the copy is final, retrying
// failures with a growing pause. It holds the copy's lock but for its
// pauses.
func (m *Manager) pull(ctx context.Context, mg model.Migration) {
	log := m.logger.With("slot", mg.Slot, "alloc_id", mg.Previous.ID, "replacement_id", mg.Replacement.ID, "copy", mg.ParkedName)
	mv, err := m.drive(ctx, driveLoop{decide: m.pullDecider(mg), hold: m.locks.get(mg.ParkedName),
		logWait: func(mv model.Move, _ *string) { logPullWait(log, mg, mv) }})
	m.pullEnded(log, mg, mv, err)
}

// pullEnded acts on how mg's pull ended: mv, its last move, or err.
func (m *Manager) pullEnded(log hclog.Logger, mg model.Migration, mv model.Move, err error) {
	switch {
	case err != nil:
		log.Debug("the pull ended", "error", err) // its context, or a pause, ended
	case mv.Kind == model.MoveFail:
		log.Error("refused the copy of the data; the replacement starts as the class's migrate on_timeout says",
			"error", fmt.Errorf("%w: %s", errCopyRefused, mv.Reason))
		m.pulls.mu.Lock()
		if m.pulls.refused == nil {
			m.pulls.refused = map[string]bool{}
		}
		m.pulls.refused[mg.ParkedName] = true
		m.pulls.mu.Unlock()
	case mv.Wake:
		if mv.Phase == model.PullReceived {
			m.pulls.mu.Lock()
			if m.pulls.marked == nil {
				m.pulls.marked = map[string]bool{}
			}
			m.pulls.marked[mg.ParkedName] = true
			m.pulls.mu.Unlock()
		}
		m.pulls.wake()
		m.trigger()
	}
}

// pullDecider is mg's pull as the driver asks it: model.DecidePullMove
// on what the pull has read and the time now.
func (m *Manager) pullDecider(mg model.Migration) decider {
	m.pulls.mu.Lock()
	marked := m.pulls.marked[mg.ParkedName]
	m.pulls.mu.Unlock()
	p := model.PullLoop{Mig: mg, Class: m.cfg.Class(mg.Class), SlotDataset: m.cfg.SlotDataset(mg.Class, mg.Slot), Marked: marked}
	return func(_ model.Since, last model.Result) model.Move {
		p = p.After(last)
		p.Now = m.now()
		return model.DecidePullMove(p)
	}
}

// logPullWait says why a pull pauses: as it starts, after a busy sender,
// after a failure.
func logPullWait(log hclog.Logger, mg model.Migration, mv model.Move) {
	switch mv.Phase {
	case model.PullStart:
		log.Info("pulling the data of the allocation this one replaces from its node", "node_id", mg.Node, "from_slot", mg.PrevSlot)
	case model.PullBusy:
		log.Debug("the sending node is busy with the data; asking again shortly", "error", mv.Retry)
	case model.PullRetry:
		log.Warn("pulling the copy failed; trying again", "attempt", mv.Attempt, "error", mv.Retry)
	}
}

// fetch asks the sending node for f and receives it (m.fetcher); complete:
// the sender says the copy is whole; rows: the copy as listed once an
// increment was received (the pull decides on it, model.DecidePullMove).
func (m *Manager) fetch(ctx context.Context, f model.Fetch) (complete bool, rows []zfs.Dataset, err error) {
	req := transfer.Request{Alloc: f.Alloc, Replacement: f.Replacement, Slot: f.Slot, HaveGUID: f.HaveGUID, ResumeToken: f.ResumeToken}
	if f.Replica {
		req.Kind = transfer.KindReplica
	}
	into := transfer.Into{Target: f.Target, Props: f.Props, Exclude: f.Exclude, UserProps: model.UserProps}
	if f.Beside != "" {
		into.Beside = &transfer.Into{Target: f.Beside, Props: f.BesideProps, Exclude: f.BesideExclude, UserProps: model.UserProps}
	}
	res, err := m.fetcher.Fetch(ctx, req, into)
	return res.Complete, res.Rows, err
}
