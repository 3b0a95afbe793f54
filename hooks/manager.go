package hooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// ZFS is what the lifecycle needs from the zfs package; *zfs.Client is the
// real one, and tests run it over zfstest.Fake, below the seam.
type ZFS interface {
	List(ctx context.Context, root string, userProps []string) ([]zfs.Dataset, error)
	ListMany(ctx context.Context, roots []string, userProps []string) ([]zfs.Dataset, error)
	// ListAll lists volumes too, and an interrupted receive's resume
	// token: a received copy (migrate.go).
	ListAll(ctx context.Context, root string, userProps []string) ([]zfs.Dataset, error)
	Pools(ctx context.Context, pools ...string) ([]zfs.Pool, error)
	// Exec runs one command of a plan (model.Plan); every change goes
	// through it.
	Exec(ctx context.Context, cmd zfs.Command) error
	// Set is the operator CLI's one change (MarkReleasing).
	Set(ctx context.Context, name string, props map[string]string) error
	// DecodeResumeToken reads a peer's interrupted receive, on the sending
	// node (send.go); the receiving node reads its own token with the
	// copy's listing (ListAll).
	DecodeResumeToken(ctx context.Context, token string) (zfs.ResumeToken, error)
}

var _ ZFS = (*zfs.Client)(nil)

// Allocs is what the lifecycle needs from the allocation watcher;
// *allocwatch.Watcher is the real one.
type Allocs interface {
	Refresh(ctx context.Context) (model.Snapshot, error)
	Lookup(ctx context.Context, allocID string) (model.Alloc, bool, error)
	RunningLocally(ctx context.Context, allocID string) (bool, error)
}

var _ Allocs = (*allocwatch.Watcher)(nil)

// Manager keeps every class's ready slots and runs their lifecycle: it scans
// the parents, creates and mounts what is missing, records holders, releases
// slots whose holders ended, prunes retained data, and publishes a View for
// the fingerprint, Stats and Reserve. What to do is the model's decision
// (package model); the Manager scans, asks the model, and acts. Run is its
// only goroutine.
type Manager struct {
	cfg    *model.Config
	zfs    ZFS
	allocs Allocs // nil: no watcher, no lifecycle (slots are never released)
	logger hclog.Logger
	// observer hears of releases and scans (Config.Observer).
	observer Observer
	now      func() time.Time
	// sleep pauses Reserve between retries, and a pull between
	// increments.
	sleep func(ctx context.Context, d time.Duration) error

	// wake merges requests for an early reconcile.
	wake chan struct{}

	// mu guards view, updated, snap, ended, overrides and lastStamp.
	mu   sync.RWMutex
	view *model.View
	// updated is closed and replaced on every publish.
	updated chan struct{}
	// snap is the watcher's latest snapshot of this node's allocations.
	snap *model.Snapshot
	// ended remembers the allocations holding a slot that any snapshot
	// showed client-terminal, by ID: a holder the servers garbage-collect
	// before a pass acts on its end is still released by how it ended
	// (on_failure depends on it), not as "gone". At most maxEnded.
	ended map[string]model.Alloc
	// fetcher pulls copies of other nodes' data (Config.Fetcher; nil:
	// none is pulled); pulls are the pulls running (migrate.go).
	fetcher transfer.Fetcher
	pulls   migrations
	// cluster is what the replica loop and a takeover read of Nomad
	// (Config.Cluster; nil: no replicas kept, none taken over); replicas
	// the loop's memory (replica_pull.go).
	cluster  Cluster
	replicas replicas
	// paired are the pairings of replacements with lost allocations
	// Nomad does not link, as last logged (takeover.go).
	paired pairings
	// unlinked are the replacements of those pairings whose predecessor
	// has ended on its node since: their data is pulled (takeover.go).
	unlinked links
	// remote are allocations of other nodes looked up because one of this
	// node's replaces them (model.Snapshot.Others): their data is to come
	// here (model/migrate.go).
	remote map[string]model.Alloc
	// overrides are slots re-read after a change made under their lock,
	// newer than the published view until the next full scan.
	overrides map[string]*override
	// lastStamp is the last stamp handed out.
	lastStamp time.Time

	// locks serialise everything that changes one slot: Reserve's fencing
	// and the reconcile's lifecycle steps.
	locks slotLocks
	// waits are the clocks of the slots that wait on what no event of the
	// plugin's own reports (waits.go).
	waits waitClocks

	// lastProblem is the problem last logged of each parent (Run only).
	lastProblem map[string]string
	// failures counts the passes in a row in which a lifecycle step failed
	// (a busy dataset, a zfs error); Run retries after model.RetryWait(failures).
	failures int
	// concurrency bounds the slots created or mounted at once.
	concurrency int
}

type override struct {
	slot model.Slot
	at   time.Time
	// published: the published view shows it already.
	published bool
}

// Run reconciles at once and then every ScanInterval, until ctx ends.
// Between scans, a trigger (the watcher's callback) runs Settle: only the
// slots the allocations call for, each read and changed on its own, so a
// release never waits for a scan of the whole tree. The periodic scan's
// zfs processes run off the loop for the same reason: at thousands of
// slots a listing takes seconds, and Settle goes on meanwhile. A step that
// failed (a dataset still busy, a zfs error) is retried soon: after 1 s,
// doubling up to the scan interval. A slot that waits on what no event
// reports (a stopping holder, one only the local client still runs) is
// looked at again on its own clock (recheck).
func (m *Manager) Run(ctx context.Context) error {
	var scanning sync.WaitGroup
	defer scanning.Wait()
	defer m.waitPulls()
	defer m.waitReplicas()
	m.startReplicas(ctx)
	type scanned struct {
		scan model.Scan
		took time.Duration
	}
	scans := make(chan scanned, 1)
	timer := time.NewTimer(0)
	defer timer.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	// retryArmed: a retry is due; the loop's other wake-ups (a recheck
	// every second or so) must not push it back.
	retryArmed := false
	// recheck fires when a waiting slot's clock is due (waits.go).
	recheck := time.NewTimer(time.Hour)
	recheck.Stop()
	defer recheck.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			if v, _ := m.View(); v == nil {
				// The first pass, on the loop: nothing is offered yet, and
				// Settle has nothing to act on before it.
				m.Reconcile(ctx)
				timer.Reset(m.cfg.ScanInterval)
				break
			}
			scanning.Add(1)
			go func() {
				defer scanning.Done()
				start := time.Now()
				// At the lowest CPU priority: nothing waits for it, and
				// a release's zfs processes must not wait for it either.
				s := m.scan(zfs.Background(ctx), nil)
				scans <- scanned{s, time.Since(start)}
			}()
		case s := <-scans:
			if ctx.Err() != nil {
				return ctx.Err() // a scan cut short by the end: nothing to judge
			}
			m.reconcileScanned(ctx, s.scan)
			wait := scanWait(m.cfg.ScanInterval, s.took)
			if wait > m.cfg.ScanInterval {
				m.logger.Debug("scan took long; next one later", "took", s.took.Round(time.Millisecond).String(), "next_in", wait.Round(time.Second).String())
			}
			timer.Reset(wait)
		case <-m.wake:
			m.Settle(ctx)
		case <-retry.C:
			retryArmed = false
			m.Settle(ctx)
		case <-recheck.C:
			m.recheck(ctx)
		}
		switch {
		case m.failures == 0 && retryArmed:
			retry.Stop()
			retryArmed = false
		case m.failures > 0 && !retryArmed:
			retry.Reset(model.RetryWait(m.failures, m.cfg.ScanInterval))
			retryArmed = true
		}
		recheck.Stop()
		if next, ok := m.nextRecheck(); ok {
			recheck.Reset(max(next.Sub(m.now()), 0))
		}
	}
}

// scanSpacing keeps the periodic scan to a tenth of the time: after a scan
// that took d, the next starts no sooner than scanSpacing×d later. With
// thousands of slots on a slow host a listing takes seconds, and nothing
// waits for it (releases and Reserves read their own slot), so a fixed
// interval would only spend the host's CPU on it. maxStretch bounds the
// wait, so that a scan slowed by a passing stall does not put the next
// one off for long.
const (
	scanSpacing = 9
	maxStretch  = 10
)

// scanWait is the pause after a scan that took took: scan_interval, or
// longer when the scan itself was slow, at most maxStretch intervals.
func scanWait(interval, took time.Duration) time.Duration {
	return max(interval, min(scanSpacing*took, maxStretch*interval))
}

// Settle carries out what the watcher's latest snapshot calls for on the
// slots of the published view, reading only those slots, and publishes
// what changed. Before the first scan it runs a full Reconcile.
func (m *Manager) Settle(ctx context.Context) {
	v, _ := m.View()
	if v == nil || m.allocs == nil {
		m.Reconcile(ctx)
		return
	}
	_, failed := m.runLifecycle(ctx, v)
	m.countFailures(failed)
	m.publishOverrides()
	m.driveMigrations(ctx)
}

func (m *Manager) countFailures(failed bool) {
	if failed {
		m.failures++
	} else {
		m.failures = 0
	}
}

// trigger asks Run for a reconcile soon; it never blocks.
func (m *Manager) trigger() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// OnAllocs takes the watcher's snapshot of this node's allocations and
// asks for a reconcile. It is the watcher's callback.
func (m *Manager) OnAllocs(s model.Snapshot) {
	m.storeSnapshot(s)
	m.trigger()
}

func (m *Manager) storeSnapshot(s model.Snapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.snap == nil || !s.At.Before(m.snap.At) {
		m.snap = &s
	}
	m.rememberEnded(s)
	m.unlinked.keepListed(s)
	m.forgetRemote(s)
}

// maxEnded bounds Manager.ended. An entry is needed only between the
// snapshot that shows the end and the pass that records the release (one
// zfs set), so only a node ending thousands of allocations in that window
// could forget one, and it would then record the outcome "gone".
const maxEnded = 4096

// rememberEnded records the client-terminal slot holders in s; when the
// memory is full, it forgets those s no longer lists. The caller holds mu.
func (m *Manager) rememberEnded(s model.Snapshot) {
	listed := make(map[string]bool, len(s.Allocs))
	for _, a := range s.Allocs {
		listed[a.ID] = true
		if a.ClientTerminal() && model.HoldsSlot(a) {
			m.ended[a.ID] = a
		}
	}
	if len(m.ended) <= maxEnded {
		return
	}
	for id := range m.ended {
		if !listed[id] {
			delete(m.ended, id)
		}
	}
}

// forgetRemote drops the looked-up allocations of other nodes that no
// allocation in s replaces any more. The caller holds mu.
func (m *Manager) forgetRemote(s model.Snapshot) {
	if len(m.remote) == 0 {
		return
	}
	wanted := map[string]bool{}
	for _, a := range s.Allocs {
		wanted[a.PreviousAllocation] = true
	}
	for _, a := range m.unlinked.all() {
		wanted[a] = true
	}
	for id := range m.remote {
		if !wanted[id] {
			delete(m.remote, id)
		}
	}
}

// endedAlloc is allocation id as a snapshot last showed it ended.
func (m *Manager) endedAlloc(id string) (model.Alloc, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	a, ok := m.ended[id]
	return a, ok
}

// snapshot is the watcher's latest snapshot, with the allocations of other
// nodes looked up since (Others).
func (m *Manager) snapshot() *model.Snapshot {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.snap == nil || len(m.remote) == 0 {
		return m.snap
	}
	s := *m.snap
	s.Others = make([]model.Alloc, 0, len(m.remote))
	for _, a := range m.remote {
		s.Others = append(s.Others, a)
	}
	return &s
}

// NodeID is this node's ID, as the watcher's answers say; an error before
// the first.
func (m *Manager) NodeID(context.Context) (string, error) {
	if s := m.snapshot(); s != nil && s.NodeID != "" {
		return s.NodeID, nil
	}
	return "", fmt.Errorf("this node's ID is not known yet: the allocation watcher has not answered")
}

// lookupRemote looks allocation id up, and keeps it as another node's
// (model.Snapshot.Others) when it is: the predecessor of one of this
// node's, whose data is to come here.
func (m *Manager) lookupRemote(ctx context.Context, id string) error {
	a, found, err := m.allocs.Lookup(ctx, id)
	if err != nil {
		return fmt.Errorf("looking up allocation %s, whose replacement is on this node: %w", id, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if found && m.snap != nil && a.NodeID != m.snap.NodeID {
		m.remote[id] = a
	}
	return nil
}

// View returns the current view (nil before the first scan) and a channel
// closed when a newer one is published.
func (m *Manager) View() (*model.View, <-chan struct{}) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.view, m.updated
}

// Reconcile runs one pass: scan; create and mount what is missing; record
// holders and release what the watcher's snapshot calls for; prune retained
// data; rescan if anything changed; publish.
func (m *Manager) Reconcile(ctx context.Context) {
	m.reconcileScanned(ctx, m.scan(ctx, nil))
}

// reconcileScanned is Reconcile's pass on s, a scan taken since the last
// pass, while Settle may have changed slots. It plans from s with the
// slots re-read since s began in their place.
func (m *Manager) reconcileScanned(ctx context.Context, s model.Scan) {
	prev, _ := m.View()
	v := m.overlaid(model.BuildView(m.cfg, s, prev))
	if prev == nil && offersEveryClass(v) {
		// The first pass publishes what it found before it creates
		// anything: every existing slot is offered at once, and new slots
		// join as they are created.
		m.publish(v)
	}
	changed := false
	acts, blocked := model.PlanEnsure(v, m.now())
	failed := map[string]string{}
	if len(acts) > 0 || len(blocked) > 0 {
		failed = m.apply(ctx, v, acts)
		for ds, reason := range blocked {
			failed[ds] = reason
		}
		changed = true
	}
	if m.allocs != nil {
		stepped, stepFailed := m.runLifecycle(ctx, v)
		changed = changed || stepped
		m.countFailures(stepFailed)
		m.driveMigrations(ctx)
	}
	for _, cvs := range [][]model.ClassView{v.Classes, v.Removed} {
		for ci := range cvs {
			if m.finishRenamed(ctx, &cvs[ci]) {
				changed = true
			}
			if len(cvs[ci].Retained) > 0 && m.pruneRetained(ctx, &cvs[ci]) {
				changed = true
			}
			if len(cvs[ci].Parked) > 0 && m.runParked(ctx, &cvs[ci]) {
				changed = true
			}
		}
	}
	if m.retireClasses(ctx, v) {
		changed = true
	}
	if changed {
		s = m.scan(ctx, failed)
		v = m.overlaid(model.BuildView(m.cfg, s, prev))
	}
	m.logProblem(v)
	m.publish(v)
}

// scan reads the parents' pools and everything below each parent: one
// zpool process, and one zfs process per parent; createErrs are the
// creates that failed in the pass it follows. It is safe beside
// everything else the Manager does.
func (m *Manager) scan(ctx context.Context, createErrs map[string]string) model.Scan {
	return scanParents(ctx, m.cfg, m.zfs, m.stamp(), createErrs, m.observer)
}

// stamp is the time a read of datasets begins: now, but strictly after
// every earlier stamp, so a scan and a slot's re-read are never equally
// new whatever the clock's resolution (a simulated clock stands still).
func (m *Manager) stamp() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.now()
	if !t.After(m.lastStamp) {
		t = m.lastStamp.Add(time.Nanosecond)
	}
	m.lastStamp = t
	return t
}

// scanParents reads the parents' pools and everything below each parent.
// The pools are one zpool process: by name when there is one, as it always
// was; all of them when the parents are in several, since zpool fails the
// whole listing when one named pool is missing, and one missing pool must
// not hide the others' health. The Observer hears each parent's scan: its
// listing's time and the pool listing's.
func scanParents(ctx context.Context, cfg *model.Config, z ZFS, at time.Time, createErrs map[string]string, o Observer) model.Scan {
	s := model.Scan{At: at, CreateErrs: createErrs}
	parents := cfg.Parents()
	var pools []string
	for _, p := range parents {
		if pool := zfs.PoolOf(p); !slices.Contains(pools, pool) {
			pools = append(pools, pool)
		}
	}
	start := time.Now()
	s.Pools, s.PoolErr = unstarved(ctx, func(ctx context.Context) ([]zfs.Pool, error) {
		if len(pools) == 1 {
			return z.Pools(ctx, pools[0])
		}
		return z.Pools(ctx)
	})
	poolsTook := time.Since(start)
	for _, p := range parents {
		start := time.Now()
		sets, err := unstarved(ctx, func(ctx context.Context) ([]zfs.Dataset, error) {
			return z.List(ctx, p, model.UserProps)
		})
		o.ScanDone(ScanEvent{Pool: zfs.PoolOf(p), Parent: p, Took: poolsTook + time.Since(start), Err: errors.Join(s.PoolErr, err)})
		if err != nil {
			if s.ListErrs == nil {
				s.ListErrs = map[string]error{}
			}
			s.ListErrs[p] = err
		}
		if s.Sets == nil {
			s.Sets = sets
		} else {
			s.Sets = append(s.Sets, sets...)
		}
	}
	return s
}

// unstarved runs one of the scan's reads. A read at the lowest priority
// (zfs.Background) that timed out was starved of CPU by a busy host, which
// says nothing about the pool: it runs again at once at the normal
// priority, and that outcome counts. Otherwise the slots of a healthy pool
// would be unhealthy, and every Reserve on them refused, until the next
// scan (seen in the VM at load 10: a background zpool list timed out after
// 2 minutes, and a task start failed for good on it).
func unstarved[T any](ctx context.Context, read func(context.Context) (T, error)) (T, error) {
	v, err := read(ctx)
	if errors.Is(err, zfs.ErrTimeout) && zfs.IsBackground(ctx) && ctx.Err() == nil {
		return read(zfs.Foreground(ctx))
	}
	return v, err
}

// logProblem logs each parent's problem once when it appears and once when
// it clears, not every period.
func (m *Manager) logProblem(v *model.View) {
	for _, p := range v.Parents {
		if p.Problem == m.lastProblem[p.Dataset] {
			continue
		}
		if p.Problem != "" {
			m.logger.Error("slots unavailable", "parent", p.Dataset, "classes", m.classesBelow(p.Dataset), "reason", p.Problem)
		} else {
			m.logger.Info("slots available again", "parent", p.Dataset, "classes", m.classesBelow(p.Dataset))
		}
		m.lastProblem[p.Dataset] = p.Problem
	}
}

// classesBelow names the configured classes below parent, for the log.
func (m *Manager) classesBelow(parent string) string {
	var names []string
	for _, c := range m.cfg.Classes {
		if m.cfg.ClassParent(c.Name) == parent {
			names = append(names, c.Name)
		}
	}
	return strings.Join(names, ",")
}

// slotLocks hands out one mutex per slot ID.
type slotLocks struct {
	mu sync.Mutex
	m  map[string]*sync.Mutex
}

func (l *slotLocks) get(id string) *sync.Mutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*sync.Mutex{}
	}
	if l.m[id] == nil {
		l.m[id] = &sync.Mutex{}
	}
	return l.m[id]
}
