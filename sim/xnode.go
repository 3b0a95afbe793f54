package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/nomad/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	devplugin "github.com/nomad-device-zfs/nomad-device-zfs/plugin"
	"github.com/nomad-device-zfs/nomad-device-zfs/scheduler"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// xnode is one client node of the two: its pool (a zfs fake of its own),
// its plugin process (nil while dead), its Nomad client's allocations.
type xnode struct {
	w    *XWorld
	i    int
	id   string
	name string
	addr netip.Addr
	fake *zfstest.Fake
	p    *xplugin
	// connected: the node reaches the servers (and the other node);
	// otherwise the servers have marked it down, at cutAt.
	connected bool
	cutAt     time.Time
	// local are the client's allocations, by ID.
	local map[string]*xalloc
	// registered is the node as last fingerprinted.
	registered scheduler.Node
	// lastPass is when a pass last ran (the plugin's loop, simulated).
	lastPass time.Time
	// fullTill: the pool is full (a filler's file) until then.
	fullTill time.Time
	// copied is the parked data this node's plugin has recorded as copied
	// whole to its replacement's node (@migrated), as seen before a pass;
	// kept until it is no longer parked (X7).
	copied map[string]bool
	// busyTill: parked data a process holds, until when (XBusy).
	busyTill map[string]time.Time
	// wrote are the values of each property of the plugin's own (and
	// readonly) that this node's plugins have written, in any command
	// (X9).
	wrote map[string]map[string]bool
	// metHostile is when a replica pull of this node last met a hostile
	// sender (XR6 waits for its plugin's restart after it).
	metHostile time.Time
	// launched is when its plugin last started (XR6 counts from it).
	launched time.Time
	// replicated are the copies a hostile sender's replication stream
	// brought a dataset below (forOperator).
	replicated map[string]bool
}

// xplugin is one incarnation of a node's plugin process.
type xplugin struct {
	n      *xnode
	mgr    *hooks.Manager
	dev    *devplugin.Plugin
	run    *xrunner
	ctx    context.Context
	cancel context.CancelFunc
	pulls  []*xpull
	// loop is the replica loop's goroutine (xreplica.go), nil in a world
	// that keeps none.
	loop *xpull
}

var xNodeIDs = [3]string{"00000000-0000-4000-8000-0000000000b1", "00000000-0000-4000-8000-0000000000b2", "00000000-0000-4000-8000-0000000000b3"}

func (w *XWorld) newNode(i int) (*xnode, error) {
	n := &xnode{w: w, i: i, id: xNodeIDs[i], name: fmt.Sprintf("node-%d", i+1),
		addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), connected: true, local: map[string]*xalloc{},
		copied: map[string]bool{}, busyTill: map[string]time.Time{}, wrote: map[string]map[string]bool{},
		replicated: map[string]bool{}}
	// Guids differ between the nodes, as real ones do: a received
	// snapshot keeps the sender's.
	// In a world that keeps replicas, each node's sequence starts far
	// from the others': the fake's sequence is its seed plus a multiple of
	// the multiplier below, so that with seeds that are multiples of it
	// node-3's first guid was node-1's tenth in seed 5, and node-2's
	// node-1's 35th in seed 35 (one guid on two nodes: two datasets'
	// data under one guid for XR1 and X2). A world of two nodes keeps its
	// seeds, so that its schedules replay unchanged.
	seed := 0x9e3779b97f4a7c15 * uint64(i+1) * (w.seed | 1)
	if w.replicas {
		seed ^= 0x5bd1e9955bd1e995 * uint64(i+1)
	}
	n.fake = zfstest.New(zfstest.Options{MountRoot: filepath.Join(w.dir, n.name), Now: func() time.Time { return w.now },
		GUIDSeed: seed})
	if err := n.fake.AddPool(pool, xPoolSize); err != nil {
		return nil, err
	}
	z := zfs.NewClient(n.fake)
	ctx := context.Background()
	if err := z.Create(ctx, parent, nil); err != nil {
		return nil, err
	}
	if err := z.Create(ctx, pool+"/filler", nil); err != nil {
		return nil, err
	}
	n.registered = scheduler.Node{ID: n.id, Name: n.name}
	if err := w.cluster.UpsertNode(n.registered); err != nil {
		return nil, err
	}
	return n, nil
}

// launch starts the node's plugin process: a Manager and a device plugin
// built from nothing but the configuration, over the node's ZFS; its
// pulls start in lock step (spawn), its transport is the world's link.
func (n *xnode) launch(why string) {
	w := n.w
	cfg := w.cfg
	cfg.Classes = slices.Clone(w.cfg.Classes)
	p := &xplugin{n: n, run: &xrunner{n: n, budget: -1}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	mgr, err := hooks.NewManager(hooks.Config{Slots: &cfg, ZFS: zfs.NewClient(p.run), Allocs: xallocs{n},
		Logger: w.logger.Named(n.name), Fetcher: n.newFetcher(p), Cluster: n.cluster(),
		Sim: &hooks.Simulation{Now: w.clock, Spawn: p.spawn, Sequential: true,
			Sleep: func(ctx context.Context, d time.Duration) error { return w.sleep(p, ctx, d) }}})
	if err != nil {
		w.violate("harness", "hooks.NewManager: %v", err)
		return
	}
	p.mgr = mgr
	p.dev = devplugin.NewHosted(w.logger, &devplugin.Settings{Slots: cfg, ReserveTimeout: reserveTO},
		devplugin.Host{Manager: p.mgr, Now: func() time.Time { return w.now }})
	n.p, n.launched = p, w.now
	p.startLoop()
	w.logf("%s: plugin launched (%s)", n.name, why)
	n.pass(true)
}

// cluster is the replica loop's view of the servers: nil in a world that
// keeps no replicas (the Manager then runs no loop).
func (n *xnode) cluster() hooks.Cluster {
	if !n.w.replicas {
		return nil
	}
	return xcluster{n}
}

// stop ends the plugin process: its Reserve's wait, its pulls.
func (n *xnode) stop() {
	p := n.p
	if p == nil {
		return
	}
	n.p = nil
	p.run.dead = true
	p.dev.Shutdown()
	p.cancel()
	p.drainPulls()
}

// pass is the plugin's loop: the watcher's news, then a whole Reconcile
// (full) or a Settle. A dead plugin does nothing. A whole pass is held to
// X7: what was copied whole before it is released by it, unless a fault
// kept it from that.
func (n *xnode) pass(full bool) {
	p := n.p
	if p == nil || p.run.dead {
		return
	}
	var copied []string
	if full {
		copied = n.w.noteCopied(n)
		p.run.faults = 0
	}
	reached := n.connected
	if s, err := (xallocs{n}).Refresh(p.ctx); err == nil {
		p.mgr.OnAllocs(s)
	}
	n.lastPass = n.w.now
	if full {
		p.mgr.Reconcile(p.ctx)
		n.w.checkReleased(n, copied, reached && n.connected && !p.run.dead && p.run.faults == 0)
	} else {
		p.mgr.Settle(p.ctx)
	}
	n.fingerprint()
}

// fingerprint sends the plugin's view to the servers when it changed.
func (n *xnode) fingerprint() {
	if n.p == nil || !n.connected {
		return
	}
	v, _ := n.p.mgr.View()
	if v == nil {
		return
	}
	node := scheduler.Node{ID: n.id, Name: n.name}
	for _, cv := range v.Classes {
		g := scheduler.DeviceGroup{Class: cv.Class.Name, Attributes: map[string]string{"pool": pool, "node": n.name}}
		for _, s := range cv.Slots {
			g.Instances = append(g.Instances, scheduler.Instance{ID: s.ID, Healthy: s.Healthy, HealthDesc: s.Reason})
		}
		node.Devices = append(node.Devices, g)
	}
	if reflect.DeepEqual(node, n.registered) {
		return
	}
	n.registered = node
	if err := n.w.cluster.UpsertNode(node); err != nil {
		n.w.violate("harness", "UpsertNode %s: %v", n.name, err)
	}
	n.w.reevaluate()
}

// fill makes the node's pool full for a while: a sparse file in someone
// else's dataset takes what is left.
func (n *xnode) fill(d time.Duration) {
	path := filepath.Join(n.fake.Mountpoint(pool+"/filler"), "big")
	if err := os.Truncate(path, xPoolSize); err != nil {
		f, err := os.Create(path)
		if err != nil {
			n.w.violate("harness", "filling %s: %v", n.name, err)
			return
		}
		_ = f.Truncate(xPoolSize)
		_ = f.Close()
	}
	n.fullTill = n.w.now.Add(d)
	n.w.logf("%s: pool full for %s", n.name, d)
}

func (n *xnode) unfill() {
	_ = os.Remove(filepath.Join(n.fake.Mountpoint(pool+"/filler"), "big"))
	n.fullTill = time.Time{}
	// The pool has room from now, the end of the fault: XR6's calm
	// begins, whichever event's time passed fullTill (seed 9794674).
	n.w.rx.calmSince = latest(n.w.rx.calmSince, n.w.now)
	n.w.logf("%s: pool has room again", n.name)
}

// xallocs is the node's view of the servers, below the Allocs seam: its
// allocations, any allocation by ID, and its own client's. Cut off from
// the servers, only the local client answers.
type xallocs struct{ n *xnode }

var _ hooks.Allocs = xallocs{}

var errNoServers = errors.New("Unexpected response code: 500 (No cluster leader)")

func (x xallocs) Refresh(context.Context) (model.Snapshot, error) {
	if !x.n.connected {
		return model.Snapshot{}, errNoServers
	}
	s := model.Snapshot{NodeID: x.n.id, Index: x.n.w.cluster.Index(), At: x.n.w.now}
	for _, sa := range x.n.w.cluster.Allocs(x.n.id) {
		s.Allocs = append(s.Allocs, x.n.w.toModel(sa))
	}
	sort.Slice(s.Allocs, func(i, j int) bool { return s.Allocs[i].ID < s.Allocs[j].ID })
	return s, nil
}

func (x xallocs) Lookup(_ context.Context, id string) (model.Alloc, bool, error) {
	if !x.n.connected {
		return model.Alloc{}, false, errNoServers
	}
	sa := x.n.w.cluster.Alloc(id)
	if sa == nil {
		return model.Alloc{}, false, nil
	}
	return x.n.w.toModel(sa), true, nil
}

func (x xallocs) RunningLocally(_ context.Context, id string) (bool, error) {
	a, ok := x.n.local[id]
	return ok && a.phase != dead, nil
}

// toModel is the allocation as the watcher converts the API's answer
// (allocwatch.convertAlloc), its ModifyTime in simulated time (modified).
func (w *XWorld) toModel(sa *structs.Allocation) model.Alloc {
	a := toModel(sa)
	a.ModifyTime = w.modified[sa.ID].at
	return a
}

func toModel(sa *structs.Allocation) model.Alloc {
	a := model.Alloc{ID: sa.ID, Namespace: sa.Namespace, JobID: sa.JobID, TaskGroup: sa.TaskGroup, NodeID: sa.NodeID, Name: sa.Name,
		ClientStatus: sa.ClientStatus, DesiredStatus: sa.DesiredStatus, LostByServers: nomadapi.LostByServers(sa.DesiredDescription),
		ModifyIndex: sa.ModifyIndex, CreateIndex: sa.CreateIndex,
		PreviousAllocation: sa.PreviousAllocation, NextAllocation: sa.NextAllocation, TaskStates: map[string]string{}}
	if sa.Job != nil {
		a.JobType = sa.Job.Type
	}
	for name, ts := range sa.TaskStates {
		a.TaskStates[name] = ts.State
	}
	if sa.AllocatedResources != nil {
		tasks := make([]string, 0, len(sa.AllocatedResources.Tasks))
		for t := range sa.AllocatedResources.Tasks {
			tasks = append(tasks, t)
		}
		sort.Strings(tasks)
		for _, t := range tasks {
			for _, d := range sa.AllocatedResources.Tasks[t].Devices {
				ids := slices.Clone(d.DeviceIDs)
				sort.Strings(ids)
				a.Devices = append(a.Devices, model.Device{Task: t, Vendor: d.Vendor, Type: d.Type, Name: d.Name, IDs: ids})
			}
		}
	}
	return a
}

// xrunner is a plugin process's zfs.Runner (and Streamer) over its node's
// fake: the process dies when its budget of commands runs out, and every
// changing command is held to the parent (I5). A snapshot's files are
// recorded by guid, so that a copy received elsewhere is known (X2).
type xrunner struct {
	n      *xnode
	dead   bool
	budget int // commands left before the process dies; -1: no death
	// faults counts the commands that failed since a whole pass began,
	// other than as an answer (it does not exist, it exists already).
	faults int
}

var _ zfs.Streamer = (*xrunner)(nil)

func (r *xrunner) Run(ctx context.Context, cmd string, args ...string) ([]byte, error) {
	if err := r.before(cmd, args); err != nil {
		return nil, err
	}
	out, err := r.n.fake.Run(ctx, cmd, args...)
	r.after(cmd, args, err)
	if err == nil && r.n.w.encrypted {
		out = encrypted(args, out)
	}
	return out, err
}

// encrypted is the output of zfs list (-H, -o) as it reads when the
// parent is an encryption root: every dataset and snapshot below it says
// so in its encryption column.
func encrypted(args []string, out []byte) []byte {
	if len(args) == 0 || args[0] != "list" {
		return out
	}
	col := -1
	for i, a := range args[:len(args)-1] {
		if a == "-o" {
			col = slices.Index(strings.Split(args[i+1], ","), "encryption")
		}
	}
	if col < 0 {
		return out
	}
	lines := strings.SplitAfter(string(out), "\n")
	for i, l := range lines {
		f := strings.Split(strings.TrimSuffix(l, "\n"), "\t")
		if col < len(f) && (f[0] == parent || strings.HasPrefix(f[0], parent+"/") || strings.HasPrefix(f[0], parent+"@")) {
			f[col] = "aes-256-gcm"
			lines[i] = strings.Join(f, "\t") + strings.TrimPrefix(l, strings.TrimSuffix(l, "\n"))
		}
	}
	return []byte(strings.Join(lines, ""))
}

func (r *xrunner) Stream(ctx context.Context, cmd string, args []string, stdin io.Reader, stdout io.Writer) error {
	if err := r.before(cmd, args); err != nil {
		return err
	}
	err := r.n.fake.Stream(ctx, cmd, args, stdin, stdout)
	r.after(cmd, args, err)
	if err == nil && cmd == "zfs" && len(args) > 0 && args[0] == "receive" {
		// Within the receive, as a replication stream brings it: before
		// the client's listing of the copy (transfer.Result.Rows).
		r.n.replicate(args[len(args)-1])
	}
	return err
}

func (r *xrunner) before(cmd string, args []string) error {
	if r.dead {
		return errKilled
	}
	if r.budget == 0 {
		r.dead = true
		r.n.w.logf("%s: plugin dies before: %s %s", r.n.name, cmd, strings.Join(args, " "))
		return errKilled
	}
	if r.budget > 0 {
		r.budget--
	}
	r.n.noteWritten(cmd, args)
	if cmd == "zfs" {
		r.n.noteClaim(args)
	}
	if cmd == "zfs" && len(args) > 1 && mutating[args[0]] {
		for _, a := range args[1:] {
			if strings.HasPrefix(a, pool+"/") && !strings.HasPrefix(a, parent+"/") && !strings.Contains(a, "=") {
				r.n.w.violate("I5", "%s: zfs %s touches %s, outside %s", r.n.name, strings.Join(args, " "), a, parent)
			}
		}
	}
	return nil
}

// noteWritten records the values of the properties X9 follows that a
// command of the plugin sets (create, clone and snapshot -o, receive -o,
// set), whether or not it then succeeds.
func (n *xnode) noteWritten(cmd string, args []string) {
	if cmd != "zfs" || len(args) == 0 || args[0] == "list" || args[0] == "get" {
		return
	}
	for _, a := range args[1:] {
		k, v, ok := strings.Cut(a, "=")
		if !ok || !followed(k) {
			continue
		}
		if n.wrote[k] == nil {
			n.wrote[k] = map[string]bool{}
		}
		n.wrote[k][v] = true
	}
}

func (r *xrunner) after(cmd string, args []string, err error) {
	w := r.n.w
	if err != nil && !errors.Is(err, zfs.ErrNotExist) && !errors.Is(err, zfs.ErrExists) {
		r.faults++
	}
	if err != nil && len(args) > 0 && args[0] != "list" && args[0] != "get" && args[0] != "release" {
		w.logf("%s: zfs %s: %v", r.n.name, strings.Join(args, " "), short(err))
	}
	if err != nil || cmd != "zfs" || len(args) < 2 || args[0] != "snapshot" {
		return
	}
	// What the snapshot holds, read from its own data: the dataset may
	// not be mounted (parked data after a crash), and its files are there
	// all the same.
	// (zfs list takes the dataset, not the snapshot: an earlier version
	// listed the snapshot's name, was refused, and recorded nothing, so X2
	// only ever found data in mounted filesystems.)
	snap := args[len(args)-1]
	ds, _, _ := strings.Cut(snap, "@")
	sets, lerr := zfs.NewClient(r.n.fake).List(context.Background(), ds, nil)
	if lerr != nil {
		w.violate("harness", "%s: zfs list %s after its snapshot: %v", r.n.name, ds, lerr)
		return
	}
	for _, s := range sets {
		if s.Name == snap {
			w.snapContent[s.GUID] = strings.Join(r.n.filesAt(r.n.fake.DataDir(snap)), ",")
			w.snapAt[s.GUID] = w.now
		}
	}
}
