package allocwatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// gatedFetch is a Refresh request that records its start and waits for
// its turn; the snapshot it answers carries its number as Index.
type gatedFetch struct {
	mu      sync.Mutex
	started int
	startCh chan int
	release chan struct{}
}

func (g *gatedFetch) fetch(ctx context.Context) (model.Snapshot, error) {
	g.mu.Lock()
	g.started++
	n := g.started
	g.mu.Unlock()
	g.startCh <- n
	if err := ctx.Err(); err != nil {
		return model.Snapshot{}, err // as an HTTP request on a context already done
	}
	select {
	case <-g.release:
		return model.Snapshot{Index: uint64(n)}, nil
	case <-ctx.Done():
		return model.Snapshot{}, ctx.Err()
	}
}

// TestRefreshJoinsOnlyARequestNotYetStarted: calls made while a request
// runs never get its answer (it may predate them); they share one request
// that starts after it.
func TestRefreshJoinsOnlyARequestNotYetStarted(t *testing.T) {
	var r refreshes
	g := &gatedFetch{startCh: make(chan int, 16), release: make(chan struct{})}
	type result struct {
		caller int
		index  uint64
		err    error
	}
	results := make(chan result, 16)
	call := func(caller int) {
		s, err := r.do(t.Context(), g.fetch)
		results <- result{caller, s.Index, err}
	}
	go call(0)
	if n := <-g.startCh; n != 1 {
		t.Fatalf("first request numbered %d", n)
	}
	const joiners = 5
	for i := 1; i <= joiners; i++ {
		go call(i)
	}
	// Let every joiner reach do while request 1 still runs.
	waitCond(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.queued != nil
	})
	time.Sleep(50 * time.Millisecond)
	close(g.release)
	if n := <-g.startCh; n != 2 {
		t.Fatalf("second request numbered %d", n)
	}
	for i := 0; i <= joiners; i++ {
		res := <-results
		switch {
		case res.err != nil:
			t.Fatalf("caller %d: %v", res.caller, res.err)
		case res.caller == 0 && res.index != 1:
			t.Fatalf("the first caller got request %d's answer, want 1", res.index)
		case res.caller > 0 && res.index != 2:
			t.Fatalf("caller %d, who came while request 1 ran, got request %d's answer, want 2", res.caller, res.index)
		}
	}
	select {
	case n := <-g.startCh:
		t.Fatalf("request %d: %d callers took more than two requests", n, joiners+1)
	default:
	}
}

// TestRefreshLeaderGivesUp: the call that leads a request gives up; those
// who joined it get an error, not a hang, and the next call asks again.
func TestRefreshLeaderGivesUp(t *testing.T) {
	var r refreshes
	g := &gatedFetch{startCh: make(chan int, 16), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() { _, err := r.do(t.Context(), g.fetch); first <- err }()
	<-g.startCh
	led := make(chan error, 1)
	go func() { _, err := r.do(ctx, g.fetch); led <- err }()
	waitCond(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.queued != nil
	})
	joined := make(chan error, 1)
	go func() { _, err := r.do(t.Context(), g.fetch); joined <- err }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	close(g.release)
	<-g.startCh
	if err := <-first; err != nil {
		t.Fatalf("first: %v", err)
	}
	if err := <-led; err == nil {
		t.Fatal("the leader that gave up got an answer")
	}
	if err := <-joined; err == nil {
		t.Fatal("a call that joined the abandoned request got an answer")
	}
	if s, err := r.do(t.Context(), g.fetch); err != nil || s.Index != 3 {
		t.Fatalf("the next call: index %d, %v; want a new request, 3", s.Index, err)
	}
}

func waitCond(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// blockingAllocs answers node allocation queries only when released,
// numbering them in Index.
type blockingAllocs struct {
	*scriptSource
	mu      sync.Mutex
	calls   int
	started chan struct{}
	release chan struct{}
}

func (b *blockingAllocs) NodeAllocations(ctx context.Context, _ string, _ uint64, _ time.Duration) ([]*api.Allocation, uint64, error) {
	b.mu.Lock()
	b.calls++
	n := b.calls
	b.mu.Unlock()
	b.started <- struct{}{}
	select {
	case <-b.release:
		return nil, uint64(n), nil
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

// TestWatcherRefreshesShareARequest: Reserves that ask while a refresh is
// under way share one query to Nomad.
func TestWatcherRefreshesShareARequest(t *testing.T) {
	src := &blockingAllocs{scriptSource: newScriptSource(newFakeClock()), started: make(chan struct{}, 16), release: make(chan struct{})}
	w := newWatcher(Config{NodeID: id(9)}.withDefaults(), testLogger(t, nil), src)
	var wg sync.WaitGroup
	refresh := func() {
		defer wg.Done()
		if _, err := w.Refresh(t.Context()); err != nil {
			t.Error(err)
		}
	}
	wg.Add(1)
	go refresh()
	<-src.started
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go refresh()
	}
	waitCond(t, func() bool {
		w.refreshes.mu.Lock()
		defer w.refreshes.mu.Unlock()
		return w.refreshes.queued != nil
	})
	time.Sleep(50 * time.Millisecond)
	close(src.release)
	wg.Wait()
	if src.calls != 2 {
		t.Fatalf("six Refresh calls, five of them during the first query, made %d queries; want 2", src.calls)
	}
}
