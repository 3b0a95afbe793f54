package hooks

import (
	"context"
	"errors"
	"path"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"golang.org/x/sync/errgroup"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/pause"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// ZFS is what the lifecycle needs from the zfs package; *zfs.Client is the
// real one, and tests run it over zfstest.Fake, below the seam.
type ZFS interface {
	List(ctx context.Context, root string, userProps []string) ([]zfs.Dataset, error)
	ListMany(ctx context.Context, roots []string, userProps []string) ([]zfs.Dataset, error)
	Pools(ctx context.Context, pools ...string) ([]zfs.Pool, error)
	Create(ctx context.Context, name string, props map[string]string) error
	Clone(ctx context.Context, snap, name string, props map[string]string) error
	Mount(ctx context.Context, name string) error
	Set(ctx context.Context, name string, props map[string]string) error
	Inherit(ctx context.Context, name, prop string) error
	Snapshot(ctx context.Context, name string, props map[string]string) error
	Rollback(ctx context.Context, snap string, destroyNewer bool) error
	Rename(ctx context.Context, oldName, newName string) error
	Destroy(ctx context.Context, name string, o zfs.DestroyOptions) error
	Hold(ctx context.Context, tag, snap string) error
	Release(ctx context.Context, tag, snap string) error
}

var _ ZFS = (*zfs.Client)(nil)

// Allocs is what the lifecycle needs from the allocation watcher;
// *allocwatch.Watcher is the real one.
type Allocs interface {
	Refresh(ctx context.Context) (allocwatch.Snapshot, error)
	Lookup(ctx context.Context, allocID string) (allocwatch.Alloc, bool, error)
	RunningLocally(ctx context.Context, allocID string) (bool, error)
}

var _ Allocs = (*allocwatch.Watcher)(nil)

// Manager keeps every class's ready slots and runs their lifecycle: it scans
// the parent, creates and mounts what is missing, records holders, releases
// slots whose holders ended, prunes retained data, and publishes a View for
// the fingerprint, Stats and Reserve. What to do is the model's decision
// (package model); the Manager scans, asks the model, and acts. Run is its
// only goroutine.
type Manager struct {
	cfg    *model.Config
	zfs    ZFS
	allocs Allocs // nil: no watcher, no lifecycle (slots are never released)
	logger hclog.Logger
	now    func() time.Time
	// sleep pauses Reserve between retries.
	sleep func(ctx context.Context, d time.Duration) error

	// wake merges requests for an early reconcile.
	wake chan struct{}

	// mu guards view, updated, snap, ended and overrides.
	mu   sync.RWMutex
	view *model.View
	// updated is closed and replaced on every publish.
	updated chan struct{}
	// snap is the watcher's latest snapshot of this node's allocations.
	snap *allocwatch.Snapshot
	// ended remembers the allocations holding a slot that any snapshot
	// showed client-terminal, by ID: a holder the servers garbage-collect
	// before a pass acts on its end is still released by how it ended
	// (on_failure depends on it), not as "gone". At most maxEnded.
	ended map[string]allocwatch.Alloc
	// overrides are slots re-read after a change made under their lock,
	// newer than the published view until the next full scan.
	overrides map[string]*override

	// locks serialise everything that changes one slot: Reserve's fencing
	// and the reconcile's lifecycle steps.
	locks slotLocks

	// lastProblem is the node-wide problem last logged (Run only).
	lastProblem string
	// failures counts the passes in a row in which a lifecycle step failed
	// (a busy dataset, a zfs error); Run retries after retryWait(failures).
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

// NewManager returns a Manager; nothing runs until Run. allocs may be nil.
func NewManager(cfg *model.Config, z ZFS, allocs Allocs, logger hclog.Logger) *Manager {
	return &Manager{
		cfg:         cfg,
		zfs:         z,
		allocs:      allocs,
		logger:      logger.Named("slots"),
		now:         time.Now,
		sleep:       pause.For,
		wake:        make(chan struct{}, 1),
		updated:     make(chan struct{}),
		ended:       map[string]allocwatch.Alloc{},
		overrides:   map[string]*override{},
		concurrency: createConcurrency,
	}
}

// SetClock replaces the manager's clock and the pause between Reserve's
// retries, so a simulation can run the lifecycle in simulated time. Call it
// before any other method.
func (m *Manager) SetClock(now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) {
	m.now, m.sleep = now, sleep
}

// Run reconciles at once and then every ScanInterval, until ctx ends.
// Between scans, a trigger (the watcher's callback) runs Settle: only the
// slots the allocations call for, each read and changed on its own, so a
// release never waits for a scan of the whole tree. A step that failed (a
// dataset still busy, a zfs error) is retried soon: after 1 s, doubling up
// to the scan interval.
func (m *Manager) Run(ctx context.Context) error {
	scan := time.NewTimer(0)
	defer scan.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-scan.C:
			m.Reconcile(ctx)
			scan.Reset(m.cfg.ScanInterval)
		case <-m.wake:
			m.Settle(ctx)
		case <-retry.C:
			m.Settle(ctx)
		}
		retry.Stop()
		if m.failures > 0 {
			retry.Reset(retryWait(m.failures, m.cfg.ScanInterval))
		}
	}
}

// retryWait is the pause before retrying a failed step after failures
// failed passes in a row: 1 s, 2 s, 4 s ... up to the scan interval.
func retryWait(failures int, ceiling time.Duration) time.Duration {
	d := time.Second << min(failures-1, 16)
	return min(d, max(ceiling, time.Second))
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
}

func (m *Manager) countFailures(failed bool) {
	if failed {
		m.failures++
	} else {
		m.failures = 0
	}
}

// Trigger asks Run for a reconcile soon; it never blocks.
func (m *Manager) Trigger() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// OnAllocs takes the watcher's snapshot of this node's allocations and
// asks for a reconcile. It is the watcher's callback.
func (m *Manager) OnAllocs(s allocwatch.Snapshot) {
	m.storeSnapshot(s)
	m.Trigger()
}

func (m *Manager) storeSnapshot(s allocwatch.Snapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.snap == nil || !s.At.Before(m.snap.At) {
		m.snap = &s
	}
	m.rememberEnded(s)
}

// maxEnded bounds Manager.ended. An entry is needed only between the
// snapshot that shows the end and the pass that records the release (one
// zfs set), so only a node ending thousands of allocations in that window
// could forget one, and it would then record the outcome "gone".
const maxEnded = 4096

// rememberEnded records the client-terminal slot holders in s; when the
// memory is full, it forgets those s no longer lists. The caller holds mu.
func (m *Manager) rememberEnded(s allocwatch.Snapshot) {
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

// endedAlloc is allocation id as a snapshot last showed it ended.
func (m *Manager) endedAlloc(id string) (allocwatch.Alloc, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	a, ok := m.ended[id]
	return a, ok
}

func (m *Manager) snapshot() *allocwatch.Snapshot {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.snap
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
	prev, _ := m.View()
	s := m.scan(ctx, nil)
	v := model.BuildView(m.cfg, s, prev)
	if prev == nil && offersEveryClass(v) {
		// The first pass publishes what it found before it creates
		// anything: every existing slot is offered at once, and new slots
		// join as they are created.
		m.publish(v, s.At)
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
		stepped, failed := m.runLifecycle(ctx, v)
		changed = changed || stepped
		m.countFailures(failed)
	}
	for ci := range v.Classes {
		if m.finishRenamed(ctx, &v.Classes[ci]) {
			changed = true
		}
		if len(v.Classes[ci].Retained) > 0 && m.pruneRetained(ctx, &v.Classes[ci]) {
			changed = true
		}
	}
	if changed {
		s = m.scan(ctx, failed)
		v = model.BuildView(m.cfg, s, prev)
	}
	m.logProblem(v)
	m.publish(v, s.At)
}

// scan runs one zpool and one zfs process.
func (m *Manager) scan(ctx context.Context, createErrs map[string]string) model.Scan {
	return scanParent(ctx, m.cfg, m.zfs, m.now(), createErrs)
}

// scanParent reads the parent's pool and everything below the parent.
func scanParent(ctx context.Context, cfg *model.Config, z ZFS, at time.Time, createErrs map[string]string) model.Scan {
	s := model.Scan{At: at, CreateErrs: createErrs}
	s.Pools, s.PoolErr = z.Pools(ctx, zfs.PoolOf(cfg.Parent))
	s.Sets, s.ListErr = z.List(ctx, cfg.Parent, model.UserProps)
	return s
}

// createConcurrency bounds the zfs processes that create or mount slots at
// once. Each is short and mostly CPU-bound; more than a few only queue on
// the host's cores.
const createConcurrency = 4

// publishEvery paces the partial views published while slots are created:
// a node with many new slots offers them a batch at a time, each batch read
// back with one zfs list, without re-registering the node for every one.
const publishEvery = time.Second

// SetCreateConcurrency sets how many slots a pass creates or mounts at once
// (default 4). 1 runs them in plan order, which makes a pass deterministic:
// the lifecycle simulation sets it.
func (m *Manager) SetCreateConcurrency(n int) { m.concurrency = max(n, 1) }

// apply runs the planned actions and returns a reason for each dataset it
// could not create. Class datasets go first, in order; a class that failed
// skips its slots. Slots are then created and mounted, up to concurrency at
// once, taking the classes in turn; every publishEvery, those done since
// are read back (one zfs list) and published over v, once every class has a
// slot to offer.
func (m *Manager) apply(ctx context.Context, v *model.View, acts []model.Action) map[string]string {
	failed := map[string]string{}
	badClass := map[string]string{}
	var slots []model.Action
	for _, a := range acts {
		if a.Kind != model.CreateClass && a.Kind != model.MountClass {
			slots = append(slots, a)
			continue
		}
		var err error
		if a.Kind == model.CreateClass {
			err = m.zfs.Create(ctx, a.Dataset, a.Props)
		} else {
			err = m.zfs.Mount(ctx, a.Dataset)
		}
		if reason := m.logAction(a, err); reason != "" {
			failed[a.Dataset] = reason
			badClass[a.Class] = "class dataset " + a.Dataset + ": " + reason
		}
	}

	var mu sync.Mutex // guards failed, done and lastPublish
	var done []model.Action
	lastPublish := time.Now()
	var g errgroup.Group
	g.SetLimit(m.concurrency)
	for _, a := range interleave(slots) {
		if reason, ok := badClass[a.Class]; ok {
			failed[a.Dataset] = reason
			continue
		}
		g.Go(func() error {
			ok, err := m.slotAction(ctx, a)
			mu.Lock()
			defer mu.Unlock()
			if reason := m.logAction(a, err); reason != "" {
				failed[a.Dataset] = reason
				return nil
			}
			if ok {
				done = append(done, a)
			}
			if len(done) > 0 && time.Since(lastPublish) >= publishEvery {
				m.rereadMany(ctx, v, done)
				m.publishPartial(v)
				done, lastPublish = nil, time.Now()
			}
			return nil
		})
	}
	_ = g.Wait() // every error is recorded in failed
	return failed
}

// interleave orders slot actions by taking the classes in turn, so every
// class has a slot early.
func interleave(acts []model.Action) []model.Action {
	var order []string
	byClass := map[string][]model.Action{}
	for _, a := range acts {
		if _, ok := byClass[a.Class]; !ok {
			order = append(order, a.Class)
		}
		byClass[a.Class] = append(byClass[a.Class], a)
	}
	out := make([]model.Action, 0, len(acts))
	for len(out) < len(acts) {
		for _, c := range order {
			if q := byClass[c]; len(q) > 0 {
				out = append(out, q[0])
				byClass[c] = q[1:]
			}
		}
	}
	return out
}

// offersEveryClass reports whether publishing v is safe while slots are
// still being created: a node-wide problem (nothing will change soon), or a
// healthy slot in every class. A class shown with no healthy instance makes
// Nomad mark the node's class ineligible for a job evaluated then, and
// device health is not part of the computed class, so the job would stay
// blocked after the slots turn healthy.
func offersEveryClass(v *model.View) bool {
	if v.Problem != "" {
		return true
	}
	for ci := range v.Classes {
		healthy := false
		for si := range v.Classes[ci].Slots {
			healthy = healthy || v.Classes[ci].Slots[si].Healthy
		}
		if !healthy {
			return false
		}
	}
	return true
}

// slotAction creates or mounts one slot. A slot a Reserve
// is fencing may be between the destroy and the re-create of a release:
// creating it here would lose what the release records, so it is left to
// the Reserve (done false); the next pass looks again.
func (m *Manager) slotAction(ctx context.Context, a model.Action) (done bool, err error) {
	id := path.Base(a.Dataset)
	lock := m.locks.get(id)
	if !lock.TryLock() {
		return false, nil
	}
	defer lock.Unlock()
	if a.Kind == model.CreateSlot {
		err = m.createSlot(ctx, m.cfg.Class(a.Class), a.Dataset, a.Props)
	} else {
		err = m.zfs.Mount(ctx, a.Dataset)
	}
	return err == nil, err
}

// logAction logs what an action did and returns why it failed, "" if it
// did not.
func (m *Manager) logAction(a model.Action, err error) string {
	if err == nil {
		m.logger.Info(a.Kind.String(), "dataset", a.Dataset)
		return ""
	}
	reason := err.Error()
	if errors.Is(err, zfs.ErrNoSpace) {
		reason = "pool out of space for another slot: " + reason
	}
	m.logger.Error("cannot "+a.Kind.String(), "dataset", a.Dataset, "error", err)
	return reason
}

// logProblem logs a node-wide problem once when it appears and once when it
// clears, not every period.
func (m *Manager) logProblem(v *model.View) {
	if v.Problem == m.lastProblem {
		return
	}
	if v.Problem != "" {
		m.logger.Error("slots unavailable", "parent", m.cfg.Parent, "reason", v.Problem)
	} else {
		m.logger.Info("slots available again", "parent", m.cfg.Parent)
	}
	m.lastProblem = v.Problem
}

// publish makes v current. Overrides older than the scan that built v are
// dropped: v has read their datasets since.
func (m *Manager) publish(v *model.View, scannedAt time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.view = v
	for id, o := range m.overrides {
		if !o.at.After(scannedAt) {
			delete(m.overrides, id)
		}
	}
	close(m.updated)
	m.updated = make(chan struct{})
}

// publishOverrides publishes the current view with the slots re-read since
// it was published in place of its own, so the fingerprint and Stats see a
// release at once; the next scan replaces the view whole.
func (m *Manager) publishOverrides() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.view != nil {
		m.publishOverridesLocked(m.view, false)
	}
}

// publishPartial is publishOverrides while a pass creates slots: over the
// published view, or over base (the pass's scan) before the first publish,
// and only once every class has a slot to offer.
func (m *Manager) publishPartial(base *model.View) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.view != nil {
		base = m.view
	}
	m.publishOverridesLocked(base, true)
}

// publishOverridesLocked publishes base with the unpublished overrides; the
// caller holds mu. With partial set, it publishes only a view that offers
// every class. It costs a look at each override (slots re-read since the
// last scan), and a copy of a class's slots only when one of them changed.
func (m *Manager) publishOverridesLocked(base *model.View, partial bool) {
	type change struct {
		class, slot int
		o           *override
	}
	var changes []change
	for id, o := range m.overrides {
		if o.published || !o.at.After(base.ScannedAt) {
			continue
		}
		if ci, si, ok := base.SlotIndex(id); ok {
			changes = append(changes, change{ci, si, o})
		}
	}
	if len(changes) == 0 {
		return
	}
	v := *base
	v.Classes = append([]model.ClassView(nil), v.Classes...)
	copied := map[int]bool{}
	for _, c := range changes {
		if !copied[c.class] {
			v.Classes[c.class].Slots = append([]model.Slot(nil), v.Classes[c.class].Slots...)
			copied[c.class] = true
		}
		v.Classes[c.class].Slots[c.slot] = c.o.slot
	}
	if partial && !offersEveryClass(&v) {
		return
	}
	for _, c := range changes {
		c.o.published = true
	}
	m.view = &v
	close(m.updated)
	m.updated = make(chan struct{})
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
