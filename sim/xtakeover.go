package sim

import (
	"context"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/nomad/nomad/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The takeover of a replica in the world (docs/node-loss.md, "Never two
// writers"). In a world that keeps replicas, two jobs in three set
// stop_after_client_disconnect = D on their group (stopAfterOf), and are
// pinned to no node. When such an
// allocation's node is cut off or lost:
//
//   - the servers mark it lost and stopped at once and place its
//     replacement B only once WaitClientStop has passed (the loss, plus D,
//     plus the longest kill_timeout: followUps, as the follow-up
//     evaluation Nomad's reconciler created), or sooner, at any other
//     evaluation of the job; Nomad's own scheduler then names no
//     predecessor (model.LostPredecessor); the servers' clock, which
//     records the loss, is off from the plugins' by up to 10 s (skew);
//   - a cut-off node's client stops it itself D after its last heartbeat
//     (the servers' mark, at the latest), checking every min(5 s, D)
//     (heartbeatStops), then its kill takes the job's kill_timeout; a lost
//     node's tasks died with it.
//
// B's Reserve, wherever Nomad places it, decides the takeover from what
// xcluster.Loss answers. The claims are seen in the commands (noteClaim):
// a replica marked to become parked data. XR7 and XR8 check them.

// takeoverSchedule reports whether seed's schedule is shaped for a
// takeover (shapeForTakeover): half the worlds that keep replicas, by a
// draw of its own (none of TestTwoNodeRegressions' older seeds is one).
func takeoverSchedule(seed uint64) bool {
	return replicaWorld(seed) && rand.New(rand.NewPCG(seed, 0x7a4e7)).IntN(2) == 0
}

// shapeForTakeover makes a schedule's allocations run long enough to be
// replicated before a node goes: the events that end a job's allocation
// (a task's failure, a job stopped, moved or updated) and the servers'
// GC (which forgets a lost allocation before its replacement asks) become
// client steps, and the event four fifths in is a node going (cut off or lost:
// takeoverTarget picks the holder). Its faults are left as drawn.
func shapeForTakeover(events []Event) {
	for i := range events {
		switch XKind(events[i].Kind) {
		case XTaskFail, XStopJob, XMove, XUpdate, XGC:
			events[i].Kind = Kind(XClientStep)
		}
	}
	if len(events) >= 5 {
		events[len(events)*4/5].Kind = Kind(XNodeDown)
	}
}

// xStopAfter are the values of stop_after_client_disconnect a group draws.
var xStopAfter = []time.Duration{20 * time.Second, 40 * time.Second, time.Minute}

// stopAfterOf draws job number seq's stop_after_client_disconnect in a
// world that keeps replicas (0 for none, a third of the jobs), apart from
// the world's own stream: every other draw is as it was.
func (w *XWorld) stopAfterOf(seq int) time.Duration {
	if !w.replicas {
		return 0
	}
	r := rand.New(rand.NewPCG(w.seed, 0x570fa+uint64(seq)))
	if r.IntN(3) == 0 {
		return 0
	}
	return xStopAfter[r.IntN(len(xStopAfter))]
}

// serverSkew is how far the servers' clock, which records a loss, is from
// the plugins' (the world's): up to 10 s either way, drawn once a world.
func serverSkew(seed uint64) time.Duration {
	r := rand.New(rand.NewPCG(seed, 0x5c3e))
	return time.Duration(r.IntN(20001)-10000) * time.Millisecond
}

// xtakeovers is what the takeover's checks remember.
type xtakeovers struct {
	// lostAt is when each allocation was lost, in the world's time (the
	// servers' clock is that plus skew).
	lostAt map[string]time.Time
	// newestAtLoss is the time of the newest replica snapshot of each
	// lost allocation's slot that existed on a node at its loss (XR7).
	newestAtLoss map[string]time.Time
	// due: the follow-up evaluation of each lost allocation's job, at its
	// WaitClientStop (it runs if the servers collected the allocation
	// meanwhile: it is the job's).
	due map[string]xfollowUp
	// claims are the replicas taken over, by node + "/" + dataset.
	claims map[string]xclaim
	skew   time.Duration
	// endedBack are the allocations lost under
	// stop_after_client_disconnect that their node, back, ended since
	// (complete, failed: docs/node-loss.md, finding (c)), counted once.
	endedBack map[string]bool
}

// xfollowUp is a follow-up evaluation Nomad's reconciler created.
type xfollowUp struct {
	at      time.Time
	ns, job string
	// early: another evaluation of the job, before WaitClientStop.
	early bool
}

// xclaim is one replica a takeover began on.
type xclaim struct {
	source  string
	newest  string // its newest snapshot's guid at the claim
	content string
}

// jobOf is the world's job of allocation sa.
func (w *XWorld) jobOf(id string) *xjob {
	sa := w.cluster.Alloc(id)
	if sa == nil {
		return nil
	}
	return w.jobs[sa.JobID]
}

// noteLosses records the allocations lost since the last event: when,
// the newest replica of each that exists now (XR7), and its follow-up
// evaluation when its group sets stop_after_client_disconnect.
func (w *XWorld) noteLosses() {
	if !w.replicas {
		return
	}
	tk := &w.tk
	if tk.lostAt == nil {
		tk.lostAt, tk.newestAtLoss, tk.due, tk.claims = map[string]time.Time{}, map[string]time.Time{}, map[string]xfollowUp{}, map[string]xclaim{}
		tk.skew = serverSkew(w.seed)
	}
	for _, n := range append(slices.Clone(w.nodes), w.lost...) {
		for _, sa := range w.cluster.Allocs(n.id) {
			if !tk.lostAt[sa.ID].IsZero() && !tk.endedBack[sa.ID] &&
				(sa.ClientStatus == structs.AllocClientStatusComplete || sa.ClientStatus == structs.AllocClientStatusFailed) {
				if tk.endedBack == nil {
					tk.endedBack = map[string]bool{}
				}
				tk.endedBack[sa.ID] = true
				if j := w.jobs[sa.JobID]; j != nil && j.stopAfter > 0 {
					w.counts.LostEndedBack++
					w.logf("  %s, lost, is %s: its node is back", shortID(sa.ID), sa.ClientStatus)
				}
			}
			if sa.ClientStatus != structs.AllocClientStatusLost || !tk.lostAt[sa.ID].IsZero() {
				continue
			}
			tk.lostAt[sa.ID] = w.now
			tk.newestAtLoss[sa.ID] = w.newestReplica(sa.ID)
			if j := w.jobs[sa.JobID]; j != nil && j.stopAfter > 0 {
				w.counts.LostStopAfter++
				if !tk.newestAtLoss[sa.ID].IsZero() {
					w.counts.LostReplicated++
					w.logf("  %s is lost with a replica from +%s; the servers place its replacement from +%s", shortID(sa.ID),
						tk.newestAtLoss[sa.ID].Sub(epoch), w.now.Add(j.stopAfter+max(j.kill, structs.DefaultKillTimeout)).Sub(epoch))
				}
				tk.due[sa.ID] = xfollowUp{at: w.now.Add(j.stopAfter + max(j.kill, structs.DefaultKillTimeout)), ns: sa.Namespace, job: sa.JobID}
				// Any other evaluation of the job meanwhile (another node's
				// event, an operator's nomad job eval) places B at once, in
				// half the losses: a drawn time before WaitClientStop.
				if r := rand.New(rand.NewPCG(w.seed, uint64(w.now.UnixNano()))); r.IntN(2) == 0 {
					tk.due[sa.ID+"/early"] = xfollowUp{at: w.now.Add(time.Duration(r.Int64N(int64(j.stopAfter)))), ns: sa.Namespace,
						job: sa.JobID, early: true}
				}
			}
		}
	}
}

// newestReplica is the time of the newest replica snapshot of source's
// slot on any node (zero for none).
func (w *XWorld) newestReplica(source string) time.Time {
	var newest time.Time
	prefix := path.Join(w.cfg.ClassDataset("pg"), "replica-"+source+"-")
	for _, n := range w.nodes {
		rows, _, err := n.replicaRows()
		if err != nil {
			continue
		}
		for _, d := range rows {
			if d.IsSnapshot() && strings.HasPrefix(d.Name, prefix) && !strings.Contains(d.Name, ".whole@") {
				if at := w.snapAt[d.GUID]; at.After(newest) {
					newest = at
				}
			}
		}
	}
	return newest
}

// takeoverTarget is, in a world that keeps replicas, the node a node-down
// event cuts off or loses: one that runs an allocation of a group setting
// stop_after_client_disconnect whose replica another node holds, when
// there is one (the takeover's case, rare by chance: an allocation runs
// for a while before its first replica), else nil (the event's own draw).
func (w *XWorld) takeoverTarget() *xnode {
	if !w.replicas {
		return nil
	}
	for _, n := range w.nodes {
		for _, a := range n.sortedLocal() {
			if j := w.jobs[a.job]; a.phase == running && j != nil && j.stopAfter > 0 && !w.newestReplica(a.id).IsZero() {
				return n
			}
		}
	}
	return nil
}

// followUps runs the follow-up evaluations that are due: the servers'
// clock moved to the world's (scheduler.Cluster.LostSince), so that
// Nomad's reconciler sees WaitClientStop passed.
func (w *XWorld) followUps() {
	ids := make([]string, 0, len(w.tk.due))
	for id, f := range w.tk.due {
		if !w.now.Before(f.at) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		f := w.tk.due[id]
		delete(w.tk.due, id)
		if f.early {
			if j := w.jobs[f.job]; j != nil && !j.stopped {
				w.logf("servers: another evaluation of %s, before %s's WaitClientStop", f.job, shortID(strings.TrimSuffix(id, "/early")))
				ev, err := w.cluster.Evaluate(f.ns, f.job, structs.EvalTriggerNodeUpdate)
				w.eval(ev, err)
			}
			continue
		}
		if w.cluster.Alloc(id) != nil {
			if err := w.cluster.LostSince(id, w.now.Sub(w.tk.lostAt[id])); err != nil {
				w.violate("harness", "LostSince %s: %v", shortID(id), err)
				continue
			}
		}
		if j := w.jobs[f.job]; j == nil || j.stopped {
			continue
		}
		w.logf("servers: the follow-up evaluation of %s (stop_after_client_disconnect of %s)", f.job, shortID(id))
		ev, err := w.cluster.Evaluate(f.ns, f.job, structs.EvalTriggerRetryFailedAlloc)
		w.eval(ev, err)
	}
}

// heartbeatStops is each cut-off node's client stopping the allocations
// of groups that set stop_after_client_disconnect, D after its last
// heartbeat (when the servers marked it down, at the latest) and within
// its check interval: the task is killed (its kill_timeout), one not
// started never starts.
func (w *XWorld) heartbeatStops() {
	for _, n := range w.nodes {
		if n.connected || n.cutAt.IsZero() {
			continue
		}
		for _, a := range n.sortedLocal() {
			j := w.jobs[a.job]
			if j == nil || j.stopAfter <= 0 || a.id == w.starting || (a.phase != running && a.phase != pulled) {
				continue
			}
			jitter := time.Duration(rand.New(rand.NewPCG(w.seed, uint64(n.cutAt.UnixNano()))).Int64N(int64(min(5*time.Second, j.stopAfter))))
			if w.now.Before(n.cutAt.Add(j.stopAfter + jitter)) {
				continue
			}
			w.logf("%s: client: no heartbeat for %s (stop_after_client_disconnect)", n.name, j.stopAfter)
			if a.phase == pulled {
				n.finish(a, structs.AllocClientStatusComplete, "stopped before it started")
				continue
			}
			n.beginKill(a)
		}
	}
}

// noteClaim sees a takeover begin in a command of n's plugin: a replica
// marked to become parked data (model.PlanTakeReplica's first step), its
// snapshots still there. XR7: its newest snapshot is no older than the
// newest replica of its source that existed when the source was lost.
func (n *xnode) noteClaim(args []string) {
	w := n.w
	if !w.replicas || len(args) < 3 || args[0] != "set" {
		return
	}
	ds := args[len(args)-1]
	if !strings.HasPrefix(path.Base(ds), "replica-") || !slices.ContainsFunc(args, func(a string) bool {
		return strings.HasPrefix(a, model.PropRetainAs+"=")
	}) {
		return
	}
	key := n.id + "/" + ds
	if _, ok := w.tk.claims[key]; ok {
		return
	}
	rows, err := zfs.NewClient(n.fake).List(context.Background(), ds, model.UserProps)
	if err != nil || len(rows) == 0 {
		return
	}
	source := rows[0].User.Get(model.PropHolder)
	var newest string
	var newestAt time.Time
	for _, d := range rows {
		if at, ok := w.snapAt[d.GUID]; d.IsSnapshot() && ok && at.After(newestAt) {
			newest, newestAt = d.GUID, at
		}
	}
	c := xclaim{source: source, newest: newest, content: w.snapContent[newest]}
	w.tk.claims[key] = c
	w.counts.Takeovers++
	w.logf("  %s takes over %s (of %s), its newest snapshot taken at +%s", n.name, ds, shortID(source), newestAt.Sub(epoch))
	sa := w.cluster.Alloc(source)
	switch {
	case sa == nil || sa.ClientStatus != structs.AllocClientStatusLost:
		st := "unknown to the servers"
		if sa != nil {
			st = sa.ClientStatus
		}
		w.violate("XR7", "%s takes over %s, a replica of %s, which is %s, not lost", n.name, ds, shortID(source), st)
	case newest == "":
		w.violate("XR7", "%s takes over %s, a replica of %s holding no snapshot", n.name, ds, shortID(source))
	case newestAt.Before(w.tk.newestAtLoss[source]):
		w.violate("XR7", "%s takes over %s, a replica of %s from +%s, older than the newest there was when it was lost (+%s)",
			n.name, ds, shortID(source), newestAt.Sub(epoch), w.tk.newestAtLoss[source].Sub(epoch))
	}
}

// takenOver reports whether n's replica ds was taken over (not dropped).
func (w *XWorld) takenOver(n *xnode, ds string) bool {
	_, ok := w.tk.claims[n.id+"/"+ds]
	return ok
}

// tookOver reports whether the data allocation a found in its slot on n,
// got, is a replica n took over (its newest snapshot's content): a
// takeover, which XR7 checked at the claim, not a hand-over X1 checks.
func (w *XWorld) tookOver(n *xnode, got []string) bool {
	s := strings.Join(got, ",")
	for k, c := range w.tk.claims {
		if strings.HasPrefix(k, n.id+"/") && c.content == s {
			return true
		}
	}
	return false
}

// checkWriters is XR8, never two writers: no two allocations write copies
// of one lineage at once. An allocation writes from its start until its
// task is dead (its kill included), on a node that is not lost (cut off,
// it writes on); one that found in its slot a token another wrote is a
// second writer of that one's data while that one may still write (a
// takeover before the cut-off holder stopped, a copy handed over early).
func (w *XWorld) checkWriters() {
	if !w.replicas {
		return
	}
	type writer struct {
		a *xalloc
		n *xnode
	}
	var ws []writer
	for _, n := range w.nodes {
		for _, a := range n.sortedLocal() {
			if a.phase == running || a.phase == killing {
				ws = append(ws, writer{a, n})
			}
		}
	}
	for _, x := range ws {
		for _, y := range ws {
			if x.a == y.a {
				continue
			}
			prefix := tokenName(x.a.id) + "-"
			for _, t := range w.data[y.a.id].inherited {
				if strings.HasPrefix(t, prefix) {
					w.violate("XR8", "%s on %s runs with %s's data (%s), while %s still %s on %s (connected %v)", y.a.short(), y.n.name,
						x.a.short(), t, x.a.short(), x.a.phase, x.n.name, x.n.connected)
					return
				}
			}
		}
	}
}
