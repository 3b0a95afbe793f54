package allocwatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/pause"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// Watcher watches this node's allocations. Run is its long-running part;
// Refresh, Lookup, RunningLocally and Requests are safe to call from other
// goroutines at any time, including while Run runs.
type Watcher struct {
	cfg    Config
	logger hclog.Logger
	src    source

	// Knobs that tests shorten; New sets the production values.
	backoff     func(attempt int) time.Duration
	resyncEvery time.Duration
	now         func() time.Time
	// sleep is Run's pause between queries and before a retry.
	sleep func(ctx context.Context, d time.Duration) error

	// obs hears of the blocking query's failures and index resets
	// (SetObserver).
	obs Observer

	mu     sync.Mutex
	nodeID string // discovered and confirmed registered; "" until then
	// handed is the newest snapshot handed out, by Run or Refresh (by At):
	// what the caller holds as the newest (the Manager keeps the newest it
	// got). Run delivers an answer whose content differs from it.
	handed model.Snapshot

	refreshes refreshes
}

// New validates cfg and builds a Watcher. It makes no request: the agent's
// HTTP API starts after its plugins, so Run discovers and retries.
func New(cfg Config, logger hclog.Logger) (*Watcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	logger = logger.Named("allocwatch")
	// It logs how it reaches the agent: once per watcher, as the plugin
	// retries New until it succeeds.
	client, err := nomadapi.New(cfg.Config, logger)
	if err != nil {
		return nil, err
	}
	return newWatcher(cfg.withDefaults(), logger, client), nil
}

// newWatcher wires a Watcher to any source; cfg must have its defaults.
func newWatcher(cfg Config, logger hclog.Logger, src source) *Watcher {
	return &Watcher{
		cfg:         cfg,
		logger:      logger,
		src:         src,
		backoff:     backoff,
		resyncEvery: ResyncEvery,
		now:         time.Now,
		obs:         nopObserver{},
		sleep:       pause.For,
	}
}

// Observer hears what the watcher's log says only on a change: each failed
// blocking query, by the kind of failure (Reason), and each time the index
// went backwards and the watcher started over. The metrics endpoint counts
// them; methods must return at once.
type Observer interface {
	QueryFailed(reason string)
	IndexReset()
}

// SetObserver makes o hear of Run's failures and index resets; call it
// before Run.
func (w *Watcher) SetObserver(o Observer) {
	if o == nil {
		o = nopObserver{}
	}
	w.obs = o
}

type nopObserver struct{}

func (nopObserver) QueryFailed(string) {}
func (nopObserver) IndexReset()        {}

// SetClock replaces the watcher's clock and Run's pause (between two
// queries, and before a retry), so that a simulation can run Run in
// simulated time. Call it before any other method.
func (w *Watcher) SetClock(now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) {
	w.now, w.sleep = now, sleep
}

// Run blocks on GET /v1/node/<id>/allocations until ctx ends, and returns
// ctx.Err(). It calls onSnapshot synchronously, from Run's goroutine, with
// the first successful answer, then with every answer whose content differs
// from the last one delivered, and with an unchanged one at least every
// ResyncEvery. An error is never delivered: after one, Run backs off
// (jittered, 1s doubling to 1m, reset by any success) and retries, logging
// only when the API's condition changes. It first discovers the node ID
// and confirms the node is registered, retrying the same way, and it
// re-confirms the node before delivering an empty list after a non-empty
// one (Nomad lists nothing, with 200, for a node it does not know).
//
// The index only steers the next query (nextWaitIndex); delivery depends
// on content alone, so an answer at the same index whose list changed (an
// allocation GC'd, seen when the wait times out) is delivered too.
//
// Run must not be called again before an earlier call has returned.
func (w *Watcher) Run(ctx context.Context, onSnapshot func(model.Snapshot)) error {
	if onSnapshot == nil {
		return errors.New("allocwatch: Run needs an onSnapshot callback")
	}
	health := newHealth(w.logger)
	nodeID, err := w.discoverLoop(ctx, health)
	if err != nil {
		return err
	}
	var (
		waitIndex uint64
		last      model.Snapshot
		lastAt    time.Time
		delivered bool
		attempt   int
		nextQuery time.Time
		timedOut  bool
	)
	for {
		if err := w.sleep(ctx, nextQuery.Sub(w.now())); err != nil {
			return err
		}
		nextQuery = w.now().Add(w.cfg.MinInterval)
		wait := w.cfg.WaitTime
		if delivered {
			wait = blockingWait(w.cfg.WaitTime, w.resyncEvery-w.now().Sub(lastAt), w.cfg.MinInterval)
		}

		snap, err := w.fetch(ctx, nodeID, waitIndex, wait, len(last.Allocs) > 0)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			attempt++
			waitIndex = waitIndexAfterFailure
			health.failed(err, attempt)
			w.obs.QueryFailed(Reason(err))
			if err := w.sleep(ctx, w.backoff(attempt)); err != nil {
				return err
			}
			continue
		}
		health.ok()
		attempt = 0

		prev := waitIndex
		waitIndex, timedOut = nextWaitIndex(waitIndex, snap.Index)
		if snap.Index < prev {
			w.logger.Debug("index went backwards; starting over", "wait_index", prev, "index", snap.Index)
			w.obs.IndexReset()
		}
		changed := !delivered || !sameContent(snap, w.newestHanded())
		if !shouldDeliver(delivered, changed, w.now().Sub(lastAt), w.resyncEvery) {
			w.logger.Trace("answer unchanged", "index", snap.Index, "timed_out", timedOut)
			continue
		}
		if changed {
			// Where a slow release's time went: between a task's end and
			// this line, Nomad (the client's report, the servers'
			// answer); after it, the plugin.
			w.logger.Debug("allocations changed", "index", snap.Index, "allocs", len(snap.Allocs))
		}
		last, lastAt, delivered = cloneSnapshot(snap), snap.At, true
		w.noteHanded(last)
		onSnapshot(snap)
	}
}

// fetch makes one query and converts the answer. Nomad answers 200 with an
// empty list for a node it does not know (purged, state rebuilt), so an
// empty answer after a non-empty one counts only once the node is confirmed
// registered; otherwise it is an error.
func (w *Watcher) fetch(ctx context.Context, nodeID string, waitIndex uint64, wait time.Duration, hadAllocs bool) (model.Snapshot, error) {
	allocs, index, err := w.src.NodeAllocations(ctx, nodeID, waitIndex, wait)
	if err != nil {
		return model.Snapshot{}, err
	}
	snap := newSnapshot(nodeID, index, allocs, w.now())
	if len(snap.Allocs) == 0 && hadAllocs {
		if _, err := w.src.Node(ctx, nodeID); err != nil {
			return model.Snapshot{}, err
		}
	}
	return snap, nil
}

// Refresh returns the snapshot of a non-blocking query that began after
// the call: Reserve's fresh answer, to decide who calls it. Calls made
// while a query runs share the next one (refreshes). It discovers the node
// ID once if Run has not yet, without retrying.
func (w *Watcher) Refresh(ctx context.Context) (model.Snapshot, error) {
	return w.refreshes.do(ctx, w.refresh)
}

// refresh makes one non-blocking query now and returns its snapshot.
func (w *Watcher) refresh(ctx context.Context) (model.Snapshot, error) {
	nodeID, err := w.discover(ctx)
	if err != nil {
		return model.Snapshot{}, err
	}
	allocs, index, err := w.src.NodeAllocations(ctx, nodeID, 0, 0)
	if err != nil {
		return model.Snapshot{}, err
	}
	snap := newSnapshot(nodeID, index, allocs, w.now())
	w.noteHanded(cloneSnapshot(snap))
	return snap, nil
}

// noteHanded records s as handed out, if it is the newest.
func (w *Watcher) noteHanded(s model.Snapshot) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !s.At.Before(w.handed.At) {
		w.handed = s
	}
}

// newestHanded is what Run compares an answer with: the newest snapshot
// handed out, Run's last delivery or a later Refresh's answer. A Refresh
// may show what Run never saw (an allocation placed and gone between two
// of its answers, or while its query waited on an index the servers no
// longer reach); an answer that drops it again must reach the caller,
// though Run delivered the same before.
func (w *Watcher) newestHanded() model.Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.handed
}

// Lookup reads one allocation from the servers, the cross-check before
// anything is destroyed. found is false only on a definite 404 "alloc not
// found" (never placed, or garbage-collected). An allocation the token may
// not read is an error wrapping nomadapi.ErrPermissionDenied, never "not
// found".
func (w *Watcher) Lookup(ctx context.Context, allocID string) (a model.Alloc, found bool, err error) {
	if !nomadapi.IsUUID(allocID) {
		return model.Alloc{}, false, fmt.Errorf("allocation ID %q is not a UUID", allocID)
	}
	al, err := w.src.Allocation(ctx, allocID)
	switch {
	case errors.Is(err, nomadapi.ErrAllocNotFound):
		return model.Alloc{}, false, nil
	case err != nil:
		return model.Alloc{}, false, err
	}
	return convertAlloc(al), true, nil
}

// RunningLocally asks the local client, through GET
// /v1/client/allocation/<id>/stats, whether it still has the allocation.
// It is for `lost` allocations: release only once it says false.
//
// false means the client definitely has no runner for it (404 `Unknown
// allocation`). true means the client still has one: running, or finished
// and not yet garbage-collected by the servers — Nomad 1.11.3 answers 200
// for a completed allocation until the servers GC it, even after a
// client-side GC. Combine with the task states the client reported (Alloc.TaskStates)
// to see that it has stopped. Anything else (403, unreachable) is an error.
func (w *Watcher) RunningLocally(ctx context.Context, allocID string) (bool, error) {
	if !nomadapi.IsUUID(allocID) {
		return false, fmt.Errorf("allocation ID %q is not a UUID", allocID)
	}
	err := w.src.AllocationStats(ctx, allocID)
	switch {
	case errors.Is(err, nomadapi.ErrUnknownAlloc):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// Requests returns the number of HTTP requests made so far, by kind:
// node_allocations, node, agent_self, allocation, client_allocation_stats.
// A retry after a token change counts as a request.
func (w *Watcher) Requests() map[string]uint64 { return w.src.Requests() }
