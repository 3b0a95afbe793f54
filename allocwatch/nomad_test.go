package allocwatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// Tests against a real Nomad agent (server and client in one process).
// They are skipped with -short; NDZ_SKIP_NOMAD=1 skips them too.

// agentTimeout bounds waits on the real agent: placement, task start, GC.
const agentTimeout = 90 * time.Second

func startAgent(t *testing.T, cfg nomadtest.Config) *nomadtest.Agent {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real Nomad agent; skipped with -short")
	}
	cfg.Binary = nomadtest.Binary(t)
	return nomadtest.Start(t, cfg)
}

// sleepJob is a raw_exec batch job in namespace ns that sleeps secs.
func sleepJob(name, ns string, secs int) string {
	return fmt.Sprintf(`
job %q {
  namespace = %q
  type      = "batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["%d"]
      }
    }
  }
}
`, name, ns, secs)
}

// clientIDFile is where the client writes its node ID: client.go nodeID()
// writes "<state_dir>/client-id", and state_dir defaults to
// "<data_dir>/client".
func clientIDFile(a *nomadtest.Agent) string {
	return filepath.Join(a.DataDir(), "client", "client-id")
}

// eventually polls f every 250ms until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// allocOf returns the allocations of job in ns as the management token
// sees them.
func allocsOf(t *testing.T, a *nomadtest.Agent, ns, job string) []*api.AllocationListStub {
	t.Helper()
	allocs, _, err := a.Client().Jobs().Allocations(job, true, &api.QueryOptions{Namespace: ns})
	if err != nil {
		t.Fatalf("listing allocations of %s/%s: %v", ns, job, err)
	}
	return allocs
}

func waitRunning(t *testing.T, a *nomadtest.Agent, ns, job string) string {
	t.Helper()
	var allocID string
	eventually(t, agentTimeout, ns+"/"+job+" running", func() error {
		allocs := allocsOf(t, a, ns, job)
		if len(allocs) == 1 && allocs[0].ClientStatus == api.AllocClientStatusRunning {
			allocID = allocs[0].ID
			return nil
		}
		return fmt.Errorf("%d allocations", len(allocs))
	})
	return allocID
}

func TestNomadDiscovery(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nomadtest.Config{})
	if b, err := os.ReadFile(clientIDFile(a)); err != nil || strings.TrimSpace(string(b)) != a.NodeID() {
		t.Fatalf("client-id file %s holds %q (%v), want %s", clientIDFile(a), b, err, a.NodeID())
	}
	cases := []struct {
		name      string
		cfg       Config
		wantAgent uint64 // /v1/agent/self requests
	}{
		{name: "client ID file", cfg: Config{ClientIDFile: clientIDFile(a)}},
		{name: "agent self", cfg: Config{}, wantAgent: 1},
		{name: "node ID from config", cfg: Config{NodeID: a.NodeID()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Address = a.Address()
			w, err := New(cfg, testLogger(t, nil))
			if err != nil {
				t.Fatal(err)
			}
			s, err := w.Refresh(context.Background())
			if err != nil {
				t.Fatalf("Refresh: %v", err)
			}
			if s.NodeID != a.NodeID() || s.Index == 0 {
				t.Errorf("snapshot of node %s at index %d, want node %s", s.NodeID, s.Index, a.NodeID())
			}
			if got := w.Requests()[nomadapi.KindAgentSelf]; got != tc.wantAgent {
				t.Errorf("%d agent self requests, want %d", got, tc.wantAgent)
			}
		})
	}
}

// TestNomadBatchJob follows a raw_exec batch job from placement to GC and
// records the agent's answers for the cross-checks.
func TestNomadBatchJob(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nomadtest.Config{})
	w, err := New(Config{Config: nomadapi.Config{Address: a.Address()}, ClientIDFile: clientIDFile(a), MinInterval: 100 * time.Millisecond}, testLogger(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	snaps, stop := runWatcher(t, w)
	next(t, snaps, "the first answer", func(model.Snapshot) bool { return true })

	a.RunJob(t, sleepJob("sleeper", "default", 8))
	var allocID string
	var seen []string
	running := nextWithin(t, snaps, agentTimeout, "the allocation running", func(s model.Snapshot) bool {
		if len(s.Allocs) == 1 {
			allocID = s.Allocs[0].ID
			if st := s.Allocs[0].ClientStatus; len(seen) == 0 || seen[len(seen)-1] != st {
				seen = append(seen, st)
			}
		}
		return statusOf(s, allocID) == api.AllocClientStatusRunning
	})
	if al := running.Allocs[0]; al.JobID != "sleeper" || al.JobType != "batch" || al.TaskStates["t"] != "running" || al.NodeID != a.NodeID() {
		t.Errorf("running allocation %+v", al)
	}
	if ok, err := w.RunningLocally(ctx, allocID); err != nil || !ok {
		t.Errorf("RunningLocally while running = %t, %v; want true", ok, err)
	}
	if al, found, err := w.Lookup(ctx, allocID); err != nil || !found || al.ID != allocID {
		t.Errorf("Lookup while running = %+v, %t, %v", al, found, err)
	}

	nextWithin(t, snaps, agentTimeout, "the allocation complete", func(s model.Snapshot) bool {
		if st := statusOf(s, allocID); st != "" && seen[len(seen)-1] != st {
			seen = append(seen, st)
		}
		return statusOf(s, allocID) == api.AllocClientStatusComplete
	})
	t.Logf("client statuses delivered: %v; requests so far: %v", seen, w.Requests())

	// Verified behaviour: the client keeps the runner of a finished
	// allocation, and its stats endpoint answers 200, until the servers
	// garbage-collect the allocation; a client-side GC does not change that.
	if ok, err := w.RunningLocally(ctx, allocID); err != nil || !ok {
		t.Errorf("RunningLocally after completion = %t, %v; Nomad 1.11.3 answers 200 until server GC", ok, err)
	}
	// The endpoint answers 200 with an empty body, which api decodes as EOF.
	if err := a.Client().Allocations().GC(&api.Allocation{ID: allocID}, nil); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("client GC: %v", err)
	}
	if ok, err := w.RunningLocally(ctx, allocID); err != nil || !ok {
		t.Errorf("RunningLocally after client GC = %t, %v; Nomad 1.11.3 still answers 200", ok, err)
	}

	if err := a.Client().System().GarbageCollect(); err != nil {
		t.Fatalf("system gc: %v", err)
	}
	eventually(t, agentTimeout, "Lookup after system gc says not found", func() error {
		_, found, err := w.Lookup(ctx, allocID)
		if err != nil || found {
			return fmt.Errorf("found %t, err %v", found, err)
		}
		return nil
	})
	eventually(t, agentTimeout, "RunningLocally after system gc says false", func() error {
		ok, err := w.RunningLocally(ctx, allocID)
		if err != nil || ok {
			return fmt.Errorf("running %t, err %v", ok, err)
		}
		return nil
	})
	nextWithin(t, snaps, agentTimeout, "the allocation gone", func(s model.Snapshot) bool { return statusOf(s, allocID) == "" })
	stop()

	// The exact answers the lifecycle relies on, for an ID never placed.
	unknown := "11111111-2222-3333-4444-555555555555"
	if _, found, err := w.Lookup(ctx, unknown); err != nil || found {
		t.Errorf("Lookup(unknown) = %t, %v; want not found", found, err)
	}
	if ok, err := w.RunningLocally(ctx, unknown); err != nil || ok {
		t.Errorf("RunningLocally(unknown) = %t, %v; want false", ok, err)
	}
	_, _, infoErr := a.Client().Allocations().Info(unknown, nil)
	_, statsErr := a.Client().Allocations().Stats(&api.Allocation{ID: unknown}, nil)
	for _, c := range []struct {
		what   string
		err    error
		status int
		body   string
	}{
		{"GET /v1/allocation/<unknown>", infoErr, 404, "alloc not found"},
		{"GET /v1/client/allocation/<unknown>/stats", statsErr, 404, fmt.Sprintf("Unknown allocation %q", unknown)},
	} {
		status, body := nomadapi.HTTPStatus(c.err)
		t.Logf("%s → %d %q", c.what, status, body)
		if status != c.status || body != c.body {
			t.Errorf("%s → %d %q, want %d %q", c.what, status, body, c.status, c.body)
		}
	}
}

// TestNomadAgentRestart: the agent goes away under a blocked query and comes
// back; Run backs off, logs the outage once, and resumes delivering.
func TestNomadAgentRestart(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nomadtest.Config{})
	logs := &logBuffer{}
	w, err := New(Config{Config: nomadapi.Config{Address: a.Address()}, ClientIDFile: clientIDFile(a), MinInterval: 100 * time.Millisecond}, testLogger(t, logs))
	if err != nil {
		t.Fatal(err)
	}
	snaps, stop := runWatcher(t, w)
	a.RunJob(t, sleepJob("long", "default", 600))
	allocID := waitRunning(t, a, "default", "long")
	nextWithin(t, snaps, agentTimeout, "the allocation running", func(s model.Snapshot) bool {
		return statusOf(s, allocID) == api.AllocClientStatusRunning
	})

	a.Restart(t)
	// The task survives the restart; stopping the job now must reach Run.
	a.StopJob(t, "long", false)
	s := nextWithin(t, snaps, 2*agentTimeout, "the allocation stopping or complete", func(s model.Snapshot) bool {
		for _, al := range s.Allocs {
			if al.ID == allocID && al.ServerTerminal() {
				return true
			}
		}
		return false
	})
	t.Logf("after restart: %s", describe(s))
	stop()

	out := logs.String()
	t.Logf("watcher log:\n%s", out)
	if n := strings.Count(out, "nomad API unreachable"); n != 1 {
		t.Errorf("%q logged %d times, want once", "nomad API unreachable", n)
	}
	if n := strings.Count(out, "nomad API reachable again"); n != 1 {
		t.Errorf("recovery logged %d times, want once", n)
	}
}

// TestNomadACL finds the least-privilege policy for everything the watcher
// does, and shows what a token without read-job in a namespace sees.
func TestNomadACL(t *testing.T) {
	t.Parallel()
	a := startAgent(t, nomadtest.Config{ACL: true})
	if _, err := a.Client().Namespaces().Register(&api.Namespace{Name: "hidden"}, nil); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	a.RunJob(t, sleepJob("visible", "default", 600))
	a.RunJob(t, sleepJob("secret", "hidden", 600))
	visible := waitRunning(t, a, "default", "visible")
	secret := waitRunning(t, a, "hidden", "secret")

	const (
		nodeRead  = `node { policy = "read" }` + "\n"
		agentRead = `agent { policy = "read" }` + "\n"
		readJob   = `namespace "*" { capabilities = ["read-job"] }` + "\n"
		nsRead    = `namespace "*" { policy = "read" }` + "\n"
		dfltOnly  = `namespace "default" { capabilities = ["read-job"] }` + "\n"
	)
	type outcome struct {
		discoverErr error // nil: Refresh works
		allocs      int   // allocations Refresh sees
		lookup      map[string]error
		running     map[string]error
	}
	both := map[string]error{visible: nil, secret: nil}
	cases := []struct {
		name     string
		policy   string
		agentIDs bool // discover through /v1/agent/self, else the client-id file
		want     outcome
	}{
		{name: "least privilege, client-id file: node read + read-job",
			policy: nodeRead + readJob, want: outcome{allocs: 2, lookup: both, running: both}},
		{name: "least privilege, agent self: node read + read-job + agent read",
			policy: nodeRead + readJob + agentRead, agentIDs: true, want: outcome{allocs: 2, lookup: both, running: both}},
		{name: "namespace policy read works as read-job",
			policy: nodeRead + nsRead, want: outcome{allocs: 2, lookup: both, running: both}},
		{name: "agent self without agent read: denied",
			policy: nodeRead + readJob, agentIDs: true, want: outcome{discoverErr: nomadapi.ErrPermissionDenied, lookup: both, running: both}},
		{name: "without node read: denied (Lookup and stats need only read-job)",
			policy: readJob, want: outcome{discoverErr: nomadapi.ErrPermissionDenied, lookup: both, running: both}},
		{name: "read-job in default only: hidden allocations vanish, cross-checks error",
			policy: nodeRead + dfltOnly, want: outcome{allocs: 1,
				lookup:  map[string]error{visible: nil, secret: nomadapi.ErrPermissionDenied},
				running: map[string]error{visible: nil, secret: nomadapi.ErrPermissionDenied}}},
		{name: "node read alone: every allocation vanishes, without error",
			policy: nodeRead, want: outcome{allocs: 0,
				lookup:  map[string]error{visible: nomadapi.ErrPermissionDenied, secret: nomadapi.ErrPermissionDenied},
				running: map[string]error{visible: nomadapi.ErrPermissionDenied, secret: nomadapi.ErrPermissionDenied}}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			token := a.CreateToken(t, fmt.Sprintf("watcher-%d", i), tc.policy)
			cfg := Config{Config: nomadapi.Config{Address: a.Address(), Token: token}}
			if !tc.agentIDs {
				cfg.ClientIDFile = clientIDFile(a)
			}
			w, err := New(cfg, testLogger(t, nil))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			s, err := w.Refresh(ctx)
			switch {
			case tc.want.discoverErr != nil:
				if !errors.Is(err, tc.want.discoverErr) {
					t.Errorf("Refresh = %v, want %v", err, tc.want.discoverErr)
				}
			case err != nil:
				t.Errorf("Refresh = %v", err)
			case len(s.Allocs) != tc.want.allocs:
				t.Errorf("Refresh sees %s, want %d allocations", describe(s), tc.want.allocs)
			}
			for allocID, want := range tc.want.lookup {
				al, found, err := w.Lookup(ctx, allocID)
				if !errors.Is(err, want) || (want == nil && (!found || al.ID != allocID)) || (want != nil && found) {
					t.Errorf("Lookup(%s) = found %t, %v; want error %v", allocID, found, err, want)
				}
				if err != nil {
					t.Logf("Lookup(%s): %v", allocID, err)
				}
			}
			for allocID, want := range tc.want.running {
				ok, err := w.RunningLocally(ctx, allocID)
				if !errors.Is(err, want) || ok != (want == nil) {
					t.Errorf("RunningLocally(%s) = %t, %v; want error %v", allocID, ok, err, want)
				}
				if err != nil {
					t.Logf("RunningLocally(%s): %v", allocID, err)
				}
			}
		})
	}

	t.Run("token file re-read after rotation", func(t *testing.T) {
		mgmt := a.Client()
		old, fresh, path := twoTokens(t, mgmt, "rotating", nodeRead+readJob)
		w, err := New(Config{Config: nomadapi.Config{Address: a.Address(), TokenFile: path}, ClientIDFile: clientIDFile(a)}, testLogger(t, nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Refresh(context.Background()); err != nil {
			t.Fatalf("Refresh with the first token: %v", err)
		}
		if _, err := mgmt.ACLTokens().Delete(old.AccessorID, nil); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(fresh.SecretID+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := w.Refresh(context.Background())
		if err != nil || len(s.Allocs) != 2 {
			t.Fatalf("Refresh after rotation = %s, %v; want both allocations", describe(s), err)
		}
		// node_allocations: the first Refresh, then the 403 and its retry.
		if n := w.Requests()[nomadapi.KindNodeAllocations]; n != 3 {
			t.Errorf("%d node allocation requests, want 3", n)
		}
	})

	// The raw answers, for the record.
	narrow := a.ClientWithToken(a.CreateToken(t, "raw-default-only", nodeRead+dfltOnly))
	_, _, infoErr := narrow.Allocations().Info(secret, nil)
	_, statsErr := narrow.Allocations().Stats(&api.Allocation{ID: secret}, nil)
	_, selfErr := narrow.Raw().Query("/v1/agent/self", &api.AgentSelf{}, nil)
	for _, c := range []struct {
		what   string
		err    error
		status int
		body   string
	}{
		{"GET /v1/allocation/<hidden ns>", infoErr, 500, fmt.Sprintf("Unknown allocation %q", secret)},
		{"GET /v1/client/allocation/<hidden ns>/stats", statsErr, 403, "Permission denied"},
		{"GET /v1/agent/self without agent:read", selfErr, 403, "Permission denied"},
	} {
		status, body := nomadapi.HTTPStatus(c.err)
		t.Logf("%s → %d %q", c.what, status, body)
		if status != c.status || body != c.body {
			t.Errorf("%s → %d %q, want %d %q", c.what, status, body, c.status, c.body)
		}
	}
}

// twoTokens makes two client tokens of one policy with rules, and a token
// file holding the first: a rotation replaces it with the second.
func twoTokens(t *testing.T, mgmt *api.Client, name, rules string) (old, fresh *api.ACLToken, path string) {
	t.Helper()
	if _, err := mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: name, Rules: rules}, nil); err != nil {
		t.Fatal(err)
	}
	mint := func() *api.ACLToken {
		tok, _, err := mgmt.ACLTokens().Create(&api.ACLToken{Name: name, Type: "client", Policies: []string{name}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	old, fresh = mint(), mint()
	path = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(old.SecretID+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return old, fresh, path
}
