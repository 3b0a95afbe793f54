package allocwatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

var (
	errRefused  = errors.New(`Get "http://127.0.0.1:4646/v1/node/x/allocations": dial tcp 127.0.0.1:4646: connect: connection refused`)
	errNoLeader = errors.New("Unexpected response code: 500 (No cluster leader)")
)

// scripted builds a watcher of node id(9) over src, with a recording
// backoff that does not sleep.
func scripted(t *testing.T, src *scriptSource, cfg Config) (*Watcher, *[]int) {
	t.Helper()
	if cfg.NodeID == "" && cfg.ClientIDFile == "" {
		cfg.NodeID = id(9)
	}
	cfg.MinInterval = time.Microsecond
	w := newWatcher(cfg.withDefaults(), testLogger(t, nil), src)
	w.now = src.clock.Now
	var mu sync.Mutex
	attempts := &[]int{}
	w.backoff = func(n int) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		*attempts = append(*attempts, n)
		return 0
	}
	return w, attempts
}

// runScript runs w until src's script is used up, then cancels it, and
// returns the delivered snapshots and Run's error.
func runScript(t *testing.T, w *Watcher, src *scriptSource) ([]model.Snapshot, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []model.Snapshot // written by Run's goroutine, read after it returned
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx, func(s model.Snapshot) { got = append(got, s) }) }()
	select {
	case <-src.done:
	case err := <-errc:
		t.Fatalf("Run returned early: %v", err)
	case <-time.After(testTimeout):
		t.Fatalf("script not used up within %s; queries so far: %+v", testTimeout, src.recorded())
	}
	cancel()
	select {
	case err := <-errc:
		return got, err
	case <-time.After(testTimeout):
		t.Fatalf("Run did not return within %s of cancel", testTimeout)
		return nil, nil
	}
}

func TestRunIndexAndDeliveryRules(t *testing.T) {
	t.Parallel()
	a1 := []*api.Allocation{apiAlloc(1, "pending")}
	a1run := []*api.Allocation{apiAlloc(1, "running")}
	a12 := []*api.Allocation{apiAlloc(1, "running"), apiAlloc(2, "pending")}

	cases := []struct {
		name          string
		steps         []step
		wantWaits     []uint64 // waitIndex of each query, incl. the final idle one
		wantDelivered []uint64 // index of each delivered snapshot
		wantCounts    []int    // allocation count of each delivered snapshot
		wantFailed    []string // the Observer's failures, by reason
		wantResets    int      // the Observer's index resets
	}{
		{
			name:          "first answer always delivered, even empty",
			steps:         []step{{index: 5}},
			wantWaits:     []uint64{0, 5},
			wantDelivered: []uint64{5},
			wantCounts:    []int{0},
		},
		{
			name:          "higher index with new content delivers",
			steps:         []step{{allocs: a1, index: 5}, {allocs: a1run, index: 8}, {allocs: a12, index: 11}},
			wantWaits:     []uint64{0, 5, 8, 11},
			wantDelivered: []uint64{5, 8, 11},
			wantCounts:    []int{1, 1, 2},
		},
		{
			name:          "same index re-blocks without delivering",
			steps:         []step{{allocs: a1, index: 5}, {allocs: a1, index: 5}, {allocs: a1, index: 5}},
			wantWaits:     []uint64{0, 5, 5, 5},
			wantDelivered: []uint64{5},
			wantCounts:    []int{1},
		},
		{
			name:          "higher index, same content (hidden namespace changed): dropped",
			steps:         []step{{allocs: a1, index: 5}, {allocs: a1, index: 9}},
			wantWaits:     []uint64{0, 5, 9},
			wantDelivered: []uint64{5},
			wantCounts:    []int{1},
		},
		{
			name:          "lower index resets to 0, its changed content delivered",
			steps:         []step{{allocs: a12, index: 20}, {allocs: a1run, index: 12}, {allocs: a1run, index: 12}},
			wantWaits:     []uint64{0, 20, 0, 12},
			wantDelivered: []uint64{20, 12},
			wantCounts:    []int{2, 1},
			wantResets:    1,
		},
		{
			name:          "same index at timeout with an allocation GC'd: delivered",
			steps:         []step{{allocs: a12, index: 20}, {allocs: a1run, index: 20}},
			wantWaits:     []uint64{0, 20, 20},
			wantDelivered: []uint64{20, 20},
			wantCounts:    []int{2, 1},
		},
		{
			name:          "errors never delivered as empty; the next query does not block",
			steps:         []step{{allocs: a1, index: 5}, {err: errRefused}, {err: errNoLeader}, {allocs: a1, index: 5}},
			wantWaits:     []uint64{0, 5, 0, 0, 5},
			wantDelivered: []uint64{5},
			wantCounts:    []int{1},
			wantFailed:    []string{ReasonUnreachable, ReasonUnreachable}, // errNoLeader is untyped here: see TestReason
		},
		{
			// Seed 5170958: 2 stopped and purged while the servers did not
			// answer; the deletion leaves the index where it was (1's
			// ModifyIndex), so a query blocked on 20 would wait it out.
			name:          "an allocation purged during an outage is seen at once",
			steps:         []step{{allocs: a12, index: 20}, {err: errRefused}, {allocs: a1run, index: 20}},
			wantWaits:     []uint64{0, 20, 0, 20},
			wantDelivered: []uint64{20, 20},
			wantCounts:    []int{2, 1},
			wantFailed:    []string{ReasonUnreachable},
		},
		{
			name:          "error before the first answer: nothing delivered until one",
			steps:         []step{{err: errRefused}, {allocs: a1, index: 5}},
			wantWaits:     []uint64{0, 0, 5},
			wantDelivered: []uint64{5},
			wantCounts:    []int{1},
			wantFailed:    []string{ReasonUnreachable},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := newScriptSource(newFakeClock(), tc.steps...)
			w, _ := scripted(t, src, Config{})
			obs := &recordingObserver{}
			w.SetObserver(obs)
			got, err := runScript(t, w, src)
			if !slices.Equal(obs.failed, tc.wantFailed) || obs.resets != tc.wantResets {
				t.Errorf("observer heard failures %v and %d resets, want %v and %d", obs.failed, obs.resets, tc.wantFailed, tc.wantResets)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
			var waits []uint64
			for _, q := range src.recorded() {
				waits = append(waits, q.waitIndex)
				if q.nodeID != id(9) {
					t.Errorf("query for node %s, want %s", q.nodeID, id(9))
				}
			}
			if !slices.Equal(waits, tc.wantWaits) {
				t.Errorf("wait indexes %v, want %v", waits, tc.wantWaits)
			}
			var idx []uint64
			var counts []int
			for _, s := range got {
				idx = append(idx, s.Index)
				counts = append(counts, len(s.Allocs))
				if s.NodeID != id(9) {
					t.Errorf("snapshot of node %s, want %s", s.NodeID, id(9))
				}
			}
			if !slices.Equal(idx, tc.wantDelivered) || !slices.Equal(counts, tc.wantCounts) {
				t.Errorf("delivered indexes %v with counts %v, want %v with %v", idx, counts, tc.wantDelivered, tc.wantCounts)
			}
		})
	}
}

func TestRunBackoffResetsAfterSuccess(t *testing.T) {
	t.Parallel()
	a := []*api.Allocation{apiAlloc(1, "running")}
	cases := []struct {
		name  string
		steps []step
		want  []int // the attempt numbers backoff was asked for
	}{
		{name: "no errors, no backoff", steps: []step{{allocs: a, index: 3}, {allocs: a, index: 3}}},
		{name: "grows while failing", steps: []step{{err: errRefused}, {err: errRefused}, {err: errNoLeader}, {allocs: a, index: 3}},
			want: []int{1, 2, 3}},
		{name: "a success resets it", steps: []step{{err: errRefused}, {err: errRefused}, {allocs: a, index: 3}, {err: errRefused}, {allocs: a, index: 3}, {err: errNoLeader}, {err: errNoLeader}},
			want: []int{1, 2, 1, 1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := newScriptSource(newFakeClock(), tc.steps...)
			w, attempts := scripted(t, src, Config{})
			if _, err := runScript(t, w, src); !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v", err)
			}
			if !slices.Equal(*attempts, tc.want) {
				t.Errorf("backoff attempts %v, want %v", *attempts, tc.want)
			}
		})
	}
}

func TestRunResync(t *testing.T) {
	t.Parallel()
	a := []*api.Allocation{apiAlloc(1, "running")}
	src := newScriptSource(newFakeClock(),
		step{allocs: a, index: 5},                           // t=0: first, delivered
		step{advance: 2 * time.Minute, allocs: a, index: 5}, // 2m: dropped
		step{advance: 2 * time.Minute, allocs: a, index: 5}, // 4m: dropped
		step{advance: time.Minute, allocs: a, index: 5},     // 5m: resync, delivered
		step{advance: time.Minute, allocs: a, index: 5},     // 1m after: dropped
		step{advance: 4 * time.Minute, allocs: a, index: 5}, // 5m after: delivered
	)
	w, _ := scripted(t, src, Config{WaitTime: 5 * time.Minute}) // Nomad's longest
	got, _ := runScript(t, w, src)
	var at []time.Duration
	for _, s := range got {
		at = append(at, s.At.Sub(newFakeClock().Now()))
	}
	if want := []time.Duration{0, 5 * time.Minute, 10 * time.Minute}; !slices.Equal(at, want) {
		t.Errorf("delivered at %v, want %v", at, want)
	}
	// The blocking wait shrinks so an idle node still resyncs on time.
	var waits []time.Duration
	for _, q := range src.recorded() {
		waits = append(waits, q.wait)
	}
	want := []time.Duration{5 * time.Minute, 5 * time.Minute, 3 * time.Minute, time.Minute, 5 * time.Minute, 4 * time.Minute, 5 * time.Minute}
	if !slices.Equal(waits, want) {
		t.Errorf("wait times %v, want %v", waits, want)
	}
}

func TestRunDiscovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	idFile := filepath.Join(dir, "client-id")
	if err := os.WriteFile(idFile, []byte(id(7)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	junkFile := filepath.Join(dir, "junk")
	if err := os.WriteFile(junkFile, []byte("not-an-id"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name         string
		cfg          Config
		agent        []idStep
		nodeErrs     []error
		wantNode     string
		wantAttempts []int
	}{
		{name: "config node ID", cfg: Config{NodeID: id(5)}, wantNode: id(5)},
		{name: "client ID file", cfg: Config{ClientIDFile: idFile}, wantNode: id(7)},
		{name: "agent self", agent: []idStep{{id: id(8)}}, wantNode: id(8)},
		{name: "agent API not up yet, then node not registered yet",
			agent:        []idStep{{err: errRefused}, {err: errRefused}, {id: id(8)}},
			nodeErrs:     []error{nomadapi.ErrNodeNotFound},
			wantNode:     id(8),
			wantAttempts: []int{1, 2, 3}},
		{name: "client ID file node not registered yet", cfg: Config{ClientIDFile: idFile},
			nodeErrs: []error{nomadapi.ErrNodeNotFound, nomadapi.ErrNodeNotFound}, wantNode: id(7), wantAttempts: []int{1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := newScriptSource(newFakeClock(), step{index: 3})
			src.agentSteps, src.nodeErrs = tc.agent, tc.nodeErrs
			cfg := tc.cfg // neither NodeID nor ClientIDFile: /v1/agent/self
			cfg.MinInterval = time.Microsecond
			w := newWatcher(cfg.withDefaults(), testLogger(t, nil), src)
			w.now = src.clock.Now
			var attempts []int // only Run's goroutine appends; read after it returned
			w.backoff = func(n int) time.Duration { attempts = append(attempts, n); return 0 }
			got, _ := runScript(t, w, src)
			if len(got) != 1 || got[0].NodeID != tc.wantNode {
				t.Fatalf("snapshots %+v, want one of node %s", got, tc.wantNode)
			}
			if q := src.recorded(); q[0].nodeID != tc.wantNode {
				t.Errorf("queried node %s, want %s", q[0].nodeID, tc.wantNode)
			}
			if !slices.Equal(attempts, tc.wantAttempts) {
				t.Errorf("backoff attempts %v, want %v", attempts, tc.wantAttempts)
			}
		})
	}

	t.Run("client ID file with junk keeps retrying", func(t *testing.T) {
		t.Parallel()
		src := newScriptSource(newFakeClock())
		w := newWatcher(Config{ClientIDFile: junkFile}.withDefaults(), testLogger(t, nil), src)
		var mu sync.Mutex
		n := 0
		w.backoff = func(int) time.Duration { mu.Lock(); n++; mu.Unlock(); return time.Millisecond }
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		err := w.Run(ctx, func(model.Snapshot) { t.Error("delivered without a node ID") })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run = %v, want context.DeadlineExceeded", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if n < 2 {
			t.Errorf("backoff asked %d times, want retries", n)
		}
	})
}

func TestRefreshDoesNotBlock(t *testing.T) {
	t.Parallel()
	src := newScriptSource(newFakeClock(), step{allocs: []*api.Allocation{apiAlloc(1, "running")}, index: 42})
	w, _ := scripted(t, src, Config{})
	s, err := w.Refresh(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Index != 42 || len(s.Allocs) != 1 || s.NodeID != id(9) {
		t.Errorf("Refresh = %s, want index 42 with one allocation", describe(s))
	}
	if q := src.recorded(); len(q) != 1 || q[0].waitIndex != 0 {
		t.Errorf("queries %+v, want one with wait index 0", q)
	}
}

func TestRefreshError(t *testing.T) {
	t.Parallel()
	src := newScriptSource(newFakeClock(), step{err: errRefused})
	w, _ := scripted(t, src, Config{})
	s, err := w.Refresh(context.Background())
	if !errors.Is(err, errRefused) || s.Allocs != nil {
		t.Errorf("Refresh = %s, %v; want no snapshot and the error", describe(s), err)
	}
}

func TestLookupAndRunningLocallyRejectBadIDs(t *testing.T) {
	t.Parallel()
	src := newScriptSource(newFakeClock())
	w, _ := scripted(t, src, Config{})
	for _, bad := range []string{"", "x/stop", "../../v1/jobs", id(1) + "/stats"} {
		t.Run(fmt.Sprintf("%q", bad), func(t *testing.T) {
			if _, found, err := w.Lookup(context.Background(), bad); err == nil || found {
				t.Errorf("Lookup(%q) = found %t, %v; want an error", bad, found, err)
			}
			if running, err := w.RunningLocally(context.Background(), bad); err == nil || running {
				t.Errorf("RunningLocally(%q) = %t, %v; want an error", bad, running, err)
			}
		})
	}
}

// TestRunConfirmsNodeBeforeEmptying: Nomad answers 200 [] for a node it does
// not know, so "all allocations gone" is delivered only once GET
// /v1/node/<id> confirms the node.
func TestRunConfirmsNodeBeforeEmptying(t *testing.T) {
	t.Parallel()
	a := []*api.Allocation{apiAlloc(1, "running")}
	cases := []struct {
		name          string
		nodeErrs      []error // after discovery's own check
		wantDelivered []int   // allocation counts
		wantAttempts  []int
	}{
		{name: "node confirmed: empty delivered", nodeErrs: nil, wantDelivered: []int{1, 0}},
		{name: "node unknown for a while: nothing delivered until confirmed",
			nodeErrs: []error{nomadapi.ErrNodeNotFound, errRefused}, wantDelivered: []int{1, 0}, wantAttempts: []int{1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := newScriptSource(newFakeClock(),
				step{allocs: a, index: 5}, step{index: 9}, step{index: 9}, step{index: 9})
			src.nodeErrs = append([]error{nil}, tc.nodeErrs...) // discovery, then the checks
			w, attempts := scripted(t, src, Config{})
			got, _ := runScript(t, w, src)
			var counts []int
			for _, s := range got {
				counts = append(counts, len(s.Allocs))
			}
			if !slices.Equal(counts, tc.wantDelivered) {
				t.Errorf("delivered counts %v, want %v", counts, tc.wantDelivered)
			}
			if !slices.Equal(*attempts, tc.wantAttempts) {
				t.Errorf("backoff attempts %v, want %v", *attempts, tc.wantAttempts)
			}
		})
	}
}

// recordingObserver records what Run reports; read after Run returned.
type recordingObserver struct {
	failed []string
	resets int
}

func (o *recordingObserver) QueryFailed(reason string) { o.failed = append(o.failed, reason) }
func (o *recordingObserver) IndexReset()               { o.resets++ }

// TestReason: the kinds of a failed query, as the metrics label them and
// the log words them.
func TestReason(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
		log  string
	}{
		{"refused", errRefused, ReasonUnreachable, "nomad API unreachable"},
		{"500", &nomadapi.StatusError{Code: 500, Body: "No cluster leader"}, ReasonServerError, "nomad API error"},
		{"404", &nomadapi.StatusError{Code: 404, Body: "x"}, ReasonClientError, "nomad API answered 404"},
		{"403", fmt.Errorf("%w: %w", nomadapi.ErrPermissionDenied, &nomadapi.StatusError{Code: 403, Body: "Permission denied"}), ReasonDenied, "nomad API denies the token"},
		{"node", fmt.Errorf("%w: %s", nomadapi.ErrNodeNotFound, id(1)), ReasonNotRegistered, "node not registered yet"},
		{"client id file", fmt.Errorf("%w: %w", errClientIDFile, os.ErrNotExist), ReasonClientIDFile, "client ID file not readable"},
		{"no client", errNoClientNode, ReasonNoClientNode, "agent reports no client node"},
		{"no index", nomadapi.ErrNoIndex, ReasonNoIndex, "nomad API answer without index"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Reason(tc.err); got != tc.want {
				t.Errorf("Reason = %q, want %q", got, tc.want)
			}
			if got := condition(tc.err); got != tc.log {
				t.Errorf("condition = %q, want %q", got, tc.log)
			}
		})
	}
}

// TestSetClockRunsRunInItsTime: with SetClock, Run's pauses (before a
// retry, and between queries) are the given sleep's, and its snapshots
// are stamped by the given clock: a simulation runs Run in its own time.
func TestSetClockRunsRunInItsTime(t *testing.T) {
	t.Parallel()
	a := []*api.Allocation{apiAlloc(1, "running")}
	clock := newFakeClock()
	src := newScriptSource(clock, step{err: errRefused}, step{allocs: a, index: 3})
	w, _ := scripted(t, src, Config{})
	w.backoff = func(int) time.Duration { return 3 * time.Second }
	var mu sync.Mutex
	var pauses []time.Duration
	start := clock.Now()
	w.SetClock(clock.Now, func(ctx context.Context, d time.Duration) error {
		if d <= 0 {
			return ctx.Err() // pause.For's contract: no wait at all
		}
		mu.Lock()
		pauses = append(pauses, d)
		mu.Unlock()
		clock.Advance(d)
		return ctx.Err()
	})
	got, err := runScript(t, w, src)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(pauses, 3*time.Second) {
		t.Errorf("pauses %v: the retry's backoff did not go through the given sleep", pauses)
	}
	if len(got) != 1 || !got[0].At.Equal(start.Add(3*time.Second)) {
		t.Fatalf("delivered %d snapshots, the first at %v; want one, at the given clock's %v", len(got), got, start.Add(3*time.Second))
	}
}
