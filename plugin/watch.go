package plugin

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// lazyWatcher is the lifecycle's allocation source while the watcher may
// not exist yet (its token or TLS files unreadable). Until it does, every
// query fails: Reserve then refuses rather than guesses, and no slot is
// released.
type lazyWatcher struct {
	mu  sync.Mutex
	w   *allocwatch.Watcher
	err error
	// last is the latest snapshot the watcher delivered, nil before the
	// first: the metrics read their holders' labels from it.
	last atomic.Pointer[model.Snapshot]
}

var _ hooks.Allocs = (*lazyWatcher)(nil)

var errNoWatcher = errors.New("the Nomad allocation watcher is not running yet")

func (l *lazyWatcher) get() (*allocwatch.Watcher, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		if l.err != nil {
			return nil, errors.Join(errNoWatcher, l.err)
		}
		return nil, errNoWatcher
	}
	return l.w, nil
}

func (l *lazyWatcher) Refresh(ctx context.Context) (model.Snapshot, error) {
	w, err := l.get()
	if err != nil {
		return model.Snapshot{}, err
	}
	return w.Refresh(ctx)
}

func (l *lazyWatcher) Lookup(ctx context.Context, id string) (model.Alloc, bool, error) {
	w, err := l.get()
	if err != nil {
		return model.Alloc{}, false, err
	}
	return w.Lookup(ctx, id)
}

func (l *lazyWatcher) RunningLocally(ctx context.Context, id string) (bool, error) {
	w, err := l.get()
	if err != nil {
		return false, err
	}
	return w.RunningLocally(ctx, id)
}

// latest is the watcher's latest snapshot, nil before the first (or
// without a watcher).
func (l *lazyWatcher) latest() *model.Snapshot {
	if l == nil {
		return nil
	}
	return l.last.Load()
}

// watcherRetry paces attempts to create the watcher.
const watcherRetry = 10 * time.Second

// run creates the watcher, retrying until its configuration's files are
// readable, then feeds every snapshot to onSnapshot until ctx ends. obs
// (may be nil) hears of its failed queries.
func (l *lazyWatcher) run(ctx context.Context, cfg allocwatch.Config, logger hclog.Logger, onSnapshot func(model.Snapshot), obs allocwatch.Observer) {
	logged := false
	for {
		w, err := allocwatch.New(cfg, logger)
		if err == nil {
			if obs != nil {
				w.SetObserver(obs)
			}
			l.mu.Lock()
			l.w, l.err = w, nil
			l.mu.Unlock()
			if logged {
				logger.Info("allocation watcher started")
			}
			_ = w.Run(ctx, func(s model.Snapshot) {
				l.last.Store(&s)
				onSnapshot(s)
			})
			return
		}
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		if !logged {
			logger.Error("cannot start the allocation watcher; slots will not be released or handed out until it starts", "error", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(watcherRetry):
		}
	}
}

var _ hooks.Cluster = (*lazyWatcher)(nil)

// Nodes implements hooks.Cluster: the watcher's, once it runs.
func (l *lazyWatcher) Nodes(ctx context.Context) ([]nomadapi.NodeStub, error) {
	w, err := l.get()
	if err != nil {
		return nil, err
	}
	return w.Nodes(ctx)
}

// Loss implements hooks.Cluster: the watcher's, once it runs.
func (l *lazyWatcher) Loss(ctx context.Context, id string) (model.LostAlloc, error) {
	w, err := l.get()
	if err != nil {
		return model.LostAlloc{}, err
	}
	return w.Loss(ctx, id)
}

// NodeAllocations implements hooks.Cluster: the watcher's, once it runs.
func (l *lazyWatcher) NodeAllocations(ctx context.Context, node string) ([]model.Alloc, error) {
	w, err := l.get()
	if err != nil {
		return nil, err
	}
	return w.NodeAllocations(ctx, node)
}
