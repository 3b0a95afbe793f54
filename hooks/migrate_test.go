package hooks

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/testrig"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// cluster is what two nodes' Managers see of Nomad: every allocation, each
// node's own in its snapshots, any of them by lookup.
type cluster struct {
	mu     sync.Mutex
	allocs []model.Alloc
	// losses are what the servers say of allocations' loss (Cluster.Loss);
	// lossAsked counts the questions.
	losses    map[string]model.LostAlloc
	lossAsked int
}

func (c *cluster) set(as ...model.Alloc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.allocs = as
}

// nodeAllocs is one node's view of the cluster, below the Allocs seam.
type nodeAllocs struct {
	c    *cluster
	node string
}

func (n nodeAllocs) snap() model.Snapshot {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	s := model.Snapshot{NodeID: n.node, Index: 100, At: time.Now()}
	for _, a := range n.c.allocs {
		if a.NodeID == n.node {
			s.Allocs = append(s.Allocs, a)
		}
	}
	return s
}

func (n nodeAllocs) Refresh(context.Context) (model.Snapshot, error) { return n.snap(), nil }

func (n nodeAllocs) Lookup(_ context.Context, id string) (model.Alloc, bool, error) {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	for _, a := range n.c.allocs {
		if a.ID == id {
			return a, true, nil
		}
	}
	return model.Alloc{}, false, nil
}

func (n nodeAllocs) RunningLocally(context.Context, string) (bool, error) { return false, nil }

// directFetcher is the transport below the Fetcher seam: the sending
// node's Source decides, its zfs sends, the receiving node's zfs receives,
// through a pipe (the real one, over mutual TLS, is tested in transfer/
// and on real nodes in e2e). As transfer.Client, it returns the copy as
// listed after the receive (Result.Rows); received, if set, changes the
// copy before that listing, as a stream could.
type directFetcher struct {
	source   transfer.Source
	from, to *zfs.Client
	received func(ctx context.Context, target string)
}

func (d directFetcher) Fetch(ctx context.Context, req transfer.Request, into transfer.Into) (transfer.Result, error) {
	spec, err := d.source.Send(ctx, model.SendRequest{Alloc: req.Alloc, Replacement: req.Replacement, Slot: req.Slot,
		HaveGUID: req.HaveGUID, ResumeToken: req.ResumeToken})
	if err != nil {
		return transfer.Result{}, err
	}
	if spec.Complete {
		return transfer.Result{Complete: true}, nil
	}
	// The stream carries the sender's properties (-p), as a sender that
	// sends them would (zfs send -p, or a hostile one): the receiver keeps
	// none of the plugin's own it does not set itself (issue 28).
	send := spec.Options
	send.Props = true
	r, w := io.Pipe()
	go func() { _ = w.CloseWithError(d.from.Send(ctx, send, w)) }()
	opts := zfs.ReceiveOptions{Target: into.Target, Resumable: true, NoMount: true, Props: into.Props}
	for _, p := range slices.Concat(transfer.HostProps, into.Exclude) {
		if _, set := into.Props[p]; !set && !slices.Contains(opts.Exclude, p) {
			opts.Exclude = append(opts.Exclude, p)
		}
	}
	err = d.to.Receive(ctx, opts, r)
	_ = r.CloseWithError(err)
	res := transfer.Result{GUID: spec.ToGUID, FromGUID: spec.FromGUID}
	if err != nil {
		return res, transfer.Classify(err)
	}
	if d.received != nil {
		d.received(ctx, into.Target)
	}
	res.Rows, err = d.to.ListAll(ctx, into.Target, into.UserProps)
	return res, err
}

// countingFetcher counts the requests that reach next.
type countingFetcher struct {
	next  transfer.Fetcher
	calls atomic.Int32
}

func (c *countingFetcher) Fetch(ctx context.Context, req transfer.Request, into transfer.Into) (transfer.Result, error) {
	c.calls.Add(1)
	return c.next.Fetch(ctx, req, into)
}

// migrationNode is one node of the test: its fake ZFS and its Manager.
type migrationNode struct {
	f *zfstest.Fake
	c *zfs.Client
	m *Manager
}

func newMigrationNode(t *testing.T, c *cluster, node string, class model.Class) *migrationNode {
	t.Helper()
	f, z := newFakeZFS(t)
	cfg := &model.Config{Parent: "tank/nomad", ScanInterval: time.Hour, Classes: []model.Class{class}}
	m := mustManager(t, Config{Slots: cfg, ZFS: z, Allocs: nodeAllocs{c: c, node: node}})
	// The pulls' pauses, short: the test waits on what they do.
	m.sleep = func(ctx context.Context, _ time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
			return nil
		}
	}
	m.Reconcile(t.Context())
	return &migrationNode{f: f, c: z, m: m}
}

func (n *migrationNode) settle(t *testing.T, c *cluster, node string) {
	t.Helper()
	n.m.storeSnapshot(nodeAllocs{c: c, node: node}.snap())
	n.m.Reconcile(t.Context())
}

// pgAlloc is allocation id of job db on node, holding slot pg-1 of class pg.
func pgAlloc(id, node string, index uint64, client, desired string) model.Alloc {
	return model.Alloc{ID: id, Namespace: "default", JobID: "db", TaskGroup: "g", NodeID: node, CreateIndex: index,
		ClientStatus: client, DesiredStatus: desired,
		Devices: []model.Device{{Task: "t", Vendor: model.Vendor, Type: model.DeviceType, Name: "pg", IDs: []string{"pg-1"}}}}
}

// placeReplacement runs A on node 1, writes content into its slot, then
// has Nomad stop A and place B on node 2 to replace it (A still running).
func placeReplacement(t *testing.T, c *cluster, n1 *migrationNode, content string) (a, b model.Alloc) {
	t.Helper()
	a = pgAlloc("A", "node-1", 10, "running", "run")
	c.set(a)
	n1.settle(t, c, "node-1")
	write(t, n1.f, "tank/nomad/pg/pg-1", "data", content)
	a.DesiredStatus, a.NextAllocation = "stop", "B"
	b = pgAlloc("B", "node-2", 20, "pending", "run")
	b.PreviousAllocation = "A"
	c.set(a, b)
	return a, b
}

// TestDataFollowsToAnotherNode: B, placed on node 2 to replace A on node 1,
// gets A's data: a pre-copy while A still stops, the last increment once A
// has ended and its data is parked on node 1, and B's Reserve claims the
// copy, which holds what A wrote last. Node 1 then gives A's data to the
// class's policy, and nothing is left on either node but the slots. The
// slot B claims has the class's quota (issue 28: the copy arrived without
// it, and B could fill node 2's pool).
func TestDataFollowsToAnotherNode(t *testing.T) {
	class := model.Class{Name: "pg", Slots: 1, MountPath: "/data", Sticky: true, StickyWait: time.Hour,
		Properties: map[string]string{"quota": "100M"},
		Migrate:    model.Migrate{Enabled: true, Timeout: time.Minute, OnTimeout: model.MigrateFail}}
	c := &cluster{}
	n1 := newMigrationNode(t, c, "node-1", class)
	n2 := newMigrationNode(t, c, "node-2", class)
	n2.m.fetcher = directFetcher{source: n1.m.Sender(), from: n1.c, to: n2.c}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	a := pgAlloc("A", "node-1", 10, "running", "run")
	c.set(a)
	n1.settle(t, c, "node-1")
	slot1 := "tank/nomad/pg/pg-1"
	write(t, n1.f, slot1, "data", "before the drain")

	// The drain: A is to stop, B placed on node 2.
	a.DesiredStatus, a.NextAllocation = "stop", "B"
	b := pgAlloc("B", "node-2", 20, "pending", "run")
	b.PreviousAllocation = "A"
	c.set(a, b)
	n1.settle(t, c, "node-1")
	n2.m.storeSnapshot(nodeAllocs{c: c, node: "node-2"}.snap())
	n2.m.Settle(ctx) // starts the pull
	copyName := "tank/nomad/pg/parked-A-pg-1"
	waitUntil(t, 30*time.Second, "a pre-copy on node 2", func() bool {
		rows, _ := n2.c.List(ctx, copyName, model.UserProps)
		return len(rows) > 1
	})
	if rows, _ := n2.c.List(ctx, copyName, model.UserProps); rows[0].User.Get(model.PropState) != string(model.StateReceiving) {
		t.Fatalf("the pre-copy is %q, want receiving: never claimable before the final increment", rows[0].User.Get(model.PropState))
	}
	// A Reserve by B now waits: the copy is not final.
	rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if _, err := n2.m.Reserve(rctx, []string{"pg-1"}); err == nil {
		t.Fatal("B's Reserve was granted while A's data was still coming")
	}
	rcancel()

	// A writes its last and ends; node 1 parks its data.
	write(t, n1.f, slot1, "data", "the last write")
	a.ClientStatus = "complete"
	c.set(a, b)
	// A pass that finds the slot's lock taken (the pull's snapshot of
	// it on node 1) skips it and is retried, as Run retries it soon.
	waitUntil(t, 30*time.Second, "A's data parked on node 1", func() bool {
		n1.settle(t, c, "node-1")
		rows, _ := n1.c.List(ctx, "tank/nomad/pg/parked-A-pg-1", model.UserProps)
		return len(rows) > 0
	})
	waitUntil(t, 30*time.Second, "the final copy on node 2", func() bool {
		rows, _ := n2.c.List(ctx, copyName, model.UserProps)
		return len(rows) > 0 && rows[0].User.Get(model.PropState) == string(model.StateParked)
	})
	if rows, _ := n2.c.List(ctx, copyName, model.UserProps); rows[0].User.Get(model.PropGeneration) != "" || rows[0].User.Get(model.PropHolderIndex) != "" {
		t.Fatalf("the copy kept node 1's generation %q and holder_index %q from the stream",
			rows[0].User.Get(model.PropGeneration), rows[0].User.Get(model.PropHolderIndex))
	}

	grants, err := n2.m.Reserve(ctx, []string{"pg-1"})
	if err != nil {
		t.Fatalf("B's Reserve: %v", err)
	}
	if got := read(t, n2.f, grants[0].Slot.Dataset, "data"); got != "the last write" {
		t.Fatalf("B's slot holds %q, want A's last write", got)
	}
	if rows, err := n2.c.List(ctx, grants[0].Slot.Dataset, nil); err != nil || len(rows) == 0 || rows[0].Quota != 100<<20 {
		t.Fatalf("B's slot %s after the claim: %+v, %v; want the class's quota, 100M", grants[0].Slot.Dataset, rows, err)
	}

	// B claimed the copy, and Nomad shows it pending until its task runs:
	// the model still names the migration, and a pull started now (the
	// next pass's) asks node 1 for nothing (seen on real agents: a second
	// whole copy arrived after the claim, and no one claimed it).
	migs, _ := model.Migrations(n2.m.cfg, n2.m.snapshot())
	if len(migs) != 1 {
		t.Fatalf("migrations after the claim, B pending: %v, want the one", migs)
	}
	counting := &countingFetcher{next: directFetcher{source: n1.m.Sender(), from: n1.c, to: n2.c}}
	n2.m.fetcher = counting
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	n2.m.pull(pctx, migs[0])
	pcancel()
	if counting.calls.Load() != 0 {
		t.Errorf("a pull after the claim asked node 1 %d times", counting.calls.Load())
	}
	if rows, _ := n2.c.List(ctx, copyName, nil); len(rows) != 0 {
		t.Errorf("a copy arrived again after the claim: %v", rows)
	}

	// Node 1 learns the copy is whole at the pull's next request, then
	// gives A's data to the policy.
	waitUntil(t, 30*time.Second, "node 1 to record the copy", func() bool {
		rows, _ := n1.c.List(ctx, "tank/nomad/pg/parked-A-pg-1", nil)
		for _, r := range rows {
			if r.Name == "tank/nomad/pg/parked-A-pg-1@"+model.Migrated {
				return true
			}
		}
		return false
	})
	// Node 2's pull may ask again after B's claim renamed the copy away
	// (it runs until node 2 sees B running): naming nothing, it must not
	// get the whole data again while node 1 still has it.
	if p, err := n1.m.Sender().Send(ctx, model.SendRequest{Alloc: "A", Slot: "pg-1", Replacement: "B"}); !errors.Is(err, transfer.ErrNoData) {
		t.Errorf("a request from nothing once the copy was confirmed: %+v, %v; want ErrNoData, not the whole data again", p, err)
	}
	// The pull's requests take the parked data's lock for a moment; a
	// pass that meets one skips it and is retried.
	waitUntil(t, 30*time.Second, "A's data gone from node 1 after the copy was confirmed", func() bool {
		n1.settle(t, c, "node-1")
		rows, _ := n1.c.List(ctx, "tank/nomad/pg/parked-A-pg-1", nil)
		return len(rows) == 0
	})
	b.ClientStatus = "running"
	c.set(a, b)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n2.settle(t, c, "node-2")
		left := leftBehind(t, ctx, []*migrationNode{n1, n2}, "tank/nomad", "tank/nomad/pg", slot1)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind: %v", left)
		}
	}
}

// leftBehind lists the datasets of the nodes other than keep.
func leftBehind(t *testing.T, ctx context.Context, nodes []*migrationNode, keep ...string) []string {
	t.Helper()
	var left []string
	for _, n := range nodes {
		rows, err := n.c.List(ctx, "tank/nomad", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if !slices.Contains(keep, r.Name) {
				left = append(left, r.Name)
			}
		}
	}
	return left
}

func write(t *testing.T, f *zfstest.Fake, dataset, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.Mountpoint(dataset), name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, f *zfstest.Fake, dataset, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.Mountpoint(dataset), name))
	if err != nil {
		t.Fatalf("reading %s in %s: %v", name, dataset, err)
	}
	return string(b)
}

// completeFetcher answers every request with the sending node's
// "complete", sending nothing: a sender that lies, or one whose answer
// belongs to another copy.
type completeFetcher struct{}

func (completeFetcher) Fetch(context.Context, transfer.Request, transfer.Into) (transfer.Result, error) {
	return transfer.Result{Complete: true}, nil
}

// TestCompleteBelievedOnlyOfTheFinalCopy: the receiving node marks a copy
// claimable on the sender's "complete" only when the copy's newest
// snapshot is the final one the sender sent; a "complete" over a pre-copy,
// or over no copy at all, is an error and the copy stays unclaimable.
func TestCompleteBelievedOnlyOfTheFinalCopy(t *testing.T) {
	class := model.Class{Name: "pg", Slots: 1, MountPath: "/data", Sticky: true, StickyWait: time.Hour,
		Migrate: model.Migrate{Enabled: true, Timeout: time.Minute, OnTimeout: model.MigrateFail}}
	c := &cluster{}
	n1 := newMigrationNode(t, c, "node-1", class)
	n2 := newMigrationNode(t, c, "node-2", class)
	ctx := t.Context()
	placeReplacement(t, c, n1, "A's")
	n1.settle(t, c, "node-1")
	n2.m.storeSnapshot(nodeAllocs{c: c, node: "node-2"}.snap())
	n2.m.lookupPredecessors(ctx)
	migs, _ := model.Migrations(n2.m.cfg, n2.m.snapshot())
	if len(migs) != 1 {
		t.Fatalf("migrations: %v, want B's", migs)
	}
	mg := migs[0]
	state := func() string {
		rows, _ := n2.c.List(ctx, mg.ParkedName, model.UserProps)
		if len(rows) == 0 {
			return "none"
		}
		return rows[0].User.Get(model.PropState)
	}

	n2.m.fetcher = completeFetcher{}
	if got := pullRound(t, n2.m, mg); got.Kind == model.MoveDone || got.Retry == nil {
		t.Errorf("a complete over no copy: the round ends %s (%s), error %v; want an error", got.Kind, got.Phase, got.Retry)
	}
	if got := state(); got != "none" {
		t.Errorf("after a complete over no copy: %s", got)
	}

	n2.m.fetcher = directFetcher{source: n1.m.Sender(), from: n1.c, to: n2.c}
	if got := pullRound(t, n2.m, mg); got.Kind == model.MoveDone || got.Retry != nil {
		t.Fatalf("the pre-copy (A still runs): the round ends %s (%s), error %v", got.Kind, got.Phase, got.Retry)
	}
	n2.m.fetcher = completeFetcher{}
	if got := pullRound(t, n2.m, mg); got.Kind == model.MoveDone || got.Retry == nil {
		t.Errorf("a complete over a pre-copy: the round ends %s (%s), error %v; want an error", got.Kind, got.Phase, got.Retry)
	}
	if got := state(); got != string(model.StateReceiving) {
		t.Errorf("after a complete over a pre-copy the copy is %q, want %q: never claimable", got, model.StateReceiving)
	}
}

// pullRound runs mg's pull on m through its first look and one round: the
// move the round ends with (a pause, not made: its Retry is the round's
// error), or the pull's end.
func pullRound(t *testing.T, m *Manager, mg model.Migration) model.Move {
	t.Helper()
	return pullRoundFrom(t, m, mg, func() {})
}

// pullRoundFrom is pullRound, calling started as the round starts (after
// the first look).
func pullRoundFrom(t *testing.T, m *Manager, mg model.Migration, started func()) model.Move {
	t.Helper()
	decide := m.pullDecider(mg)
	var end model.Move
	_, err := m.drive(t.Context(), driveLoop{hold: m.locks.get(mg.ParkedName), decide: func(since model.Since, last model.Result) model.Move {
		end = decide(since, last)
		switch {
		case end.Kind == model.MoveWait && end.Phase == model.PullStart:
			started()
		case end.Kind == model.MoveWait:
			return model.Move{Kind: model.MoveDone}
		}
		return end
	}})
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	if end.Kind == model.MoveDone || end.Kind == model.MoveFail {
		m.pullEnded(m.logger, mg, end, nil) // as Manager.pull
	}
	return end
}

// TestCopyOverTheClassQuotaIsRefused: a whole copy that references more
// than the receiving class's quota (node 2's class is stricter than node
// 1's here) is dropped before it can be claimed, said once in the log,
// and not pulled again; the replacement then starts as the class's
// migrate on_timeout says (issue 28: a copy larger than the quota would
// have left the replacement unable to write).
func TestCopyOverTheClassQuotaIsRefused(t *testing.T) {
	loose := model.Class{Name: "pg", Slots: 1, MountPath: "/data", Sticky: true, StickyWait: time.Hour,
		Migrate: model.Migrate{Enabled: true, Timeout: time.Minute, OnTimeout: model.MigrateStartEmpty}}
	strict := loose
	strict.Properties = map[string]string{"quota": "1M"}
	c := &cluster{}
	n1 := newMigrationNode(t, c, "node-1", loose)
	n2 := newMigrationNode(t, c, "node-2", strict)
	logs := &testrig.LockedBuffer{}
	n2.m.logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	fetches := &countingFetcher{next: directFetcher{source: n1.m.Sender(), from: n1.c, to: n2.c}}
	n2.m.fetcher = fetches
	ctx := t.Context()

	a, b := placeReplacement(t, c, n1, strings.Repeat("x", 3<<20))
	a.ClientStatus = "complete"
	c.set(a, b)
	waitUntil(t, 30*time.Second, "A's data parked on node 1", func() bool {
		n1.settle(t, c, "node-1")
		rows, _ := n1.c.List(ctx, "tank/nomad/pg/parked-A-pg-1", model.UserProps)
		return len(rows) > 0 && rows[0].User.Get(model.PropState) == string(model.StateParked)
	})
	n2.settle(t, c, "node-2") // starts the pull
	copyName := "tank/nomad/pg/parked-A-pg-1"
	waitUntil(t, 30*time.Second, "the copy refused and dropped on node 2", func() bool {
		rows, _ := n2.c.List(ctx, copyName, nil)
		return strings.Contains(logs.String(), "refused the copy") && len(rows) == 0
	})
	if !strings.Contains(logs.String(), "more than the class's quota 1M") {
		t.Errorf("the log does not say why:\n%s", logs)
	}
	checkNotPulledAgain(t, c, n2, fetches)
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if grants, err := n2.m.Reserve(rctx, []string{"pg-1"}); err == nil {
		if _, rerr := os.Stat(filepath.Join(n2.f.Mountpoint(grants[0].Slot.Dataset), "data")); rerr == nil {
			t.Fatal("B's slot holds the refused data")
		}
	}
}

// checkNotPulledAgain: after a refusal, node 2's passes start no pull of
// the refused copy.
func checkNotPulledAgain(t *testing.T, c *cluster, n2 *migrationNode, fetches *countingFetcher) {
	t.Helper()
	calls := fetches.calls.Load()
	for range 3 {
		n2.settle(t, c, "node-2")
	}
	time.Sleep(200 * time.Millisecond)
	if n := fetches.calls.Load(); n != calls {
		t.Errorf("the refused copy was asked for again: %d requests after the refusal", n-calls)
	}
}

// childFetcher receives as d does, and puts a dataset below the copy, as
// a replication stream (zfs send -R) from a hostile sender would.
func childFetcher(d directFetcher) directFetcher {
	d.received = func(ctx context.Context, target string) { _ = d.to.Create(ctx, target+"/evil", nil) }
	return d
}

// TestCopyWithDatasetsBelowIsRefused: a stream that brings datasets below
// the copy (a replication stream, not one filesystem) makes the copy
// unclaimable: it is never marked received, the pull stops, and the log
// says what to destroy; the plugin destroys nothing that carries no mark
// of its own (issue 28).
func TestCopyWithDatasetsBelowIsRefused(t *testing.T) {
	class := model.Class{Name: "pg", Slots: 1, MountPath: "/data", Sticky: true, StickyWait: time.Hour,
		Migrate: model.Migrate{Enabled: true, Timeout: time.Minute, OnTimeout: model.MigrateStartEmpty}}
	c := &cluster{}
	n1 := newMigrationNode(t, c, "node-1", class)
	n2 := newMigrationNode(t, c, "node-2", class)
	logs := &testrig.LockedBuffer{}
	n2.m.logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
	fetches := &countingFetcher{next: childFetcher(directFetcher{source: n1.m.Sender(), from: n1.c, to: n2.c})}
	n2.m.fetcher = fetches
	ctx := t.Context()
	placeReplacement(t, c, n1, "A's")
	n1.settle(t, c, "node-1")
	n2.settle(t, c, "node-2") // starts the pull
	copyName := "tank/nomad/pg/parked-A-pg-1"
	waitUntil(t, 30*time.Second, "the copy refused on node 2", func() bool {
		return strings.Contains(logs.String(), "refused the copy")
	})
	if !strings.Contains(logs.String(), "zfs destroy -r "+copyName) {
		t.Errorf("the log does not say what to destroy:\n%s", logs)
	}
	checkNotPulledAgain(t, c, n2, fetches)
	rows, err := n2.c.List(ctx, copyName, model.UserProps)
	if err != nil || len(rows) < 2 || rows[0].User.Get(model.PropState) != string(model.StateReceiving) {
		t.Fatalf("the copy after the refusal: %v, %v; want it left as it came (receiving, never claimable), with what is below it", rows, err)
	}
}
