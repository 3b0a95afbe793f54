package sim

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// watchLoop runs the plugin's allocwatch.Watcher.Run, its blocking loop
// and index rules included, on a goroutine of its own, in lock step with
// the world: the world hands it the turn and takes it back when the
// watcher waits, in its pause between queries and before a retry (in
// simulated time, Watcher.SetClock) or in a blocking query, which the API
// holds until the node's allocations change past the query's index or its
// wait runs out (simulated too). Only one of the two runs at a time, and
// each turn starts from the same state, so a seed replays exactly.
type watchLoop struct {
	cancel context.CancelFunc
	done   chan struct{}
	// parks carries where the watcher waits, from its goroutine (a pause)
	// or the API's handler (a blocking query) to the world.
	parks chan *park
	// at is where it waits now; nil once Run returned.
	at *park
	// news is the last snapshot Run delivered, and whether it is new.
	news  model.Snapshot
	fresh bool
}

// park is one wait of the watcher.
type park struct {
	// until is when the pause ends, or the blocking query's wait runs out.
	until time.Time
	// index is the blocking query's index; 0 for a pause.
	index uint64
	// retry: a pause before a retry (after a failed query), not the short
	// one between two queries.
	retry bool
	wake  chan struct{}
}

// maxWatchTurns bounds the turns the watcher takes in one event: a loop
// that queries without ever waiting is a bug, not a busy node.
const maxWatchTurns = 50

// startWatch starts Run for plugin p and lets it go until it first waits:
// it discovers the node and delivers its first answer.
func (w *World) startWatch(p *plugin) *watchLoop {
	wl := &watchLoop{done: make(chan struct{}), parks: make(chan *park)}
	var ctx context.Context
	ctx, wl.cancel = context.WithCancel(context.Background())
	p.watcher.SetClock(func() time.Time { return w.now }, func(ctx context.Context, d time.Duration) error {
		return wl.pause(ctx, w.now, d)
	})
	w.mu.Lock()
	w.watching = wl
	w.mu.Unlock()
	go func() {
		defer close(wl.done)
		_ = p.watcher.Run(ctx, func(s model.Snapshot) {
			p.mgr.OnAllocs(s)
			wl.news, wl.fresh = s, true
		})
	}()
	w.takeTurn(wl, nil)
	return wl
}

// stopWatch ends Run and waits for it to return.
func (w *World) stopWatch(wl *watchLoop) {
	if wl == nil {
		return
	}
	wl.cancel()
	select {
	case <-wl.done:
	case <-time.After(time.Minute):
		w.violate("harness", "the watcher's Run did not return within a minute of its end")
	}
	wl.at = nil
}

// pause is the watcher's pause, on its goroutine: it waits for the world
// to hand it the turn once simulated time has reached its end. Backoff
// pauses are jittered (a random fifth off); they are rounded up to the
// next power of two seconds, which is their nominal length, so that the
// world's schedule does not depend on the jitter.
func (wl *watchLoop) pause(ctx context.Context, now time.Time, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	retry := d >= 750*time.Millisecond
	if retry {
		n := time.Second
		for n < d {
			n *= 2
		}
		d = n
	}
	p := &park{until: now.Add(d), retry: retry, wake: make(chan struct{})}
	select {
	case wl.parks <- p:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-p.wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// takeTurn hands the watcher the turn (wake, if it waits) and takes it
// back when it waits again or Run returned.
func (w *World) takeTurn(wl *watchLoop, wake chan struct{}) {
	if wake != nil {
		close(wake)
	}
	select {
	case wl.at = <-wl.parks:
	case <-wl.done:
		wl.at = nil
	case <-time.After(time.Minute):
		w.violate("harness", "the watcher neither waits nor returns")
		wl.cancel()
		wl.at = nil
	}
}

// pumpWatch lets the watcher go on while what it waits for has come, and
// returns the news it delivered meanwhile, if any.
func (w *World) pumpWatch(wl *watchLoop) (model.Snapshot, bool) {
	for turns := 0; wl.at != nil && w.due(wl.at); turns++ {
		if turns == maxWatchTurns {
			w.violate("liveness", "the watcher queried %d times in one event without waiting", maxWatchTurns)
			break
		}
		w.takeTurn(wl, wl.at.wake)
	}
	news, fresh := wl.news, wl.fresh
	wl.fresh = false
	return news, fresh
}

// due reports whether what the watcher waits for has come: its pause is
// over, or its blocking query has an answer: the wait ran out, the
// allocations changed past its index, or the query fails (agent down, or
// cut off from its servers).
func (w *World) due(p *park) bool {
	if !w.now.Before(p.until) {
		return true
	}
	if p.index == 0 {
		return false
	}
	f := w.faults()
	return f.now.Before(f.downTill) || !f.connected || w.api.index(f) > p.index
}

// watchStalled reports whether the plugin has yet to see the node as it
// is, though nothing it waits for is due: its watcher pauses before a
// retry (its backoff reaches a minute), or blocks on an index the servers
// no longer reach, or on one while the node's allocations differ from the
// newest snapshot the plugin got (Run's or a Reserve's refresh): after the
// servers' state started over, or the newest allocation was collected,
// the query returns only when its wait runs out.
func (w *World) watchStalled() bool {
	if w.plugin == nil || w.plugin.watch == nil || w.plugin.watch.at == nil {
		return false
	}
	p := w.plugin.watch.at
	if p.retry && w.now.Before(p.until) {
		return true
	}
	if p.index == 0 || w.due(p) {
		return false
	}
	if p.index > w.api.index(w.faults()) {
		return true // until its wait runs out, and the next query starts over
	}
	seen := w.plugin.watch.news
	if r := w.plugin.refreshed; r.At.After(seen.At) {
		seen = r
	}
	return contentOf(seen) != w.nodeContent()
}

// contentOf is a snapshot's allocations and their statuses, in order.
func contentOf(s model.Snapshot) string {
	var b strings.Builder
	for _, a := range s.Allocs {
		fmt.Fprintf(&b, "%s:%s:%s ", a.ID, a.ClientStatus, a.DesiredStatus)
	}
	return b.String()
}

// nodeContent is contentOf what the node's allocations answer would show
// the token now.
func (w *World) nodeContent() string {
	f := w.faults()
	var allocs []model.Alloc
	for _, sa := range w.cluster.Allocs(nodeID) {
		if f.now.Before(f.forbidTill) && sa.Namespace == hiddenNS {
			continue
		}
		allocs = append(allocs, model.Alloc{ID: sa.ID, ClientStatus: sa.ClientStatus, DesiredStatus: sa.DesiredStatus})
	}
	sort.Slice(allocs, func(i, j int) bool { return allocs[i].ID < allocs[j].ID })
	return contentOf(model.Snapshot{Allocs: allocs})
}
