package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/scheduler"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// The simulated node and its datasets.
const (
	nodeID     = "00000000-0000-4000-8000-00000000000a"
	pool       = "tank"
	parent     = "tank/nomad"
	reserveTO  = time.Minute // reserve_timeout's default
	hiddenNS   = "team"      // the namespace APIForbid hides
	maxJobs    = 6
	lostAfter  = 2 * time.Minute
	settleTime = 20 * time.Minute
)

// epoch is when every world starts: far past any real clock, so that a
// deadline in simulated time (reserve_timeout's, taken from the plugin's
// clock) never fires by the real one; simulated time ends it (sleep).
var epoch = time.Unix(10_000_000_000, 0).UTC()

// World is one simulated node: the real hooks.Manager and allocwatch
// Watcher over a zfstest.Fake and a simulated Nomad HTTP API, with Nomad's
// own scheduler placing allocations. Everything runs on the caller's
// goroutine (the API's handler only reads), in simulated time.
type World struct {
	journal
	seed uint64
	dir  string
	rng  *rand.Rand // reseeded from each event's Arg
	// everSticky: the classes that have been sticky; their replacements
	// may see their predecessors' data (I1).
	everSticky map[string]bool
	// prevOf is every pulled allocation's PreviousAllocation, kept after
	// the client drops it.
	prevOf map[string]string
	logger hclog.Logger

	fake    *zfstest.Fake
	cluster *scheduler.Cluster
	// node is the node as last fingerprinted; saved, the servers' state
	// the operator saved last (ClusterBackup).
	node    scheduler.Node
	saved   *savedState
	api     *api
	cfg     model.Config
	plugin  *plugin // nil while dead
	pending *cliRelease

	// jobs are the submitted jobs by ID, as last registered.
	jobs    map[string]*jobSpec
	jobSeq  int
	allocID int

	// mu guards local, read by the API's handler.
	mu    sync.Mutex
	local map[string]*localAlloc

	connected bool
	apiF      apiFaults // what the API's handler reads, under mu
	// watching is the plugin's watcher loop, where the API's handler
	// parks a blocking query; under mu.
	watching *watchLoop
	busyTill map[string]time.Time
	foreign  []foreignThing
	// strangerSeq numbers the strangers (Stranger events).
	strangerSeq int
	// zfsFaults are the failures the plugin's next zfs commands meet.
	zfsFaults []*zfsFault
	// zfsChanged: a command that changes ZFS ran since the last check.
	zfsChanged bool

	// cutAt and cutStatus: when the node was cut off, and what the
	// servers made of it (disconnected or down; see disconnect).
	cutAt     time.Time
	cutStatus string
	// remoteUp: the other node, where replacements go while this one is
	// cut off, is up (see disconnect).
	remoteUp bool

	// cmds counts the zfs commands of the current event.
	cmds int
	// reserving are the starts of the Reserves under way, outermost
	// first (the client starts others while one waits); locked counts
	// their slots, starting their allocations; goingOn is set while the
	// node goes on during one (nodeGoesOn).
	reserving []time.Time
	locked    map[string]int
	starting  map[string]bool
	goingOn   bool
	// blocked is what the node did while a Reserve waited and could not
	// finish (meanwhile); joined once that Reserve returned.
	blocked chan struct{}
	// hides counts the API's answers that hid an allocation from the
	// token (under mu).
	hides int
	// kept is the retained data as last seen, by GUID.
	kept map[string]keptData
	// passErrs counts the failed zfs commands since a pass began.
	passErrs int
	// resetAt is when the servers' state last started over (ClusterReset).
	resetAt time.Time
}

// Violation is an invariant broken, found from data.
type Violation struct {
	Invariant string // I1..I5, liveness, harness
	Detail    string
	Event     int // index of the event after which it was seen; -1 in settle
}

func (v Violation) String() string {
	return fmt.Sprintf("%s after event %d: %s", v.Invariant, v.Event, v.Detail)
}

// journal is what a world records of a run, at its simulated now: the
// timeline for a failure report, the invariants broken (each way once),
// and how many events it has applied. Both worlds keep one.
type journal struct {
	now        time.Time
	timeline   []string
	violations []Violation
	events     int
}

func (j *journal) logf(format string, a ...any) {
	j.timeline = append(j.timeline, fmt.Sprintf("%8s  ", j.now.Sub(epoch).Truncate(time.Millisecond))+fmt.Sprintf(format, a...))
}

// violate records invariant inv broken, after the event being applied,
// unless it was broken the same way already.
func (j *journal) violate(inv, format string, a ...any) {
	v := Violation{Invariant: inv, Detail: fmt.Sprintf(format, a...), Event: j.events - 1}
	for _, o := range j.violations {
		if o.Invariant == v.Invariant && o.Detail == v.Detail {
			return
		}
	}
	j.violations = append(j.violations, v)
	j.logf("!!! VIOLATION %s: %s", inv, v.Detail)
}

type jobSpec struct {
	job     scheduler.Job
	stopped bool
	// kill is how long its tasks take to stop.
	kill time.Duration
}

// New builds a world in a fresh directory below dir.
func New(seed uint64, dir string, logger hclog.Logger) (*World, error) {
	d, err := os.MkdirTemp(dir, fmt.Sprintf("sim-%d-", seed))
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	w := &World{journal: journal{now: epoch}, seed: seed, dir: d, logger: logger,
		jobs: map[string]*jobSpec{}, local: map[string]*localAlloc{}, connected: true,
		busyTill: map[string]time.Time{}, prevOf: map[string]string{}, rng: rand.New(rand.NewPCG(seed, 1)),
		locked: map[string]int{}, starting: map[string]bool{}}
	w.apiF = apiFaults{now: w.now, connected: true}
	w.fake = zfstest.New(zfstest.Options{MountRoot: filepath.Join(d, "mnt"), Now: func() time.Time { return w.now }})
	if err := w.fake.AddPool(pool, 64<<30); err != nil {
		return nil, err
	}
	w.cluster, err = scheduler.New(scheduler.Options{Preemption: true, Pick: w.pick, AllocID: w.nextAllocID})
	if err != nil {
		return nil, err
	}
	if w.api, err = newAPI(w); err != nil {
		return nil, err
	}
	// pg is sticky in half the worlds: its replacements inherit its data.
	sticky := w.rng.IntN(2) == 0
	// scratch keeps failed data in half the worlds; in the others it rolls
	// back for every outcome, and so writes no releasing mark first. Drawn
	// from a stream of its own: the schedule a seed gives is unchanged.
	onFailure := model.PolicySnapshot
	if rand.New(rand.NewPCG(seed, 2)).IntN(2) == 0 {
		onFailure = ""
	}
	w.cfg = model.Config{Parent: parent, ScanInterval: 15 * time.Second, Classes: []model.Class{
		{Name: "pg", Slots: 2, MountPath: "/data", Release: model.Release{Policy: model.PolicyDestroy},
			Sticky: sticky, StickyWait: 10 * time.Minute},
		{Name: "scratch", Slots: 2, MountPath: "/scratch", Release: model.Release{Policy: model.PolicyRollback, OnFailure: onFailure, Retain: 10 * time.Minute, RetainMax: 2}},
	}}
	w.noteSticky()
	w.logf("world: pg sticky = %v; scratch rollback, on_failure = %q", sticky, onFailure)
	if err := w.setupZFS(); err != nil {
		return nil, err
	}
	w.node = scheduler.Node{ID: nodeID, Name: "node-a"}
	if err := w.cluster.UpsertNode(w.node); err != nil {
		return nil, err
	}
	w.launch("start")
	return w, nil
}

// Close removes the world's files and stops its API.
func (w *World) Close() {
	if w.plugin != nil {
		w.stop(w.plugin)
	}
	w.api.close()
	_ = os.RemoveAll(w.dir)
}

// Timeline is what happened, one line per step.
func (w *World) Timeline() []string { return w.timeline }

// Violations found so far.
func (w *World) Violations() []Violation { return w.violations }

// Run applies the events in order, checking the invariants after each,
// then lets the system settle and checks the quiescent ones. It stops at
// the first violation.
func (w *World) Run(events []Event) []Violation {
	for i, e := range events {
		w.events = i + 1
		w.rng = rand.New(rand.NewPCG(e.Arg, uint64(e.Kind)))
		w.advance(e.Dt)
		w.cmds = 0
		w.logf("[%d] %s", e.Index, e.Kind)
		w.recheck()
		w.apply(e)
		if w.plugin == nil {
			w.launch("relaunched by the client after a crash")
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

// pick is Nomad's choice of free instances, made reproducible.
func (w *World) pick(free []string, n int) []string {
	perm := w.rng.Perm(len(free))
	out := make([]string, n)
	for i := range out {
		out[i] = free[perm[i]]
	}
	return out
}

func (w *World) nextAllocID() string {
	w.allocID++
	return fmt.Sprintf("%08x-0000-4000-800a-%012x", w.seed&0xffffffff, w.allocID)
}

// clock is the Manager's clock: simulated time that moves a microsecond
// on every reading, as a real clock never stands still.
func (w *World) clock() time.Time {
	w.now = w.now.Add(time.Microsecond)
	return w.now
}

// advance moves simulated time; slow kills that are due finish.
func (w *World) advance(d time.Duration) {
	if d <= 0 {
		return
	}
	w.now = w.now.Add(d)
	w.setFaults(func(f *apiFaults) { f.now = w.now })
	w.expireLostAfter()
	w.finishKills()
	if w.connected {
		w.dropGCd() // the client syncs with the servers as time passes
	}
	for name, till := range w.busyTill {
		if !w.now.Before(till) {
			_ = w.fake.SetBusy(name, false)
			delete(w.busyTill, name)
		}
	}
}

// foreignThing is something the plugin does not own and must not touch.
type foreignThing struct {
	name string
	guid string
	file string // a file in it, "" for a snapshot
	// temp: a stranger the operator removes again (at settle at the
	// latest); the others stay for good.
	temp bool
}

// setupZFS creates the parent (the operator's) and things the plugin must
// never touch: a dataset outside the parent, an unmarked one inside it,
// an unmarked child of a class dataset (it inherits the class's owner
// mark, which names the class, not itself), and a snapshot.
func (w *World) setupZFS() error {
	z := zfs.NewClient(w.fake)
	ctx := context.Background()
	for _, name := range []string{parent, pool + "/outside", parent + "/foreign"} {
		if err := z.Create(ctx, name, nil); err != nil {
			return err
		}
	}
	if err := z.Snapshot(ctx, parent+"/foreign@keep", nil); err != nil {
		return err
	}
	// The class dataset as the plugin would make it, with a foreign child.
	if err := z.Create(ctx, parent+"/pg", map[string]string{model.PropOwner: parent + "/pg"}); err != nil {
		return err
	}
	if err := z.Create(ctx, parent+"/pg/foreign-child", nil); err != nil {
		return err
	}
	for _, name := range []string{pool + "/outside", parent + "/foreign", parent + "/pg/foreign-child", parent + "/foreign@keep"} {
		ft := foreignThing{name: name}
		if !strings.Contains(name, "@") {
			ft.file = filepath.Join(w.fake.Mountpoint(name), "precious")
			if err := os.WriteFile(ft.file, []byte(name), 0o644); err != nil {
				return err
			}
		}
		w.foreign = append(w.foreign, ft)
	}
	sets, err := z.List(ctx, pool, nil)
	if err != nil {
		return err
	}
	for i := range w.foreign {
		for _, d := range sets {
			if d.Name == w.foreign[i].name {
				w.foreign[i].guid = d.GUID
			}
		}
	}
	return nil
}

// sortedLocal lists the local allocations by creation order.
func (w *World) sortedLocal() []*localAlloc {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*localAlloc, 0, len(w.local))
	for _, a := range w.local {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// noteSticky records the classes the configuration makes sticky.
func (w *World) noteSticky() {
	if w.everSticky == nil {
		w.everSticky = map[string]bool{}
	}
	for _, c := range w.cfg.Classes {
		if c.Sticky {
			w.everSticky[c.Name] = true
		}
	}
}
