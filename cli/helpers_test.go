package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadfake"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/testrig"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

func TestMain(m *testing.M) {
	ShimIfCalled()
	zfstest.ImpersonateIfCalled()
	code := m.Run()
	testrig.Cleanup()
	os.Exit(code)
}

// builtBinary is the plugin binary, built once per test process.
func builtBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the plugin binary")
	}
	return testrig.Binary(t)
}

// ctlBinary is the operator CLI's binary, built once per test process.
func ctlBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the CLI binary")
	}
	return testrig.Ctl(t)
}

// pluginDir is a fresh plugin_dir holding the binary under name.
func pluginDir(t testing.TB, name string) string {
	t.Helper()
	builtBinary(t)
	return testrig.PluginDir(t, name)
}

// fakeHost is a fake pool "tank" (4 GiB) with the operator's parent
// tank/nomad.
func fakeHost(t testing.TB) (*zfstest.Fake, *zfs.Client) {
	t.Helper()
	return testrig.FakeHost(t, 4<<30, true)
}

// agentFile writes an agent configuration with the plugin block's body.
func agentFile(t testing.TB, pluginDir, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.hcl")
	src := fmt.Sprintf("data_dir = %q\nplugin_dir = %q\n\nplugin \"nomad-device-zfs\" {\n  config {\n%s\n  }\n}\n", t.TempDir(), pluginDir, body)
	must(t, os.WriteFile(p, []byte(src), 0o644))
	return p
}

// pluginBody is a plugin block's config for the fake Nomad API at addr.
func pluginBody(parent, addr, nomadExtra, classExtra string) string {
	return fmt.Sprintf(`parent = %q
scan_interval = "1s"
nomad {
  address = %q
  %s
}
class "scratch" {
  slots = 2
  properties { quota = "1G" }
  mount = "/data"
  %s
}`, parent, addr, nomadExtra, classExtra)
}

// runCLI runs the CLI in process.
func runCLI(t testing.TB, e *env, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	e.stdout, e.stderr = &out, &errb
	code = e.run(t.Context(), args)
	t.Logf("$ nomad-device-zfs %s   → exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// lines returns the lines of s that start (after spaces) with prefix.
func linesWith(s, prefix string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// slotOf reads a slot from the fake.
func slotOf(t testing.TB, c *zfs.Client, cfg *model.Config, id string) model.Slot {
	t.Helper()
	s, err := hooks.ReadSlot(context.Background(), cfg, c, id)
	must(t, err)
	return s
}

// settingsOf decodes the plugin block of an agent file, as the CLI does.
func settingsOf(t testing.TB, path string) *settings {
	t.Helper()
	_, st, err := loadSettings([]string{path})
	must(t, err)
	return st
}

// testPlugin is the plugin's slot manager over the same fake ZFS, standing
// in for the long-lived plugin process: the CLI's requests are carried out
// by its reconcile passes.
type testPlugin struct {
	m      *hooks.Manager
	allocs *pluginAllocs
}

// pluginAllocs is the plugin's view of Nomad: a snapshot it was given,
// and lookups that fail unless told otherwise (the plugin cannot see the
// holder, so it keeps the slot until someone decides).
type pluginAllocs struct {
	mu   sync.Mutex
	snap model.Snapshot
}

func (p *pluginAllocs) Refresh(context.Context) (model.Snapshot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snap, nil
}

func (p *pluginAllocs) Lookup(_ context.Context, id string) (model.Alloc, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.snap.Allocs {
		if a.ID == id {
			return a, true, nil
		}
	}
	return model.Alloc{}, false, fmt.Errorf("%w: the test plugin cannot read %s", nomadapi.ErrPermissionDenied, id)
}

func (p *pluginAllocs) RunningLocally(context.Context, string) (bool, error) { return false, nil }

// newManager is hooks.NewManager(c), failing t on an error.
func newManager(t testing.TB, c hooks.Config) *hooks.Manager {
	t.Helper()
	m, err := hooks.NewManager(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// startPlugin runs a manager for cfg until the test ends, with allocs as
// its snapshot; scan is its scan interval.
func startPlugin(t testing.TB, cfg model.Config, c *zfs.Client, scan time.Duration, allocs ...model.Alloc) *testPlugin {
	t.Helper()
	cfg.ScanInterval = scan
	pa := &pluginAllocs{snap: model.Snapshot{NodeID: nodeID, Index: 100, Allocs: allocs, At: time.Now()}}
	m := newManager(t, hooks.Config{Slots: &cfg, ZFS: c, Allocs: pa})
	m.OnAllocs(pa.snap)
	m.Reconcile(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the test plugin did not stop")
		}
	})
	return &testPlugin{m: m, allocs: pa}
}

// setAllocs changes what the test plugin sees and wakes it.
func (p *testPlugin) setAllocs(allocs ...model.Alloc) {
	p.allocs.mu.Lock()
	p.allocs.snap = model.Snapshot{NodeID: nodeID, Index: p.allocs.snap.Index + 1, Allocs: allocs, At: time.Now()}
	s := p.allocs.snap
	p.allocs.mu.Unlock()
	p.m.OnAllocs(s)
}

// hold records alloc as the holder of a ready slot, as the plugin does
// when it sees a pending allocation.
func hold(t testing.TB, c *zfs.Client, dataset, allocID string, index int) {
	t.Helper()
	must(t, c.Set(context.Background(), dataset, map[string]string{
		model.PropState: string(model.StateHeld), model.PropHolder: allocID,
		model.PropHolderIndex: fmt.Sprint(index), model.PropSince: fmt.Sprint(time.Now().Add(-3 * time.Minute).Unix()),
	}))
}

const nodeID = "8b1c2f3a-0000-4000-8000-000000000001"

// Allocation IDs of the tests.
const (
	allocA = "aaaaaaaa-0000-4000-8000-00000000000a"
	allocB = "bbbbbbbb-0000-4000-8000-00000000000b"
	allocC = "cccccccc-0000-4000-8000-00000000000c"
)

// Tokens of the fake Nomad API.
const (
	tokenFull    = "f0f0f0f0-0000-4000-8000-0000000000ff"
	tokenNoNode  = "f0f0f0f0-0000-4000-8000-000000000001"
	tokenNoJob   = "f0f0f0f0-0000-4000-8000-000000000002"
	tokenNoAgent = "f0f0f0f0-0000-4000-8000-000000000003"
	tokenUnknown = "deadbeef-0000-4000-8000-000000000000"
)

// newFakeNomad is the local agent of node nodeID, ACLs on, with the
// least-privilege token of docs/security.md (tokenFull) and that token less each of
// its three rights in turn.
func newFakeNomad(t testing.TB) *nomadfake.Server {
	t.Helper()
	n := nomadfake.New(t, nodeID)
	token := func(name string, node, agent, readJob bool) nomadfake.Token {
		tok := nomadfake.Token{Name: name, Policies: []string{"nomad-device-zfs"}, Node: node, Agent: agent}
		if readJob {
			tok.ReadJob = []string{"*"}
		}
		return tok
	}
	n.SetTokens(map[string]nomadfake.Token{
		tokenFull:    token("nomad-device-zfs", true, true, true),
		tokenNoNode:  token("no-node", false, true, true),
		tokenNoJob:   token("no-read-job", true, true, false),
		tokenNoAgent: token("no-agent", true, false, true),
	})
	return n
}

// addAlloc places an allocation of job "job-<id[:1]>" on the node, whose
// task "t" holds slot.
func addAlloc(n *nomadfake.Server, id, status, slot string) {
	n.Upsert(&api.Allocation{ID: id, JobID: "job-" + id[:1], TaskGroup: "g",
		ClientStatus: status, DesiredStatus: api.AllocDesiredStatusRun,
		AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
			"t": {Devices: []*api.AllocatedDeviceResource{{Vendor: "zfs", Type: "dataset", Name: "scratch", DeviceIDs: []string{slot}}}},
		}}})
}

// closedAddr is an HTTP address where nothing listens.
func closedAddr(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	return addr
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond every 100ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// decodeJSON decodes a command's -json output.
func decodeJSON[T any](t testing.TB, out string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	return v
}

// makeReplica makes what a replica node keeps of source's slot of class on
// another node (issue 30: model.ReplicaName, ReplicaProps), with its
// snapshots @replica-1 .. @replica-<newest>, and returns its name.
func makeReplica(t testing.TB, c *zfs.Client, class, source, slot string, newest int) string {
	t.Helper()
	cfg := &model.Config{Parent: "tank/nomad", Classes: []model.Class{{Name: class}}}
	name := cfg.ReplicaName(class, source, slot)
	a := model.Alloc{ID: source, NodeID: "node-2", Namespace: "default", JobID: "pg", TaskGroup: "db"}
	must(t, c.Create(t.Context(), name, model.ReplicaProps(cfg.Class(class), name, a, slot, time.Now())))
	for n := 1; n <= newest; n++ {
		must(t, c.Snapshot(t.Context(), name+"@"+model.ReplicaSnapshot(n), nil))
	}
	return name
}
