package hooks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer/transfertest"
)

// The replica nodes' test world: allocation A runs on node A and holds
// slot pg-1 of class pg, which keeps one copy; of nodes B and C, the
// rendezvous hash picks one (chosen), the other is not.
const (
	repNodeA  = "aaaaaaaa-0000-0000-0000-000000000001"
	repNodeB  = "bbbbbbbb-0000-0000-0000-000000000002"
	repNodeC  = "cccccccc-0000-0000-0000-000000000003"
	repAllocA = "a11ca11c-0000-0000-0000-00000000000a"
)

// repStubs is Nomad's node list: the three nodes ready, each offering pg
// with a transfer block.
func repStubs(ids ...string) []nomadapi.NodeStub {
	var out []nomadapi.NodeStub
	for _, id := range ids {
		out = append(out, nomadapi.NodeStub{ID: id, Status: "ready", SchedulingEligibility: "eligible",
			Devices: []nomadapi.DeviceGroup{{Vendor: "zfs", Type: "dataset", Name: "pg", Attributes: []string{"transfer_port"}}}})
	}
	return out
}

// repAddr is each node's address.
var repAddr = map[string]netip.Addr{repNodeA: netip.MustParseAddr("10.0.0.1"), repNodeB: netip.MustParseAddr("10.0.0.2"),
	repNodeC: netip.MustParseAddr("10.0.0.3")}

// clusterView is a node's view of the cluster below the Cluster seam: the
// node list it is given, each node's allocations from the cluster.
type clusterView struct {
	c     *cluster
	stubs []nomadapi.NodeStub
}

func (v clusterView) Nodes(context.Context) ([]nomadapi.NodeStub, error) { return v.stubs, nil }

func (v clusterView) Loss(_ context.Context, id string) (model.LostAlloc, error) {
	v.c.mu.Lock()
	defer v.c.mu.Unlock()
	v.c.lossAsked++
	l, ok := v.c.losses[id]
	if !ok {
		return model.LostAlloc{}, nomadapi.ErrAllocNotFound
	}
	return l, nil
}

func (v clusterView) NodeAllocations(_ context.Context, node string) ([]model.Alloc, error) {
	v.c.mu.Lock()
	defer v.c.mu.Unlock()
	var out []model.Alloc
	for _, a := range v.c.allocs {
		if a.NodeID == node {
			out = append(out, a)
		}
	}
	return out, nil
}

// wire carries a node's requests to the holder's transfer server in
// memory, from the node's address; it records each request, and cuts the
// next answer's body after cut bytes when set.
type wire struct {
	srv  *transfer.Server
	from netip.Addr
	mu   sync.Mutex
	cut  int64
	reqs []transfer.Request
}

func (w *wire) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	var req transfer.Request
	_ = json.Unmarshal(body, &req)
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.RemoteAddr = netip.AddrPortFrom(w.from, 40000).String()
	rec := httptest.NewRecorder()
	w.srv.ServeHTTP(rec, r)
	resp := rec.Result()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reqs = append(w.reqs, req)
	if w.cut > 0 && resp.StatusCode == http.StatusOK {
		resp.Body = io.NopCloser(io.MultiReader(io.LimitReader(resp.Body, w.cut), errReader{}))
		w.cut = 0
	}
	return resp, nil
}

func (w *wire) last() transfer.Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reqs[len(w.reqs)-1]
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// replicaWorld is node A (the holder, its transfer server authorizing by
// its own view of Nomad) and a replica node's Manager pulling from it.
type replicaWorld struct {
	c      *cluster
	class  model.Class
	a      *migrationNode
	srv    *transfer.Server
	nomad  *transfertest.Nomad
	chosen string // the node ReplicaNodes picks for A
	other  string // the one it does not
}

func newReplicaWorld(t *testing.T) *replicaWorld {
	t.Helper()
	w := &replicaWorld{c: &cluster{}, nomad: transfertest.NewNomad()}
	w.class = model.Class{Name: "pg", Slots: 1, MountPath: "/data", Sticky: true, StickyWait: time.Hour,
		Release:   model.Release{Policy: model.PolicyDestroy},
		Replicate: model.Replicate{Copies: 1, Every: time.Minute}}
	stubs := repStubs(repNodeA, repNodeB, repNodeC)
	picked := model.ReplicaNodes(repAllocA, repNodeA, 1, allocwatch.ReplicaNodes(stubs, "pg", ""))
	if len(picked) != 1 {
		t.Fatalf("ReplicaNodes picked %v", picked)
	}
	w.chosen, w.other = picked[0], repNodeB
	if w.chosen == repNodeB {
		w.other = repNodeC
	}
	w.a = newMigrationNode(t, w.c, repNodeA, w.class)
	w.c.set(pgAlloc(repAllocA, repNodeA, 10, "running", "run"))
	w.a.settle(t, w.c, repNodeA)
	w.nomad.SetAlloc(transfer.Alloc{ID: repAllocA, NodeID: repNodeA, Namespace: "default", JobID: "db", TaskGroup: "g",
		DesiredStatus: "run", ClientStatus: "running"})
	for id, addr := range repAddr {
		w.nomad.SetNode(transfer.Node{ID: id, Addresses: []netip.Addr{addr}})
	}
	w.nomad.SetNodeList(stubs)
	srv, err := transfer.NewHandler(transfer.ServerConfig{
		Authorizer: &transfer.NomadAuthorizer{Nomad: w.nomad, Self: w.a.m.NodeID, ReplicaNodes: w.a.m.ReplicaNodes},
		Source:     w.a.m.Sender(), Replicas: w.a.m.Sender(), ZFS: w.a.c})
	if err != nil {
		t.Fatal(err)
	}
	w.srv = srv
	return w
}

// replicaNode is node id's Manager, its requests on a wire from its
// address, its view of the node list stubs.
func (w *replicaWorld) replicaNode(t *testing.T, id string, stubs []nomadapi.NodeStub) (*migrationNode, *wire, *testClock) {
	t.Helper()
	n := newMigrationNode(t, w.c, id, w.class)
	wr := &wire{srv: w.srv, from: repAddr[id]}
	client, err := transfer.NewClient(transfer.ClientConfig{Locator: fixedLocator{netip.AddrPortFrom(repAddr[repNodeA], 4680)},
		ZFS: n.c, Transport: wr})
	if err != nil {
		t.Fatal(err)
	}
	n.m.fetcher, n.m.cluster = client, clusterView{c: w.c, stubs: stubs}
	clock := &testClock{now: time.Now()}
	n.m.now = clock.Now
	n.settle(t, w.c, id)
	return n, wr, clock
}

// testClock is a node's clock that a test moves while the node's own
// goroutines (its migrations and replica pulls) read it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixedLocator says every allocation's data is on one node.
type fixedLocator struct{ at netip.AddrPort }

func (l fixedLocator) Locate(context.Context, string) (netip.AddrPort, error) { return l.at, nil }

// replicaHolds checks that node n's replica of A holds content, and its
// marks.
func replicaHolds(t *testing.T, n *migrationNode, name, content string) {
	t.Helper()
	props := append([]string{model.PropReplicaNode, model.PropReplicaSlot, model.PropReplicaGroup}, model.UserProps...)
	rows, err := n.c.List(t.Context(), name, props)
	if err != nil || len(rows) == 0 {
		t.Fatalf("no replica %s: %v", name, err)
	}
	d := rows[0]
	if d.User.Get(model.PropState) != string(model.StateReplica) || d.User.Get(model.PropHolder) != repAllocA ||
		d.User.Get(model.PropReplicaNode) != repNodeA || d.User.Get(model.PropReplicaSlot) != "pg-1" ||
		d.User.Get(model.PropReplicaGroup) != "default/db/g" || d.Mounted {
		t.Fatalf("replica %s: state %q holder %q node %q slot %q group %q mounted %v", name, d.User.Get(model.PropState),
			d.User.Get(model.PropHolder), d.User.Get(model.PropReplicaNode), d.User.Get(model.PropReplicaSlot),
			d.User.Get(model.PropReplicaGroup), d.Mounted)
	}
	if err := n.c.Mount(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = n.f.Run(context.Background(), "zfs", "unmount", name) }()
	if got := read(t, n.f, name, "data"); got != content {
		t.Fatalf("the replica holds %q, want %q", got, content)
	}
}

// snapshotsOf are the replica's @replica-<n>.
func snapshotsOf(t *testing.T, n *migrationNode, name string) []string {
	t.Helper()
	rows, err := n.c.List(t.Context(), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		if _, s, ok := strings.Cut(r.Name, "@"); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestReplicaPulls: the chosen node keeps a replica of A's slot through
// the transport, authorized by the holder's own Nomad view: pulled whole
// at the first round, not again before `every`, then incrementally from
// the holder's bookmark (its older snapshot dropped), resumed from its
// token after a cut stream; dropped once A has completed and its node
// released its data.
func TestReplicaPulls(t *testing.T) {
	w := newReplicaWorld(t)
	ctx := t.Context()
	b, wr, clock := w.replicaNode(t, w.chosen, repStubs(repNodeA, repNodeB, repNodeC))
	name := "tank/nomad/pg/replica-" + repAllocA + "-pg-1"
	slot := "tank/nomad/pg/pg-1"

	write(t, w.a.f, slot, "data", "one")
	if _, err := b.m.replicaRound(ctx); err != nil {
		t.Fatal(err)
	}
	replicaHolds(t, b, name, "one")
	if got := snapshotsOf(t, b, name); len(got) != 1 || got[0] != "replica-1" {
		t.Fatalf("after the whole pull: %v", got)
	}
	if r := wr.last(); r.Kind != transfer.KindReplica || r.HaveGUID != 0 || r.Replacement != "" {
		t.Fatalf("the first request: %+v", r)
	}

	// Not due before every.
	write(t, w.a.f, slot, "data", "two")
	asked := len(wr.reqs)
	clock.Advance(30 * time.Second)
	wait, err := b.m.replicaRound(ctx)
	if err != nil || len(wr.reqs) != asked {
		t.Fatalf("a round before every: %v, %d requests (was %d)", err, len(wr.reqs), asked)
	}
	if wait > 31*time.Second || wait < 29*time.Second {
		t.Errorf("the next round in %v, want when the replica is due (30s)", wait)
	}
	clock.Advance(31 * time.Second)
	if _, err := b.m.replicaRound(ctx); err != nil {
		t.Fatal(err)
	}
	replicaHolds(t, b, name, "two")
	if got := snapshotsOf(t, b, name); len(got) != 1 || got[0] != "replica-2" {
		t.Fatalf("after the increment: %v, want only the newest", got)
	}
	if r := wr.last(); r.HaveGUID == 0 || r.ResumeToken != "" {
		t.Fatalf("the increment's request: %+v", r)
	}

	// A stream cut mid-way: the next round resumes it from its token.
	big := make([]byte, 512<<10)
	_, _ = rand.Read(big)
	write(t, w.a.f, slot, "big", string(big))
	write(t, w.a.f, slot, "data", "three")
	wr.mu.Lock()
	wr.cut = 200 << 10
	wr.mu.Unlock()
	clock.Advance(61 * time.Second)
	if _, err := b.m.replicaRound(ctx); err != nil {
		t.Fatal(err)
	}
	if tok, err := b.c.ResumeToken(ctx, name); err != nil || tok == "" {
		t.Fatalf("no resume token after the cut: %q, %v", tok, err)
	}
	replicaHolds(t, b, name, "two") // the cut receive left the replica as it was
	clock.Advance(2 * time.Second)
	if _, err := b.m.replicaRound(ctx); err != nil {
		t.Fatal(err)
	}
	if r := wr.last(); r.ResumeToken == "" {
		t.Fatalf("the round after the cut did not resume: %+v", r)
	}
	replicaHolds(t, b, name, "three")
	if got := snapshotsOf(t, b, name); len(got) != 1 || got[0] != "replica-3" {
		t.Fatalf("after the resumed increment: %v", got)
	}

	// A completes; its node releases its data; the replica goes.
	done := pgAlloc(repAllocA, repNodeA, 10, "complete", "run")
	w.c.set(done)
	w.a.settle(t, w.c, repNodeA)
	if rows, _ := w.a.c.List(ctx, slot, nil); len(rows) > 1 {
		t.Fatalf("node A kept A's snapshots or bookmarks: %v", rows)
	}
	clock.Advance(time.Second)
	if _, err := b.m.replicaRound(ctx); err != nil {
		t.Fatal(err)
	}
	if rows, err := b.c.List(ctx, name, nil); err == nil {
		t.Fatalf("the replica of a completed allocation is kept: %v", rows)
	}
}

// TestReplicaRefusedForAnUnchosenNode: a node whose own node list makes
// it chosen (it does not see the node the holder picks) asks, and the
// holder, by its own list, refuses it: nothing is received, and the node
// tries again later, never refused for good. A node that is not chosen by
// its own list asks nothing.
func TestReplicaRefusedForAnUnchosenNode(t *testing.T) {
	w := newReplicaWorld(t)
	ctx := t.Context()
	write(t, w.a.f, "tank/nomad/pg/pg-1", "data", "one")
	name := "tank/nomad/pg/replica-" + repAllocA + "-pg-1"

	c, wr, _ := w.replicaNode(t, w.other, repStubs(repNodeA, w.other))
	if _, err := c.m.replicaRound(ctx); err != nil {
		t.Fatal(err)
	}
	if len(wr.reqs) != 1 {
		t.Fatalf("%d requests, want the one refused", len(wr.reqs))
	}
	if rows, err := c.c.List(ctx, name, nil); err == nil {
		t.Fatalf("a refused pull left %v", rows)
	}
	c.m.replicas.mu.Lock()
	failures, refused := c.m.replicas.failures[name], c.m.replicas.refused[name]
	c.m.replicas.mu.Unlock()
	if failures != 1 || refused {
		t.Errorf("after the refusal: %d failures, refused for good %v; want one failure, tried again", failures, refused)
	}

	d, wd, _ := w.replicaNode(t, w.other, repStubs(repNodeA, repNodeB, repNodeC))
	if _, err := d.m.replicaRound(ctx); err != nil || len(wd.reqs) != 0 {
		t.Fatalf("an unchosen node: %v, %d requests", err, len(wd.reqs))
	}
}

// TestReplicaNodesAgree: the holder's choice (Manager.ReplicaNodes, what
// its transport authorizes) is the replica node's (ReplicaTargets), and a
// slot of a class that keeps none is no one's.
func TestReplicaNodesAgree(t *testing.T) {
	w := newReplicaWorld(t)
	got, ok := w.a.m.ReplicaNodes(transfer.Alloc{ID: repAllocA, NodeID: repNodeA}, "pg-1", repStubs(repNodeA, repNodeB, repNodeC))
	if !ok || len(got) != 1 || got[0] != w.chosen {
		t.Fatalf("the holder chooses %v (%v), the replica node %s", got, ok, w.chosen)
	}
	if _, ok := w.a.m.ReplicaNodes(transfer.Alloc{ID: repAllocA, NodeID: repNodeA}, "other-1", repStubs(repNodeA, repNodeB)); ok {
		t.Error("a slot of no class is chosen for")
	}
	plain := newMigrationNode(t, w.c, repNodeA, model.Class{Name: "pg", Slots: 1, MountPath: "/data"})
	if _, ok := plain.m.ReplicaNodes(transfer.Alloc{ID: repAllocA, NodeID: repNodeA}, "pg-1", repStubs(repNodeA, repNodeB)); ok {
		t.Error("a class that keeps no replicas is chosen for")
	}
}

// failingLookup is a watcher whose lookups fail: the servers do not
// answer.
type failingLookup struct {
	Allocs
	err error
}

func (f failingLookup) Lookup(context.Context, string) (model.Alloc, bool, error) {
	return model.Alloc{}, false, f.err
}

// TestReplicaKeptWhileNomadDoesNotAnswer: a replica whose allocation no
// node lists any more is looked up; a lookup that fails keeps it (an
// unknown answer is never "gone"), and Nomad's answer that it knows no
// such allocation drops it.
func TestReplicaKeptWhileNomadDoesNotAnswer(t *testing.T) {
	w := newReplicaWorld(t)
	ctx := t.Context()
	b, _, clock := w.replicaNode(t, w.chosen, repStubs(repNodeA, repNodeB, repNodeC))
	name := "tank/nomad/pg/replica-" + repAllocA + "-pg-1"
	write(t, w.a.f, "tank/nomad/pg/pg-1", "data", "one")
	if _, err := b.m.replicaRound(ctx); err != nil {
		t.Fatal(err)
	}
	replicaHolds(t, b, name, "one")

	w.c.set() // garbage-collected: no node lists A, and the servers know it no more
	watcher := b.m.allocs
	b.m.allocs = failingLookup{Allocs: watcher, err: errors.New("connection refused")}
	clock.Advance(time.Hour)
	if _, err := b.m.replicaRound(ctx); err != nil {
		t.Fatal(err)
	}
	replicaHolds(t, b, name, "one")

	b.m.allocs = watcher
	if _, err := b.m.replicaRound(ctx); err != nil {
		t.Fatal(err)
	}
	if rows, err := b.c.List(ctx, name, nil); err == nil {
		t.Fatalf("the replica of an allocation Nomad no longer knows is kept: %v", rows)
	}
}

// TestReplicaLoopUnderRun: the Manager's Run starts the replica loop on
// its context, which pulls the replica, and ends it with Run.
func TestReplicaLoopUnderRun(t *testing.T) {
	w := newReplicaWorld(t)
	b, _, _ := w.replicaNode(t, w.chosen, repStubs(repNodeA, repNodeB, repNodeC))
	write(t, w.a.f, "tank/nomad/pg/pg-1", "data", "one")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.m.Run(ctx) }()
	name := "tank/nomad/pg/replica-" + repAllocA + "-pg-1"
	waitUntil(t, 30*time.Second, "the replica pulled by the loop", func() bool {
		rows, _ := b.c.List(t.Context(), name, nil)
		return len(rows) == 2
	})
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end with its context")
	}
	replicaHolds(t, b, name, "one")
}

// TestReplicaWholeAgainBeside: the holder no longer has the replica's
// base (its snapshot and bookmarks gone): its whole stream comes beside
// the replica, which is kept meanwhile, resumed there after a cut, and
// then takes the replica's place.
func TestReplicaWholeAgainBeside(t *testing.T) {
	w := newReplicaWorld(t)
	ctx := t.Context()
	b, wr, clock := w.replicaNode(t, w.chosen, repStubs(repNodeA, repNodeB, repNodeC))
	name := "tank/nomad/pg/replica-" + repAllocA + "-pg-1"
	beside := name + ".whole"
	slot := "tank/nomad/pg/pg-1"
	write(t, w.a.f, slot, "data", "one")
	if _, err := b.m.replicaRound(ctx); err != nil {
		t.Fatal(err)
	}
	replicaHolds(t, b, name, "one")

	// The holder loses every base (as a rollback of its slot would).
	for _, args := range [][]string{{"release", model.HoldTag, slot + "@replica-1"}, {"destroy", slot + "@replica-1"},
		{"destroy", slot + "#replica-1"}} {
		if _, err := w.a.f.Run(ctx, "zfs", args...); err != nil {
			t.Fatalf("zfs %v: %v", args, err)
		}
	}
	big := make([]byte, 512<<10)
	_, _ = rand.Read(big)
	write(t, w.a.f, slot, "big", string(big))
	write(t, w.a.f, slot, "data", "two")
	wr.mu.Lock()
	wr.cut = 200 << 10
	wr.mu.Unlock()
	clock.Advance(61 * time.Second)
	if _, err := b.m.replicaRound(ctx); err != nil {
		t.Fatal(err)
	}
	if tok, err := b.c.ResumeToken(ctx, beside); err != nil || tok == "" {
		t.Fatalf("no resume token beside the replica after the cut: %q, %v", tok, err)
	}
	replicaHolds(t, b, name, "one") // kept while the whole copy comes

	clock.Advance(2 * time.Second)
	if _, err := b.m.replicaRound(ctx); err != nil {
		t.Fatal(err)
	}
	if r := wr.last(); r.ResumeToken == "" || r.HaveGUID == 0 {
		t.Fatalf("the round after the cut: %+v, want the whole copy resumed", r)
	}
	replicaHolds(t, b, name, "two")
	if got := snapshotsOf(t, b, name); len(got) != 1 {
		t.Fatalf("the replica after the swap: %v, want one snapshot", got)
	}
	if rows, err := b.c.List(ctx, beside, nil); err == nil {
		t.Fatalf("the copy beside is left: %v", rows)
	}
	// And on from there, incrementally.
	write(t, w.a.f, slot, "data", "three")
	clock.Advance(61 * time.Second)
	if _, err := b.m.replicaRound(ctx); err != nil {
		t.Fatal(err)
	}
	replicaHolds(t, b, name, "three")
	if r := wr.last(); r.HaveGUID == 0 || r.ResumeToken != "" {
		t.Fatalf("the increment after the swap: %+v", r)
	}
}
