package allocwatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadfake"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// overHTTP builds a watcher of f through the real nomad/api client, with
// fast retries.
func overHTTP(t *testing.T, f *nomadfake.Server, cfg Config, logs *logBuffer) *Watcher {
	t.Helper()
	cfg.Address = f.URL()
	if cfg.MinInterval == 0 {
		cfg.MinInterval = time.Millisecond
	}
	if cfg.WaitTime == 0 {
		cfg.WaitTime = 5 * time.Second
	}
	w, err := New(cfg, testLogger(t, logs))
	if err != nil {
		t.Fatal(err)
	}
	w.backoff = func(n int) time.Duration { return time.Duration(n) * 10 * time.Millisecond }
	return w
}

func TestHTTPRunFollowsAllocations(t *testing.T) {
	t.Parallel()
	f := nomadfake.New(t, id(9))
	w := overHTTP(t, f, Config{}, nil)
	snaps, stop := runWatcher(t, w)

	first := next(t, snaps, "the first, empty answer", func(model.Snapshot) bool { return true })
	if first.NodeID != id(9) || len(first.Allocs) != 0 || first.Index == 0 {
		t.Errorf("first snapshot %s of node %s, want empty of %s", describe(first), first.NodeID, id(9))
	}

	f.Upsert(apiAlloc(1, "pending",
		withDevice("db", "zfs", "dataset", "fast", "fast-2"),
		withDevice("web", "zfs", "dataset", "slow", "slow-1")))
	s := next(t, snaps, "alloc 1 pending", func(s model.Snapshot) bool { return statusOf(s, id(1)) == "pending" })
	a := s.Allocs[0]
	if !a.HoldsDevice("zfs", "dataset", "fast-2") || !a.HoldsDevice("zfs", "dataset", "slow-1") || a.JobType != "service" {
		t.Errorf("pending alloc %+v: want both devices and job type service", a)
	}

	for _, status := range []string{"running", "complete"} {
		f.SetStatus(id(1), status)
		next(t, snaps, "alloc 1 "+status, func(s model.Snapshot) bool { return statusOf(s, id(1)) == status })
	}
	f.GC(id(1))
	next(t, snaps, "alloc 1 gone", func(s model.Snapshot) bool { return len(s.Allocs) == 0 })

	// Let the next query reach the fake before stopping, so both counts
	// include it.
	for deadline := time.Now().Add(testTimeout); f.Requests(nomadapi.KindNodeAllocations) < int(w.Requests()[nomadapi.KindNodeAllocations]); {
		if time.Now().After(deadline) {
			t.Fatal("the watcher's last query never reached the fake")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	// One query per change plus the first; the queries blocked in between.
	waits := f.WaitIndexes()
	if len(waits) < 5 || waits[0] != 0 || waits[1] == 0 {
		t.Errorf("wait indexes %v: want a non-blocking first query, then blocking ones", waits)
	}
	// Requests counts exactly what the fake saw, but for one query made
	// after the wait above (a blocked query can return with nothing new)
	// that the stop cancelled before it reached the fake.
	for kind, n := range f.RequestCounts() {
		got := w.Requests()[kind]
		if got != uint64(n) && (kind != nomadapi.KindNodeAllocations || got != uint64(n)+1) {
			t.Errorf("Requests()[%s] = %d, fake saw %d", kind, got, n)
		}
	}
}

func TestHTTPRunDropsDuplicatesAndWakeups(t *testing.T) {
	t.Parallel()
	f := nomadfake.New(t, id(9))
	// The token reads the default namespace only, from the start: a query
	// already blocked when the tokens changed would answer with what the
	// old token could see (CI: alloc 2 delivered).
	f.SetTokens(map[string]nomadfake.Token{"": {Node: true, Agent: true, ReadJob: []string{"default"}}})
	f.Upsert(apiAlloc(1, "running"))
	w := overHTTP(t, f, Config{}, nil)
	snaps, _ := runWatcher(t, w)
	next(t, snaps, "first", func(model.Snapshot) bool { return true })

	// A write that leaves this node's allocations alone keeps the query
	// blocked, as Nomad does; one in a namespace the token cannot see
	// raises the index and returns an unchanged list: nothing delivered.
	before := f.Requests(nomadapi.KindNodeAllocations)
	f.Touch()
	f.Upsert(apiAlloc(2, "running", inNamespace("hidden")))
	none(t, snaps, 300*time.Millisecond)
	if after := f.Requests(nomadapi.KindNodeAllocations); after <= before {
		t.Errorf("node allocation queries %d → %d: the writes should have woken the watcher", before, after)
	}
}

func TestHTTPDiscovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	idFile := filepath.Join(dir, "client-id")
	cases := []struct {
		name       string
		cfg        Config
		setup      func(f *nomadfake.Server) // state before Run
		later      func(f *nomadfake.Server) // applied after 200ms
		writeFile  bool                      // write the client-id file after 200ms
		wantAgent  bool                      // /v1/agent/self used
		wantRetrys bool
	}{
		{name: "node ID from config", cfg: Config{NodeID: id(9)}},
		{name: "client ID file", cfg: Config{ClientIDFile: idFile}, writeFile: true, wantRetrys: true},
		{name: "agent self", wantAgent: true},
		{name: "agent self, not a client yet", wantAgent: true, wantRetrys: true,
			setup: func(f *nomadfake.Server) { f.SetAgentNode("") },
			later: func(f *nomadfake.Server) { f.SetAgentNode(f.NodeID()) }},
		{name: "node registers late", cfg: Config{NodeID: id(9)}, wantRetrys: true,
			setup: func(f *nomadfake.Server) { f.SetRegistered(false) },
			later: func(f *nomadfake.Server) { f.SetRegistered(true) }},
		{name: "API down at start", wantAgent: true, wantRetrys: true,
			setup: func(f *nomadfake.Server) { f.SetFault(nomadfake.FaultReset, -1) },
			later: func(f *nomadfake.Server) { f.SetFault(nomadfake.FaultNone, 0) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Not parallel: the client-id case shares the file.
			f := nomadfake.New(t, id(9))
			f.Upsert(apiAlloc(1, "running"))
			if tc.setup != nil {
				tc.setup(f)
			}
			logs := &logBuffer{}
			w := overHTTP(t, f, tc.cfg, logs)
			snaps, _ := runWatcher(t, w)
			if tc.later != nil || tc.writeFile {
				none(t, snaps, 200*time.Millisecond)
				if tc.later != nil {
					tc.later(f)
				}
				if tc.writeFile {
					if err := os.WriteFile(idFile, []byte(id(9)+"\n"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			s := next(t, snaps, "the first answer", func(model.Snapshot) bool { return true })
			if s.NodeID != id(9) || len(s.Allocs) != 1 {
				t.Errorf("snapshot %s of node %s, want alloc 1 on %s", describe(s), s.NodeID, id(9))
			}
			if got := f.Requests(nomadapi.KindAgentSelf) > 0; got != tc.wantAgent {
				t.Errorf("agent self used: %t, want %t", got, tc.wantAgent)
			}
			if f.Requests(nomadapi.KindNode) == 0 {
				t.Error("node registration not confirmed")
			}
			// Waiting at start is normal: logged at Info, no warning.
			out := logs.String()
			if got := strings.Contains(out, "nomad API reachable: after="); got != tc.wantRetrys {
				t.Errorf("logged the wait's end: %t, want %t\n%s", got, tc.wantRetrys, out)
			}
			if strings.Contains(out, "[WARN]") || strings.Contains(out, "again") {
				t.Errorf("start-up wait logged as an outage:\n%s", out)
			}
		})
	}
}

// TestHTTPUnknownNode: the node allocations endpoint answers 200 with an
// empty list for a node that is not registered; that must never reach the
// lifecycle as "no allocations".
func TestHTTPUnknownNode(t *testing.T) {
	t.Parallel()
	f := nomadfake.New(t, id(9))
	f.Upsert(apiAlloc(1, "running"))
	w := overHTTP(t, f, Config{NodeID: id(8)}, nil)
	snaps, _ := runWatcher(t, w)
	none(t, snaps, 300*time.Millisecond)
	if n := f.Requests(nomadapi.KindNodeAllocations); n != 0 {
		t.Errorf("%d node allocation queries for an unregistered node, want 0", n)
	}
	if _, err := w.Refresh(context.Background()); !errors.Is(err, nomadapi.ErrNodeNotFound) {
		t.Errorf("Refresh = %v, want nomadapi.ErrNodeNotFound", err)
	}
}

func TestHTTPOutage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		fault   nomadfake.Fault
		wantLog string
	}{
		{name: "agent restarting: connection reset", fault: nomadfake.FaultReset, wantLog: "nomad API unreachable"},
		{name: "leader election: 500 No cluster leader", fault: nomadfake.FaultNoLeader, wantLog: "nomad API error"},
		{name: "answer without index", fault: nomadfake.FaultNoIndex, wantLog: "nomad API answer without index"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := nomadfake.New(t, id(9))
			f.Upsert(apiAlloc(1, "running"))
			logs := &logBuffer{}
			w := overHTTP(t, f, Config{NodeID: id(9)}, logs)
			snaps, stop := runWatcher(t, w)
			next(t, snaps, "first", func(model.Snapshot) bool { return true })

			f.SetFault(tc.fault, -1)
			f.SetStatus(id(1), "complete")
			// Several retries, none delivered: wait for the retries, not
			// for a fixed time a busy machine may not give them.
			before := f.Requests(nomadapi.KindNodeAllocations)
			deadline := time.Now().Add(30 * time.Second)
			for f.Requests(nomadapi.KindNodeAllocations) < before+3 && time.Now().Before(deadline) {
				none(t, snaps, 20*time.Millisecond)
			}
			failed := f.Requests(nomadapi.KindNodeAllocations)
			f.SetFault(nomadfake.FaultNone, 0)
			s := next(t, snaps, "alloc 1 complete", func(s model.Snapshot) bool { return statusOf(s, id(1)) == "complete" })
			if len(s.Allocs) != 1 {
				t.Errorf("after the outage: %s", describe(s))
			}
			stop()
			if failed < 3 {
				t.Errorf("only %d queries during the outage; want retries", failed)
			}
			out := logs.String()
			if n := strings.Count(out, tc.wantLog); n != 1 {
				t.Errorf("%q logged %d times, want once:\n%s", tc.wantLog, n, out)
			}
			if n := strings.Count(out, "nomad API reachable again"); n != 1 {
				t.Errorf("recovery logged %d times, want once:\n%s", n, out)
			}
		})
	}
}

func TestHTTPLookup(t *testing.T) {
	t.Parallel()
	f := nomadfake.New(t, id(9))
	f.Upsert(apiAlloc(1, "running", withDevice("db", "zfs", "dataset", "fast", "fast-1")))
	f.Upsert(apiAlloc(2, "running", inNamespace("hidden")))
	f.SetTokens(map[string]nomadfake.Token{
		"narrow": {Node: true, ReadJob: []string{"default"}},
	})
	w := overHTTP(t, f, Config{Config: nomadapi.Config{Token: "narrow"}, NodeID: id(9)}, nil)
	anon := overHTTP(t, f, Config{Config: nomadapi.Config{Token: "revoked"}, NodeID: id(9)}, nil)
	downF := nomadfake.New(t, id(9))
	downF.SetFault(nomadfake.FaultNoLeader, -1)
	noLeader := overHTTP(t, downF, Config{NodeID: id(9)}, nil)

	cases := []struct {
		name      string
		w         *Watcher
		allocID   string
		wantFound bool
		wantErr   error // nil: no error
		anyErr    bool
	}{
		{name: "found", w: w, allocID: id(1), wantFound: true},
		{name: "never existed or GC'd: 404 alloc not found", w: w, allocID: id(3)},
		{name: "namespace without read-job: 500 Unknown allocation is an error", w: w, allocID: id(2), wantErr: nomadapi.ErrPermissionDenied},
		{name: "revoked token: 403 is an error", w: anon, allocID: id(1), wantErr: nomadapi.ErrPermissionDenied},
		{name: "revoked token, unknown allocation: still an error", w: anon, allocID: id(3), wantErr: nomadapi.ErrPermissionDenied},
		{name: "no leader: an error", w: noLeader, allocID: id(1), anyErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, found, err := tc.w.Lookup(context.Background(), tc.allocID)
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("Lookup = %v, want %v", err, tc.wantErr)
			case tc.anyErr && err == nil:
				t.Error("Lookup = nil error, want one")
			case tc.wantErr == nil && !tc.anyErr && err != nil:
				t.Errorf("Lookup = %v", err)
			}
			if found != tc.wantFound {
				t.Errorf("found = %t, want %t", found, tc.wantFound)
			}
			if found && (a.ID != tc.allocID || !a.HoldsDevice("zfs", "dataset", "fast-1")) {
				t.Errorf("Lookup = %+v", a)
			}
		})
	}
}

func TestHTTPRunningLocally(t *testing.T) {
	t.Parallel()
	f := nomadfake.New(t, id(9))
	f.Upsert(apiAlloc(1, "running"))
	f.Upsert(apiAlloc(2, "running", inNamespace("hidden")))
	f.Upsert(apiAlloc(3, "lost"))
	f.SetLocal(id(3), false) // the client already dropped it
	f.SetTokens(map[string]nomadfake.Token{"narrow": {Node: true, ReadJob: []string{"default"}}})
	w := overHTTP(t, f, Config{Config: nomadapi.Config{Token: "narrow"}, NodeID: id(9)}, nil)
	downF := nomadfake.New(t, id(9))
	downF.SetFault(nomadfake.FaultReset, -1)
	down := overHTTP(t, downF, Config{NodeID: id(9)}, nil)

	cases := []struct {
		name        string
		w           *Watcher
		allocID     string
		wantRunning bool
		wantErr     error
		anyErr      bool
	}{
		{name: "the client has it", w: w, allocID: id(1), wantRunning: true},
		{name: "the client dropped it: 404 Unknown allocation", w: w, allocID: id(3)},
		{name: "never existed: 404 Unknown allocation", w: w, allocID: id(4)},
		{name: "namespace without read-job: 403", w: w, allocID: id(2), wantErr: nomadapi.ErrPermissionDenied},
		{name: "agent down", w: down, allocID: id(1), anyErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			running, err := tc.w.RunningLocally(context.Background(), tc.allocID)
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("RunningLocally = %v, want %v", err, tc.wantErr)
			case tc.anyErr && err == nil:
				t.Error("RunningLocally = nil error, want one")
			case tc.wantErr == nil && !tc.anyErr && err != nil:
				t.Errorf("RunningLocally = %v", err)
			}
			if running != tc.wantRunning {
				t.Errorf("running = %t, want %t", running, tc.wantRunning)
			}
		})
	}
}

// TestHTTPHiddenNamespace: a token without read-job in a namespace sees its
// allocations vanish from the list, without any error.
func TestHTTPHiddenNamespace(t *testing.T) {
	t.Parallel()
	f := nomadfake.New(t, id(9))
	f.Upsert(apiAlloc(1, "running"))
	f.Upsert(apiAlloc(2, "running", inNamespace("hidden")))
	f.SetTokens(map[string]nomadfake.Token{
		"all":    {Node: true, ReadJob: []string{"*"}},
		"narrow": {Node: true, ReadJob: []string{"default"}},
	})
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{name: "read-job everywhere", token: "all", want: 2},
		{name: "read-job in default only", token: "narrow", want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := overHTTP(t, f, Config{Config: nomadapi.Config{Token: tc.token}, NodeID: id(9)}, nil)
			s, err := w.Refresh(context.Background())
			if err != nil {
				t.Fatalf("Refresh = %v, want a (partial) snapshot", err)
			}
			if len(s.Allocs) != tc.want {
				t.Errorf("Refresh sees %s, want %d allocations", describe(s), tc.want)
			}
		})
	}
}

func TestHTTPTokenFile(t *testing.T) {
	t.Parallel()
	f := nomadfake.New(t, id(9))
	f.Upsert(apiAlloc(1, "running"))
	f.SetTokens(map[string]nomadfake.Token{"t2": {Node: true, Agent: true, ReadJob: []string{"*"}}})
	path := filepath.Join(t.TempDir(), "token")
	write := func(tok string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("t1")
	logs := &logBuffer{}
	w := overHTTP(t, f, Config{Config: nomadapi.Config{TokenFile: path}}, logs)

	// The file still holds the revoked token: a plain permission error.
	if _, err := w.Refresh(context.Background()); !errors.Is(err, nomadapi.ErrPermissionDenied) {
		t.Fatalf("Refresh with a revoked token = %v, want nomadapi.ErrPermissionDenied", err)
	}
	if n := w.Requests()[nomadapi.KindAgentSelf]; n != 1 {
		t.Errorf("%d agent self requests, want 1 (no retry when the file did not change)", n)
	}

	// Rotated: the 403 makes the watcher re-read the file and retry once.
	write("t2")
	if _, err := w.Refresh(context.Background()); err != nil {
		t.Fatalf("Refresh after rotation = %v", err)
	}
	if n := w.Requests()[nomadapi.KindAgentSelf]; n != 3 {
		t.Errorf("%d agent self requests, want 3", n)
	}

	// Rotated again while Run blocks: the next query gets a 403, re-reads
	// the file and carries on, with no backoff and nothing lost.
	var mu sync.Mutex
	backoffs := 0
	w.backoff = func(int) time.Duration { mu.Lock(); backoffs++; mu.Unlock(); return 10 * time.Millisecond }
	snaps, stop := runWatcher(t, w)
	next(t, snaps, "first", func(model.Snapshot) bool { return true })
	write("t3")
	f.SetTokens(map[string]nomadfake.Token{"t3": {Node: true, Agent: true, ReadJob: []string{"*"}}})
	// The query in flight was accepted with t2 and still answers; the one
	// after it meets the 403.
	f.SetStatus(id(1), "complete")
	next(t, snaps, "alloc 1 complete", func(s model.Snapshot) bool { return statusOf(s, id(1)) == "complete" })
	f.SetStatus(id(1), "failed")
	next(t, snaps, "alloc 1 failed", func(s model.Snapshot) bool { return statusOf(s, id(1)) == "failed" })
	stop()
	mu.Lock()
	defer mu.Unlock()
	if backoffs != 0 {
		t.Errorf("backed off %d times across a token rotation, want 0", backoffs)
	}
	if n := strings.Count(logs.String(), "token file changed"); n != 2 {
		t.Errorf("token change logged %d times, want 2:\n%s", n, logs)
	}
}

// TestHTTPNodePurged: the node vanishes from the servers while its list
// empties; the watcher waits for the node to be back before it says so.
func TestHTTPNodePurged(t *testing.T) {
	t.Parallel()
	f := nomadfake.New(t, id(9))
	f.Upsert(apiAlloc(1, "running"))
	w := overHTTP(t, f, Config{NodeID: id(9)}, nil)
	snaps, _ := runWatcher(t, w)
	next(t, snaps, "first", func(s model.Snapshot) bool { return len(s.Allocs) == 1 })

	f.SetRegistered(false)
	f.GC(id(1))
	none(t, snaps, 300*time.Millisecond)
	f.SetRegistered(true)
	next(t, snaps, "empty, once the node is back", func(s model.Snapshot) bool { return len(s.Allocs) == 0 })
}
