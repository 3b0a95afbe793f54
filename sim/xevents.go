package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/nomad/nomad/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/scheduler"
)

// XKind is one kind of event of the two-node world. An Event's Kind holds
// it; its Arg picks the node, the job, the allocation.
type XKind int

const (
	XPass       XKind = iota // a node's plugin runs a whole Reconcile pass
	XSettle                  // a node's plugin settles the watcher's news
	XPulls                   // a node's pulls that are due take their turns
	XClientStep              // a node's client moves one allocation a step (a start is a Reserve)
	XWrite                   // a running task writes another token into its slot
	XTick                    // time passes

	XSubmit    // a new job, pinned to a node or not
	XMove      // a destructive update whose replacement Nomad places on the other node (a constraint change)
	XUpdate    // a destructive update with the same constraint
	XStopJob   // nomad job stop
	XTaskFail  // a running task fails: Nomad reschedules it, maybe on the other node
	XGC        // the servers collect terminal allocations
	XNodeDown  // a node misses its heartbeats: down, its allocations lost and replaced elsewhere; its plugin unreachable
	XNodeUp    // a node is back
	XBusy      // for a while, a process holds parked data answered copied whole, a while each: its destroy fails as busy
	XCut       // the next streams are cut at a random byte
	XPeerKill  // the next stream is cut by the sending plugin's death
	XLinkDown  // the plugins cannot reach each other for a while
	XLie       // the next answer lies (a forged guid, another allocation's data, "complete" too early)
	XForge     // someone asks a node for data it must not send (another replacement, the wrong node, a forged token)
	XPoolFull  // a node's pool is full for a while
	XPluginDie // a node's plugin dies within its next few zfs commands
	XHostile   // for a while, every whole stream is a hostile sender's: the plugin's own properties, a dataset below, more than the quota
	XStall     // the next stream stops for a while, then goes on (or is cut, if its sender died or the link went meanwhile)

	numXKinds
)

var xKindNames = [...]string{"pass", "settle", "pulls", "client-step", "write", "tick",
	"submit", "move", "update", "stop-job", "task-fail", "gc", "node-down", "node-up", "busy",
	"cut", "peer-kill", "link-down", "lie", "forge", "pool-full", "plugin-die", "hostile", "stall"}

func (k XKind) String() string {
	if k >= 0 && int(k) < len(xKindNames) {
		return xKindNames[k]
	}
	return fmt.Sprintf("xkind(%d)", int(k))
}

// xDraw are the kinds' ranges in the order a draw walks them, each with
// its weight: how often it is drawn. A new kind takes its weight from a
// neighbour's range, at an end where no event of the regressions'
// schedules (TestTwoNodeRegressions) falls, so that every other event a
// seed drew before is drawn the same and they replay unchanged: XBusy took
// the top of XNodeUp's range; XHostile the bottom of XSettle's and the top
// of XUpdate's (a kind may have more than one range); XStall the bottom of
// XCut's. New kinds are numbered last: an event's Kind seeds its own draws
// (XWorld.Run), so the old kinds keep their numbers.
var xDraw = []struct {
	kind   XKind
	weight int
}{
	{XPass, 8}, {XHostile, 1}, {XSettle, 9}, {XPulls, 16}, {XClientStep, 26}, {XWrite, 8}, {XTick, 6},
	{XSubmit, 5}, {XMove, 6}, {XUpdate, 1}, {XHostile, 1}, {XStopJob, 2}, {XTaskFail, 2}, {XGC, 2}, {XNodeDown, 1},
	{XNodeUp, 1}, {XBusy, 1}, {XStall, 1}, {XCut, 2}, {XPeerKill, 2}, {XLinkDown, 1}, {XLie, 2}, {XForge, 2},
	{XPoolFull, 1}, {XPluginDie, 3},
}

// GenerateX draws n events of the two-node world from seed.
func GenerateX(seed uint64, n int) []Event {
	rng := rand.New(rand.NewPCG(seed, 0x5eed2))
	total := 0
	for _, d := range xDraw {
		total += d.weight
	}
	out := make([]Event, 0, n)
	for len(out) < n {
		r := rng.IntN(total)
		k := XKind(0)
		for _, d := range xDraw {
			if k = d.kind; r < d.weight {
				break
			}
			r -= d.weight
		}
		out = append(out, Event{Kind: Kind(k), Arg: rng.Uint64(), Dt: time.Duration(rng.IntN(8000)) * time.Millisecond, Index: len(out)})
	}
	if takeoverSchedule(seed) {
		shapeForTakeover(out)
	}
	return out
}

// apply carries out one event.
func (w *XWorld) apply(e Event) {
	n := w.pickNode(e.Arg)
	switch XKind(e.Kind) {
	case XPass:
		n.pass(true)
	case XSettle:
		n.pass(false)
	case XPulls:
		n.runPulls()
	case XClientStep:
		if ms := n.moves(); len(ms) > 0 {
			ms[(e.Arg/2)%uint64(len(ms))].fn()
		}
	case XWrite:
		var live []*xalloc
		for _, n := range w.nodes {
			for _, a := range n.sortedLocal() {
				if a.phase == running {
					live = append(live, a)
				}
			}
		}
		if len(live) > 0 {
			a := live[w.rng.IntN(len(live))]
			w.node(w.nodeOfLocal(a)).write(a)
		}
	case XTick:
		w.advance(time.Duration(w.rng.IntN(90)) * time.Second)
	case XSubmit:
		w.submit()
	case XMove, XUpdate:
		w.update(XKind(e.Kind) == XMove)
	case XStopJob:
		if j := w.pickJob(); j != nil {
			j.stopped = true
			w.logf("job %s stopped", j.id)
			w.eval(w.cluster.Deregister("", j.id))
		}
	case XTaskFail:
		w.taskFail()
	case XGC:
		w.gc()
	case XNodeDown:
		if t := w.takeoverTarget(); t != nil {
			n = t
		}
		if w.replicas && len(w.nodes) == 3 && w.rng.IntN(2) == 0 {
			w.nodeLost(n)
			break
		}
		w.nodeDown(n)
	case XNodeUp:
		w.nodeUp(n)
	case XBusy:
		w.holds = xholds{till: w.now.Add(time.Duration(1+w.rng.IntN(10)) * time.Minute), each: time.Duration(10+w.rng.IntN(170)) * time.Second}
		w.logf("until +%s, a process holds parked data answered copied whole for %s", w.holds.till.Sub(epoch).Truncate(time.Second), w.holds.each)
	case XCut:
		w.link.cuts += 1 + w.rng.IntN(3)
		w.logf("the next %d streams are cut", w.link.cuts)
	case XPeerKill:
		w.link.killSender = true
	case XLinkDown:
		w.link.downTill = w.now.Add(time.Duration(10+w.rng.IntN(110)) * time.Second)
		w.logf("the plugins cannot reach each other until +%s", w.link.downTill.Sub(epoch))
	case XLie:
		w.link.lie = lieKind(1 + w.rng.IntN(int(numLies)-1))
		w.logf("the next answer lies: %s", w.link.lie)
	case XForge:
		w.forge()
	case XPoolFull:
		w.counts.PoolFull++
		n.fill(time.Duration(10+w.rng.IntN(110)) * time.Second)
	case XPluginDie:
		if n.p != nil {
			n.p.run.budget = w.rng.IntN(30)
			w.counts.PluginKills++
			w.logf("%s: the plugin dies within %d zfs commands", n.name, n.p.run.budget)
		}
	case XHostile:
		w.hostileTill = w.now.Add(time.Duration(1+w.rng.IntN(5)) * time.Minute)
		w.logf("until +%s, every whole stream is a hostile sender's", w.hostileTill.Sub(epoch).Truncate(time.Second))
	case XStall:
		w.link.stalls++
		w.logf("the next stream stops for a while")
	}
}

func (w *XWorld) nodeOfLocal(a *xalloc) string {
	for _, n := range w.nodes {
		if n.local[a.id] == a {
			return n.id
		}
	}
	return ""
}

// xjobSpec is the job as Nomad registers it: its task asks one slot of pg,
// on node j.on's devices when pinned.
func (j *xjob) spec() scheduler.Job {
	ask := scheduler.Ask{Class: "pg", Count: 1}
	if j.on != "" {
		ask.Constraints = [][3]string{{"node", "=", j.on}}
	}
	return scheduler.Job{ID: j.id, Groups: []scheduler.Group{{Name: "g", Count: 1, StopAfter: j.stopAfter, Tasks: []scheduler.Task{
		{Name: "main", Version: fmt.Sprint(j.version), KillTimeout: j.kill, Devices: []scheduler.Ask{ask}}}}}}
}

func (w *XWorld) submit() {
	live := 0
	for _, j := range w.jobs {
		if !j.stopped {
			live++
		}
	}
	if live >= 3 {
		return
	}
	w.jobSeq++
	j := &xjob{id: fmt.Sprintf("db%d", w.jobSeq), kill: time.Duration(w.rng.IntN(4)) * 10 * time.Second}
	if w.rng.IntN(3) > 0 {
		j.on = w.nodes[w.rng.IntN(len(w.nodes))].name
	}
	if j.stopAfter = w.stopAfterOf(w.jobSeq); j.stopAfter > 0 {
		// Nomad may place its replacement on any node once its own is
		// lost (a replica node among them): the takeover's case.
		j.on = ""
	}
	w.jobs[j.id] = j
	w.logf("submit %s (on %q, kill %s, stop_after_client_disconnect %s)", j.id, j.on, j.kill, j.stopAfter)
	w.eval(w.cluster.Register(j.spec()))
}

// update replaces a job's allocation: move pins it to the node it is not
// on now (as an operator's constraint or affinity change does).
func (w *XWorld) update(move bool) {
	j := w.pickJob()
	if j == nil {
		return
	}
	j.version++
	if move {
		on := ""
		for _, sa := range w.jobAllocs(j.id) {
			if sa.DesiredStatus == structs.AllocDesiredStatusRun && !sa.ClientTerminalStatus() {
				on = w.node(sa.NodeID).name
			}
		}
		for _, n := range w.nodes {
			if n.name != on {
				j.on = n.name
				break
			}
		}
	}
	w.logf("update %s to version %d (on %q)", j.id, j.version, j.on)
	w.eval(w.cluster.Register(j.spec()))
}

func (w *XWorld) pickJob() *xjob {
	var live []*xjob
	for i := 1; i <= w.jobSeq; i++ {
		if j := w.jobs[fmt.Sprintf("db%d", i)]; j != nil && !j.stopped {
			live = append(live, j)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[w.rng.IntN(len(live))]
}

func (w *XWorld) jobAllocs(job string) []*structs.Allocation {
	var out []*structs.Allocation
	for _, n := range w.nodes {
		for _, sa := range w.cluster.Allocs(n.id) {
			if sa.JobID == job {
				out = append(out, sa)
			}
		}
	}
	return out
}

func (w *XWorld) taskFail() {
	var live []*xalloc
	for _, n := range w.nodes {
		for _, a := range n.sortedLocal() {
			if a.phase == running {
				live = append(live, a)
			}
		}
	}
	if len(live) == 0 {
		return
	}
	a := live[w.rng.IntN(len(live))]
	w.node(w.nodeOfLocal(a)).finish(a, structs.AllocClientStatusFailed, "task failed")
}

func (w *XWorld) gc() {
	var ids []string
	for _, n := range w.nodes {
		for _, sa := range w.cluster.Allocs(n.id) {
			if sa.TerminalStatus() && sa.ClientTerminalStatus() {
				ids = append(ids, sa.ID)
			}
		}
	}
	if len(ids) == 0 {
		return
	}
	if err := w.cluster.GC(ids...); err != nil {
		w.violate("harness", "GC: %v", err)
		return
	}
	w.logf("servers GC %d allocations", len(ids))
	for _, n := range w.nodes {
		if n.connected {
			n.dropGCd()
		}
	}
}

// nodeDown: the node misses its heartbeats. The servers mark it down:
// its allocations are lost and replaced on the other node. Its plugin and
// tasks run on, cut off from the servers and from the other node.
func (w *XWorld) nodeDown(n *xnode) {
	for _, o := range w.nodes {
		if !o.connected {
			return
		}
	}
	n.connected, n.cutAt = false, w.now
	w.counts.NodeDown++
	w.logf("%s is cut off: down", n.name)
	evs, err := w.cluster.SetNodeStatus(n.id, structs.NodeStatusDown)
	for _, ev := range evs {
		w.eval(ev, nil)
	}
	if err != nil {
		w.eval(scheduler.Eval{}, err)
	}
}

func (w *XWorld) nodeUp(n *xnode) {
	if n.connected {
		return
	}
	n.connected, n.cutAt = true, time.Time{}
	w.logf("%s is back", n.name)
	if err := w.cluster.UpsertNode(n.registered); err != nil {
		w.violate("harness", "UpsertNode: %v", err)
	}
	evs, err := w.cluster.SetNodeStatus(n.id, structs.NodeStatusReady)
	for _, ev := range evs {
		w.eval(ev, nil)
	}
	if err != nil {
		w.eval(scheduler.Eval{}, err)
	}
	n.dropGCd()
	n.goOn()
}

// reevaluate runs every live job's evaluation again (capacity changed).
func (w *XWorld) reevaluate() {
	for i := 1; i <= w.jobSeq; i++ {
		if j := w.jobs[fmt.Sprintf("db%d", i)]; j != nil && !j.stopped {
			ev, err := w.cluster.Evaluate("default", j.id, structs.EvalTriggerNodeUpdate)
			w.eval(ev, err)
		}
	}
}

func (w *XWorld) eval(ev scheduler.Eval, err error) {
	if err != nil {
		w.logf("eval error: %v", short(err))
		return
	}
	for _, p := range ev.Placed {
		w.logf("  placed %s on %s: %v", shortID(p.AllocID), w.node(p.NodeID).name, p.Devices)
	}
}
