package hooks

import (
	"context"
	"errors"
	"path"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// ZFS is what the lifecycle needs from the zfs package; *zfs.Client is the
// real one, and tests run it over zfstest.Fake, below the seam.
type ZFS interface {
	List(ctx context.Context, root string, userProps []string) ([]zfs.Dataset, error)
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
// the fingerprint, Stats and Reserve. Run is its only goroutine.
type Manager struct {
	cfg    *Config
	zfs    ZFS
	allocs Allocs // nil: no watcher, no lifecycle (slots are never released)
	logger hclog.Logger
	now    func() time.Time
	// sleep pauses Reserve between retries.
	sleep func(ctx context.Context, d time.Duration) error

	// wake merges requests for an early reconcile.
	wake chan struct{}

	// mu guards view, updated, snap and overrides.
	mu   sync.RWMutex
	view *View
	// updated is closed and replaced on every publish.
	updated chan struct{}
	// snap is the watcher's latest snapshot of this node's allocations.
	snap *allocwatch.Snapshot
	// overrides are slots re-read after a change made under their lock,
	// newer than the published view until the next full scan.
	overrides map[string]override

	// locks serialise everything that changes one slot: Reserve's fencing
	// and the reconcile's lifecycle steps.
	locks slotLocks

	// lastProblem is the node-wide problem last logged (Run only).
	lastProblem string
}

type override struct {
	slot Slot
	at   time.Time
}

// NewManager returns a Manager; nothing runs until Run. allocs may be nil.
func NewManager(cfg *Config, z ZFS, allocs Allocs, logger hclog.Logger) *Manager {
	return &Manager{
		cfg:       cfg,
		zfs:       z,
		allocs:    allocs,
		logger:    logger.Named("slots"),
		now:       time.Now,
		sleep:     sleep,
		wake:      make(chan struct{}, 1),
		updated:   make(chan struct{}),
		overrides: map[string]override{},
	}
}

// SetClock replaces the manager's clock and the pause between Reserve's
// retries, so a simulation can run the lifecycle in simulated time. Call it
// before any other method.
func (m *Manager) SetClock(now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) {
	m.now, m.sleep = now, sleep
}

// Run reconciles at once, then every ScanInterval or when triggered, until
// ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		case <-m.wake:
		}
		m.Reconcile(ctx)
		timer.Reset(m.cfg.ScanInterval)
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
}

func (m *Manager) snapshot() *allocwatch.Snapshot {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.snap
}

// View returns the current view (nil before the first scan) and a channel
// closed when a newer one is published.
func (m *Manager) View() (*View, <-chan struct{}) {
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
	v := buildView(m.cfg, s, prev)
	changed := false
	acts, blocked := planEnsure(m.cfg, v, m.now())
	failed := map[string]string{}
	if len(acts) > 0 || len(blocked) > 0 {
		failed = m.apply(ctx, acts)
		for ds, reason := range blocked {
			failed[ds] = reason
		}
		changed = true
	}
	if m.allocs != nil && m.runLifecycle(ctx, v) {
		changed = true
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
		v = buildView(m.cfg, s, prev)
	}
	m.logProblem(v)
	m.publish(v, s.at)
}

// scan runs one zpool and one zfs process.
func (m *Manager) scan(ctx context.Context, createErrs map[string]string) scan {
	return scanParent(ctx, m.cfg, m.zfs, m.now(), createErrs)
}

// scanParent reads the parent's pool and everything below the parent.
func scanParent(ctx context.Context, cfg *Config, z ZFS, at time.Time, createErrs map[string]string) scan {
	s := scan{at: at, createErrs: createErrs}
	s.pools, s.poolErr = z.Pools(ctx, zfs.PoolOf(cfg.Parent))
	s.sets, s.listErr = z.List(ctx, cfg.Parent, userProps)
	return s
}

// apply runs the planned actions in order and returns a reason for each
// dataset it could not create. A class dataset that failed skips its slots.
func (m *Manager) apply(ctx context.Context, acts []action) map[string]string {
	failed := map[string]string{}
	badClass := map[string]string{}
	for _, a := range acts {
		if reason, ok := badClass[a.class]; ok {
			failed[a.dataset] = reason
			continue
		}
		var err error
		switch a.kind {
		case createClass, mountClass:
			err = m.classAction(ctx, a)
		case createSlot, mountSlot:
			// A slot a Reserve is fencing may be between the destroy and the
			// re-create of a release: creating it here would lose what the
			// release records. Leave it to the Reserve; the next pass sees.
			lock := m.locks.get(path.Base(a.dataset))
			if !lock.TryLock() {
				continue
			}
			if a.kind == createSlot {
				err = m.createSlot(ctx, m.class(a.class), a.dataset, a.props)
			} else {
				err = m.zfs.Mount(ctx, a.dataset)
			}
			lock.Unlock()
		}
		if err == nil {
			m.logger.Info(a.kind.String(), "dataset", a.dataset)
			continue
		}
		reason := err.Error()
		if errors.Is(err, zfs.ErrNoSpace) {
			reason = "pool out of space for another slot: " + reason
		}
		m.logger.Error("cannot "+a.kind.String(), "dataset", a.dataset, "error", err)
		failed[a.dataset] = reason
		if a.kind == createClass || a.kind == mountClass {
			badClass[a.class] = "class dataset " + a.dataset + ": " + reason
		}
	}
	return failed
}

// classAction creates or mounts a class dataset.
func (m *Manager) classAction(ctx context.Context, a action) error {
	if a.kind == createClass {
		return m.zfs.Create(ctx, a.dataset, a.props)
	}
	return m.zfs.Mount(ctx, a.dataset)
}

// class returns the configured class by name.
func (m *Manager) class(name string) Class {
	for _, c := range m.cfg.Classes {
		if c.Name == name {
			return c
		}
	}
	return Class{Name: name}
}

// logProblem logs a node-wide problem once when it appears and once when it
// clears, not every period.
func (m *Manager) logProblem(v *View) {
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
func (m *Manager) publish(v *View, scannedAt time.Time) {
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
