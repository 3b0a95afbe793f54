package hooks

import (
	"context"
	"errors"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// ZFS is what the lifecycle needs from the zfs package; *zfs.Client is the
// real one, and tests run it over zfstest.Fake, below the seam.
type ZFS interface {
	List(ctx context.Context, root string, userProps []string) ([]zfs.Dataset, error)
	Pools(ctx context.Context, pools ...string) ([]zfs.Pool, error)
	Create(ctx context.Context, name string, props map[string]string) error
	Mount(ctx context.Context, name string) error
}

var _ ZFS = (*zfs.Client)(nil)

// Manager keeps every class's ready slots: it scans the parent, creates and
// mounts what is missing, and publishes a View for the fingerprint, Stats and
// Reserve. Run is its only goroutine.
type Manager struct {
	cfg    *Config
	zfs    ZFS
	logger hclog.Logger
	now    func() time.Time

	// wake merges requests for an early reconcile.
	wake chan struct{}

	// mu guards view and updated.
	mu   sync.RWMutex
	view *View
	// updated is closed and replaced on every publish.
	updated chan struct{}

	// lastProblem is the node-wide problem last logged (Run only).
	lastProblem string
}

// NewManager returns a Manager; nothing runs until Run.
func NewManager(cfg *Config, z ZFS, logger hclog.Logger) *Manager {
	return &Manager{
		cfg:     cfg,
		zfs:     z,
		logger:  logger.Named("slots"),
		now:     time.Now,
		wake:    make(chan struct{}, 1),
		updated: make(chan struct{}),
	}
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

// View returns the current view (nil before the first scan) and a channel
// closed when a newer one is published.
func (m *Manager) View() (*View, <-chan struct{}) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.view, m.updated
}

// Reconcile runs one pass: scan, create and mount what is missing, rescan if
// anything changed, publish.
func (m *Manager) Reconcile(ctx context.Context) {
	prev, _ := m.View()
	s := m.scan(ctx, nil)
	v := buildView(m.cfg, s, prev)
	acts, blocked := planEnsure(m.cfg, v, m.now())
	if len(acts) > 0 || len(blocked) > 0 {
		failed := m.apply(ctx, acts)
		for ds, reason := range blocked {
			failed[ds] = reason
		}
		s = m.scan(ctx, failed)
		v = buildView(m.cfg, s, prev)
	}
	m.logProblem(v)
	m.publish(v)
}

// scan runs one zpool and one zfs process.
func (m *Manager) scan(ctx context.Context, createErrs map[string]string) scan {
	s := scan{at: m.now(), createErrs: createErrs}
	s.pools, s.poolErr = m.zfs.Pools(ctx, zfs.PoolOf(m.cfg.Parent))
	s.sets, s.listErr = m.zfs.List(ctx, m.cfg.Parent, userProps)
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
		case createClass, createSlot:
			err = m.zfs.Create(ctx, a.dataset, a.props)
		case mountSlot:
			err = m.zfs.Mount(ctx, a.dataset)
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
		if a.kind == createClass {
			badClass[a.class] = "class dataset " + a.dataset + ": " + reason
		}
	}
	return failed
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

func (m *Manager) publish(v *View) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.view = v
	close(m.updated)
	m.updated = make(chan struct{})
}
