package sim

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/scheduler"
)

// XWorld is two nodes that each run the plugin, over a zfs fake of their
// own, with the data of a sticky class that migrates following its
// allocation from one node to the other (docs/lifecycle.md, "Data that
// follows its allocation to another node"). Nomad's own schedulers place
// the allocations (scheduler.Cluster); each node's Manager, its device
// plugin's Reserve and its pulls (on goroutines in lock step with the
// world: xpull.go) run as in the plugin's process; the two plugins talk
// through the transfer package's own Client and Server, joined in memory
// by a wire (xlink.go) that cuts streams, kills the sending plugin
// mid-stream, refuses to connect, lies, and stalls, and a sender that is
// hostile: the data asked for, with more than it (xhostile.go); forged
// requests go to the same servers (xforge.go). Invariants X1-X5 are
// checked from the tokens the tasks write (xcheck.go), X6 on the wire, X7
// from the parked data's marks around each pass, X8-X10 from each node's
// datasets against its class (xclaim.go); a process may hold parked data
// once it is copied whole (xbusy.go).
//
// In a third of the worlds pg keeps replicas and a third node exists
// (xreplica.go): each plugin's replica loop runs too, nodes may be lost for
// good (xloss.go), replacements take replicas over (xtakeover.go), and
// XR1-XR8 are checked (xrcheck.go, xtakeover.go).
//
// What it leaves to the one-node World: the watcher's Run and the Nomad
// HTTP API (each node here reads the servers' state below the Allocs
// seam), zfs error texts, strangers, the servers' state starting over and
// operator edits.
type XWorld struct {
	journal
	seed   uint64
	dir    string
	rng    *rand.Rand
	logger hclog.Logger

	cluster *scheduler.Cluster
	cfg     model.Config
	// nodes are the nodes that exist: two, or three in a world that keeps
	// replicas (so that a replica node need not be the replacement's); a
	// node lost for good leaves the slice (xloss.go).
	nodes []*xnode
	// replicas: pg keeps one replica of each held slot on another node
	// (xreplica.go), and a third node exists.
	replicas bool
	// lost are the nodes gone for good, pool and all.
	lost []*xnode
	// copied are the ended allocations whose final data X2 has seen
	// whole on a node other than their own (checkOwed).
	copied map[string]bool
	// snapAt is when each snapshot was taken, by guid: a replica's age
	// (XR6) is measured from it, not from the plugin's own marks.
	snapAt map[string]time.Time
	// rx is what the replica checks remember between events (xreplica.go).
	rx xreplicaState
	// tk is what the takeover's checks remember (xtakeover.go).
	tk xtakeovers
	// modified is each allocation's ModifyTime, in simulated time.
	modified map[string]xmodified
	// pulled are the nodes whose replica loops and pulls took their turns
	// at this event (XR6).
	pulled  []*xnode
	jobs    map[string]*xjob
	jobSeq  int
	allocID int
	// data is what each allocation's task found, wrote and left.
	data map[string]*xdata
	// link are the transport's faults now armed.
	link xfaults
	// holds: a process holds parked data answered copied whole (XBusy).
	holds xholds
	// hostileTill: until then, the sending plugins are hostile (XHostile),
	// the settle included.
	hostileTill time.Time
	// stalling counts the streams now paused inside a stall (xstall): a
	// fault the world injected, in progress until each goes on, however
	// long after the event that armed it (XR6 waits it out).
	stalling int
	// turn is the pull that runs now (nil: the world's goroutine).
	turn *xpull
	// reserving: a Reserve runs (only one at a time: a Reserve's waits run
	// passes, pulls and kills, never another start); reserveStart is when.
	reserving    *xnode
	reserveStart time.Time
	// starting is the allocation whose start that is: its client does
	// nothing else for it meanwhile.
	starting string
	// blocked is a pass that waited for the running Reserve; joined once
	// it returned.
	blocked chan struct{}
	// broken: the harness cannot go on (a goroutine that never came back).
	broken bool
	// encrypted: the parent is an encryption root, so every dataset below
	// it is encrypted, and the data travels as raw sends (xrunner reports
	// it: zfstest does not emulate encryption).
	encrypted bool
	// snapContent is the files of every snapshot taken, by guid: what a
	// received copy holds (X2).
	snapContent map[string]string
	// replicating are the copies whose receive now running a hostile
	// sender's replication stream feeds (hostileChild): a dataset below
	// comes with it.
	replicating map[string]bool

	counts XCounts
}

// XCounts are what a schedule did, summed over a run for its report.
type XCounts struct {
	Streams, Cuts, PeerKills, Resumes, TokensRefused, Lies, LiesCaught, Forged, ForgedRefused                int
	Complete, HandedOver, HandedOverRemote, StartedEmpty, StartFailed, PluginKills, PoolFull, NodeDown, Busy int
	Hostile, Stalls                                                                                          int
	ReplicaStreams, ReplicaCuts, ReplicaResumes, ReplicaWorlds, NodesLost                                    int
	LostStopAfter, LostReplicated, Takeovers                                                                 int
	// HandedOverUnlinked are hand-overs to a replacement Nomad does not
	// link, from a lost allocation's node back (handedOverUnlinked).
	HandedOverUnlinked int
	// LostEndedBack are allocations lost under
	// stop_after_client_disconnect that their node, back, ended since.
	LostEndedBack int
}

func (c *XCounts) add(o XCounts) {
	c.Streams += o.Streams
	c.Cuts += o.Cuts
	c.PeerKills += o.PeerKills
	c.Resumes += o.Resumes
	c.TokensRefused += o.TokensRefused
	c.Lies += o.Lies
	c.LiesCaught += o.LiesCaught
	c.Forged += o.Forged
	c.ForgedRefused += o.ForgedRefused
	c.Complete += o.Complete
	c.HandedOver += o.HandedOver
	c.HandedOverRemote += o.HandedOverRemote
	c.StartedEmpty += o.StartedEmpty
	c.StartFailed += o.StartFailed
	c.PluginKills += o.PluginKills
	c.PoolFull += o.PoolFull
	c.NodeDown += o.NodeDown
	c.Busy += o.Busy
	c.Hostile += o.Hostile
	c.Stalls += o.Stalls
	c.ReplicaStreams += o.ReplicaStreams
	c.ReplicaCuts += o.ReplicaCuts
	c.ReplicaResumes += o.ReplicaResumes
	c.ReplicaWorlds += o.ReplicaWorlds
	c.NodesLost += o.NodesLost
	c.LostStopAfter += o.LostStopAfter
	c.Takeovers += o.Takeovers
	c.LostReplicated += o.LostReplicated
	c.HandedOverUnlinked += o.HandedOverUnlinked
	c.LostEndedBack += o.LostEndedBack
}

func (c XCounts) String() string {
	return fmt.Sprintf("%d streams (%d cut, %d with the sender killed, %d resumed, %d tokens refused), "+
		"%d lies (%d caught), %d forged requests (%d refused), %d copies complete, "+
		"%d hand-overs (%d across nodes), %d started empty, %d starts failed, %d plugin kills, %d pools full, %d nodes down, "+
		"%d parked data held busy, %d hostile streams, %d stalled; "+
		"%d worlds of three nodes keeping replicas: %d replica pulls streamed (%d cut, %d resumed), %d nodes lost for good, "+
		"%d allocations lost under stop_after_client_disconnect (%d with a replica, %d ended by their node back), "+
		"%d replicas taken over, %d hand-overs to a replacement Nomad does not name",
		c.Streams, c.Cuts, c.PeerKills, c.Resumes, c.TokensRefused, c.Lies, c.LiesCaught, c.Forged, c.ForgedRefused,
		c.Complete, c.HandedOver, c.HandedOverRemote, c.StartedEmpty, c.StartFailed, c.PluginKills, c.PoolFull, c.NodeDown, c.Busy,
		c.Hostile, c.Stalls, c.ReplicaWorlds, c.ReplicaStreams, c.ReplicaCuts, c.ReplicaResumes, c.NodesLost,
		c.LostStopAfter, c.LostReplicated, c.LostEndedBack, c.Takeovers, c.HandedOverUnlinked)
}

// xjob is a submitted job: one group of one task asking one slot of pg,
// pinned to a node by a device constraint or not.
type xjob struct {
	id      string
	version int
	on      string // the node name it is constrained to, "" for any
	kill    time.Duration
	stopped bool
	// stopAfter is its group's stop_after_client_disconnect, 0 for none
	// (xtakeover.go).
	stopAfter time.Duration
}

// xdata is one allocation's data as its task saw it.
type xdata struct {
	node, prev string
	// inherited is what its slot held when its task started; wrote its
	// own tokens since, in order.
	inherited []string
	wrote     []string
	started   bool
	startedAt time.Time
	// firstAsked is when its first start's Reserve began.
	firstAsked time.Time
	// final is what its slot held when its task ended (set once ended).
	final   []string
	ended   bool
	endedAt time.Time
}

// content is what the task's slot must hold while it runs.
func (d *xdata) content() []string {
	out := append(slices.Clone(d.inherited), d.wrote...)
	sort.Strings(out)
	return out
}

// Two-node world's constants: the class's migrate timeout and sticky_wait
// are short, so that a schedule sees them pass.
const (
	xMigrateTimeout = time.Minute
	xStickyWait     = 5 * time.Minute
	xPoolSize       = 1 << 30
)

// xClassProps are the class's limits, on both nodes: each slot and each
// copy received for it carries them (X8); a copy larger is refused (X10).
// The tasks' tokens take a few KiB.
var xClassProps = map[string]string{"quota": "2M", "refquota": "1M", "compression": "lz4"}

// NewX builds a two-node world in a fresh directory below dir.
func NewX(seed uint64, dir string, logger hclog.Logger) (*XWorld, error) {
	d, err := os.MkdirTemp(dir, fmt.Sprintf("xsim-%d-", seed))
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	w := &XWorld{journal: journal{now: epoch}, seed: seed, dir: d, logger: logger, rng: rand.New(rand.NewPCG(seed, 1)),
		jobs: map[string]*xjob{}, data: map[string]*xdata{}, snapContent: map[string]string{}, replicating: map[string]bool{},
		snapAt: map[string]time.Time{}}
	onTimeout := model.MigrateFail
	if w.rng.IntN(2) == 0 {
		onTimeout = model.MigrateStartEmpty
	}
	policy := model.PolicyDestroy
	if w.rng.IntN(2) == 0 {
		policy = model.PolicySnapshot
	}
	w.cfg = model.Config{Parent: parent, ScanInterval: 15 * time.Second, Classes: []model.Class{
		{Name: "pg", Slots: 2, MountPath: "/data", Sticky: true, StickyWait: xStickyWait, Properties: xClassProps,
			Release: model.Release{Policy: policy, Retain: xStickyWait, RetainMax: 4},
			Migrate: model.Migrate{Enabled: true, Timeout: xMigrateTimeout, OnTimeout: onTimeout}},
	}}
	w.encrypted = w.rng.IntN(2) == 0
	// Replicas in a third of the worlds, drawn apart from the world's own
	// stream: every draw of the others is as it was, so the regressions'
	// schedules (none of them a replica world) replay unchanged.
	w.replicas = replicaWorld(seed)
	nodes := 2
	if w.replicas {
		w.cfg.Classes[0].Replicate = model.Replicate{Copies: replicaCopies(seed), Every: xReplicaEvery}
		w.counts.ReplicaWorlds++
		nodes = 3
	}
	w.logf("world: pg migrates, on_timeout = %q, release %s, encrypted %v, replicas %v (copies %d)", onTimeout, policy, w.encrypted, w.replicas,
		w.cfg.Classes[0].Replicate.Copies)
	w.cluster, err = scheduler.New(scheduler.Options{Preemption: true, Pick: w.pick, AllocID: w.nextAllocID})
	if err != nil {
		return nil, err
	}
	for i := range nodes {
		n, err := w.newNode(i)
		if err != nil {
			return nil, err
		}
		w.nodes = append(w.nodes, n)
	}
	for _, n := range w.nodes {
		n.launch("start")
		n.fingerprint()
	}
	return w, nil
}

// Close stops both plugins and removes the world's files.
func (w *XWorld) Close() {
	for _, n := range append(slices.Clone(w.nodes), w.lost...) {
		if n != nil && n.p != nil && !w.broken {
			n.stop()
		}
	}
	_ = os.RemoveAll(w.dir)
}

// Run applies the events, checking the invariants after each, then lets
// both nodes settle and checks the quiescent ones. It stops at the first
// violation.
func (w *XWorld) Run(events []Event) []Violation {
	for i, e := range events {
		w.events = i + 1
		w.rng = rand.New(rand.NewPCG(e.Arg, uint64(e.Kind)))
		w.advance(e.Dt)
		w.logf("[%d] %s", e.Index, XKind(e.Kind))
		w.pulled = nil
		if XKind(e.Kind) == XPulls {
			w.pulled = []*xnode{w.pickNode(e.Arg)}
		}
		w.apply(e)
		if calmBreaker(XKind(e.Kind)) || w.link.armed() {
			w.rx.calmSince = w.now
		}
		w.reap()
		w.noteModified()
		w.noteLosses()
		w.followUps()
		if w.broken {
			return w.violations
		}
		w.check()
		if len(w.violations) > 0 {
			return w.violations
		}
	}
	w.events = len(events) + 1
	w.settle()
	return w.violations
}

// reap relaunches a plugin that died (its runner's budget ran out, or the
// transport killed it mid-stream): the client agent does.
func (w *XWorld) reap() {
	for _, n := range w.nodes {
		if n.p != nil && n.p.run.dead {
			n.stop()
			w.logf("%s: plugin died", n.name)
		}
		if n.p == nil && !w.broken {
			n.launch("relaunched after a crash")
		}
	}
}

// advance moves simulated time; kills that are due finish on both nodes.
func (w *XWorld) advance(d time.Duration) {
	if d <= 0 {
		return
	}
	w.now = w.now.Add(d)
	w.heartbeatStops()
	for _, n := range w.nodes {
		n.finishKills()
		if !w.now.Before(n.fullTill) && n.fullTill != (time.Time{}) {
			n.unfill()
		}
		n.letGo()
	}
	if w.link.downTill.Before(w.now) {
		// The link is back: XR6's calm begins then, though an event's
		// own wait (a Reserve's) may have passed it (seed 9790014).
		w.rx.calmSince = latest(w.rx.calmSince, w.link.downTill)
		w.link.downTill = time.Time{}
	}
}

// clock is the plugins' clock: simulated time that moves a microsecond on
// every reading.
func (w *XWorld) clock() time.Time {
	w.now = w.now.Add(time.Microsecond)
	return w.now
}

func (w *XWorld) pick(free []string, n int) []string {
	perm := w.rng.Perm(len(free))
	out := make([]string, n)
	for i := range out {
		out[i] = free[perm[i]]
	}
	return out
}

func (w *XWorld) nextAllocID() string {
	w.allocID++
	return fmt.Sprintf("%08x-0000-4000-800b-%012x", w.seed&0xffffffff, w.allocID)
}

// node returns the node with that ID (one lost too), nil for none.
func (w *XWorld) node(id string) *xnode {
	for _, n := range append(slices.Clone(w.nodes), w.lost...) {
		if n.id == id {
			return n
		}
	}
	return nil
}

// other is a node that is not n: the first other one.
func (w *XWorld) other(n *xnode) *xnode {
	for _, o := range w.nodes {
		if o != n {
			return o
		}
	}
	return n
}

// pickNode is the node an event's arg picks: of two as before in a world
// of two (its schedules replay as they did), of those there are in one of
// three.
func (w *XWorld) pickNode(arg uint64) *xnode {
	if !w.replicas {
		return w.nodes[arg%2]
	}
	return w.nodes[arg%uint64(len(w.nodes))]
}

// PlayX runs one schedule in a fresh two-node world.
func PlayX(seed uint64, events []Event, o Options) (Result, XCounts) {
	w, err := NewX(seed, o.Dir, o.Logger)
	if err != nil {
		return Result{Seed: seed, Events: events, Violations: []Violation{{Invariant: "harness", Detail: err.Error()}}}, XCounts{}
	}
	defer w.Close()
	v := w.Run(events)
	return Result{Seed: seed, Events: events, Violations: v, Timeline: w.timeline}, w.counts
}
