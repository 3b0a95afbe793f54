package allocwatch

import (
	"context"
	"sync"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// refreshes coalesces Refresh calls. A caller needs an answer that Nomad
// gave after the call began, so it may join a request that has not started
// yet, never one already under way. While one request runs, every call
// that arrives joins the one queued to start after it: a burst of task
// starts (a job's allocations placed together, each Reserve asking who
// calls) costs two requests, not one each. Each answer decodes every
// allocation on the node, the plugin's largest cost under churn.
type refreshes struct {
	mu sync.Mutex
	// running is the request under way, begun before any call now waiting
	// on queued.
	running *refreshCall
	// queued starts when running ends; its leader started it waiting.
	queued *refreshCall
}

type refreshCall struct {
	done chan struct{}
	snap model.Snapshot
	err  error
}

// do returns the answer of a request that began after do was called: one
// it starts, or one it joins that had not started when it joined. fetch
// runs under the context of the call that leads the request; if that call
// gives up, the request fails for those who joined it, who may ask again.
func (r *refreshes) do(ctx context.Context, fetch func(context.Context) (model.Snapshot, error)) (model.Snapshot, error) {
	r.mu.Lock()
	if c := r.queued; c != nil {
		r.mu.Unlock()
		return c.wait(ctx)
	}
	c := &refreshCall{done: make(chan struct{})}
	ahead := r.running
	if ahead != nil {
		r.queued = c
	} else {
		r.running = c
	}
	r.mu.Unlock()

	if ahead != nil {
		// Bounded by the request's own timeout, so those who join c are
		// never left waiting for a leader that gave up.
		<-ahead.done
		r.mu.Lock()
		r.running, r.queued = c, nil
		r.mu.Unlock()
	}
	c.snap, c.err = fetch(ctx)
	r.mu.Lock()
	if r.running == c {
		r.running = nil
	}
	r.mu.Unlock()
	close(c.done)
	return c.snap, c.err
}

func (c *refreshCall) wait(ctx context.Context) (model.Snapshot, error) {
	select {
	case <-c.done:
		return c.snap, c.err
	case <-ctx.Done():
		return model.Snapshot{}, ctx.Err()
	}
}
