package sim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/hashicorp/nomad/nomad/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/scheduler"
)

// cliRelease is an operator's `release` between reading the slot and
// marking it.
type cliRelease struct{ seen model.Slot }

// apply carries out one event.
func (w *World) apply(e Event) {
	switch e.Kind {
	case Reconcile:
		w.scanOrReconcile(e.Arg%2 == 0)
	case Watch:
		w.watch()
	case Fingerprint:
		w.fingerprint()
		w.reevaluate()
	case ClientStep:
		w.clientStep(e.Arg)
	case TaskExit:
		w.taskExit(e.Arg)
	case Tick:
		w.advance(time.Duration(w.rng.IntN(60)) * time.Second)
		w.dropGCd()
		w.recheck()
	case Submit:
		w.submit()
	case UpdateDestruct, UpdateInPlace:
		w.update(e.Kind == UpdateDestruct)
	case StopJob:
		if js := w.pickJob(); js != nil {
			w.stopJob(js)
			// A third of the stops purge the job (drawn from a stream of
			// its own: the rest of the event's choices are unchanged).
			if rand.New(rand.NewPCG(e.Arg, purgeStream)).IntN(3) == 0 {
				w.purge(js)
			}
		}
	case GC:
		w.gc()
	case Disconnect:
		w.disconnect()
	case Reconnect:
		w.reconnect()
	case Reevaluate:
		w.reevaluate()
	case PluginKill:
		if w.plugin != nil {
			n := w.rng.IntN(12)
			if n == 0 {
				w.kill("killed")
				w.launch("relaunched by the client")
				return
			}
			w.plugin.run.budget = n
			w.logf("plugin will die within %d zfs commands", n)
		}
	case AgentRestart:
		w.kill("agent restart")
		down := time.Duration(1+w.rng.IntN(20)) * time.Second
		w.setFaults(func(f *apiFaults) { f.downTill = w.now.Add(down) })
		w.launch(fmt.Sprintf("agent restarted; its API listens in %s", down))
	case ZFSFail:
		w.zfsFail()
	case ZFSTimeout:
		if w.plugin != nil {
			w.plugin.run.timeoutSub = subcommands[w.rng.IntN(len(subcommands))]
			w.plugin.run.applied = w.rng.IntN(2) == 0
			w.logf("next zfs %s times out (runs anyway: %v)", w.plugin.run.timeoutSub, w.plugin.run.applied)
		}
	case Busy:
		w.busy()
	case APIDown:
		d := time.Duration(w.rng.IntN(180)) * time.Second
		w.setFaults(func(f *apiFaults) { f.downTill = w.now.Add(d) })
		w.logf("API down for %s", d)
	case APIForbid:
		d := time.Duration(w.rng.IntN(300)) * time.Second
		w.setFaults(func(f *apiFaults) { f.forbidTill = w.now.Add(d) })
		w.logf("token cannot read namespace %s for %s", hiddenNS, d)
	case APIIndexReset:
		low := w.rng.IntN(2) == 0
		shift := uint64(w.rng.IntN(50))
		w.setFaults(func(f *apiFaults) { f.lowIndex, f.indexShift = low, shift })
		w.logf("API index: low restart %v, backwards by %d", low, shift)
	case EditConfig:
		w.editConfig()
	case CLIRelease:
		w.cliRelease()
	case CLIGC:
		w.cliGC()
	case Stranger:
		w.stranger()
	case StrangerGone:
		w.strangerGone(false)
	case ClientAPIFail:
		d := time.Duration(w.rng.IntN(120)) * time.Second
		fail := w.rng.IntN(len(statsFailures))
		w.setFaults(func(f *apiFaults) { f.statsFailTill, f.statsFail = w.now.Add(d), fail })
		w.logf("the local client's allocation endpoint fails on its own for %s: %d %q", d, statsFailures[fail].code, statsFailures[fail].body)
	case ClusterBackup:
		w.backup()
	case ClusterReset:
		w.clusterReset()
	}
}

var subcommands = []string{"list", "create", "destroy", "set", "inherit", "snapshot", "rollback", "rename", "mount", "hold", "release", "clone"}

// eval logs what an evaluation did.
func (w *World) eval(ev scheduler.Eval, err error) {
	if err != nil {
		w.logf("eval error: %v", err)
		return
	}
	for _, p := range ev.Placed {
		where := ""
		if p.NodeID == remoteID {
			where = " on node-b"
		}
		w.logf("  placed %s %s devices %v%s", p.AllocID[len(p.AllocID)-4:], p.Name, p.Devices, where)
	}
	for _, id := range ev.Stopped {
		w.logf("  stop %s", id[len(id)-4:])
	}
	for _, id := range ev.Preempted {
		w.logf("  preempt %s", id[len(id)-4:])
	}
	for g, f := range ev.Failed {
		w.logf("  %s: %d not placed %v", g, f.Missing, f.Reasons)
	}
}

func (w *World) stopJob(js *jobSpec) {
	js.stopped = true
	w.logf("job stop %s", js.job.ID)
	w.eval(w.cluster.Deregister(nsOf(js.job), js.job.ID))
}

// purgeStream seeds the draw that makes a StopJob a purge.
const purgeStream = 0x9126e

// purge is `nomad job stop -purge` racing the job's kill: the plugin's
// watcher sees the job's allocations told to stop (its query wakes within
// its MinInterval), then the servers forget those whose client has not
// reported them ended, while their tasks are still being killed on the
// node (Cluster.Forget). No answer of the node's blocking query says so
// (its index is the highest ModifyIndex of what is left, which a deletion
// never raises): until something else moves the node's list, only the
// plugin's own clock can find out (issue 31).
func (w *World) purge(js *jobSpec) {
	w.watch()
	var ids []string
	for _, sa := range w.cluster.Allocs(nodeID) {
		if sa.JobID == js.job.ID && sa.Namespace == nsOf(js.job) && sa.DesiredStatus != structs.AllocDesiredStatusRun && !sa.ClientTerminalStatus() {
			ids = append(ids, sa.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	if err := w.cluster.Forget(ids...); err != nil {
		w.violate("harness", "Forget: %v", err)
		return
	}
	w.logf("job %s purged: the servers forget %d of its allocations while their tasks run", js.job.ID, len(ids))
}

// stopJobForTest stops a job by ID, so a scripted failure is not
// rescheduled.
func (w *World) stopJobForTest(id string) { w.stopJob(w.jobs[id]) }

func (w *World) liveJobs() []*jobSpec {
	var out []*jobSpec
	for _, js := range w.jobs {
		if !js.stopped {
			out = append(out, js)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].job.ID < out[j].job.ID })
	return out
}

func (w *World) pickJob() *jobSpec {
	js := w.liveJobs()
	if len(js) == 0 {
		return nil
	}
	return js[w.rng.IntN(len(js))]
}

// submit registers a new job: a class, count 1-2, one or two tasks asking
// for it, maybe prestart and sidecar tasks without devices.
func (w *World) submit() {
	if len(w.liveJobs()) >= maxJobs {
		return
	}
	w.jobSeq++
	class := w.cfg.Classes[w.rng.IntN(len(w.cfg.Classes))].Name
	j := scheduler.Job{ID: fmt.Sprintf("j%d", w.jobSeq), Priority: []int{20, 50, 80}[w.rng.IntN(3)],
		Batch: w.rng.IntN(4) == 0}
	if w.rng.IntN(5) == 0 {
		j.Namespace = hiddenNS
	}
	g := scheduler.Group{Name: "g", Count: 1 + w.rng.IntN(2)}
	if w.rng.IntN(5) < 2 {
		g.LostAfter = lostAfter
	}
	ask := 1
	if w.rng.IntN(6) == 0 {
		ask = 2
	}
	g.Tasks = append(g.Tasks, scheduler.Task{Name: "main", Version: "1", Devices: []scheduler.Ask{{Class: class, Count: ask}}})
	if w.rng.IntN(6) == 0 {
		g.Tasks = append(g.Tasks, scheduler.Task{Name: "side", Version: "1", Devices: []scheduler.Ask{{Class: class, Count: 1}}})
	}
	if w.rng.IntN(3) == 0 {
		g.Tasks = append(g.Tasks, scheduler.Task{Name: "init", Version: "1", Prestart: true})
	}
	if w.rng.IntN(4) == 0 {
		g.Tasks = append(g.Tasks, scheduler.Task{Name: "log", Version: "1", Sidecar: true})
	}
	j.Groups = []scheduler.Group{g}
	js := &jobSpec{job: j, kill: time.Duration(w.rng.IntN(4)) * 10 * time.Second}
	w.jobs[j.ID] = js
	w.logf("submit %s: %s×%d ask %d, %d tasks, priority %d, batch %v, ns %q, kill %s",
		j.ID, class, g.Count, ask, len(g.Tasks), j.Priority, j.Batch, j.Namespace, js.kill)
	w.eval(w.cluster.Register(j))
}

func (w *World) update(destructive bool) {
	js := w.pickJob()
	if js == nil {
		return
	}
	t := &js.job.Groups[0].Tasks[0]
	if destructive {
		n := 0
		fmt.Sscan(t.Version, &n)
		t.Version = fmt.Sprint(n + 1)
		w.logf("update %s destructively (version %s)", js.job.ID, t.Version)
	} else {
		js.kill = time.Duration(w.rng.IntN(4)) * 10 * time.Second
		t.KillTimeout = js.kill + time.Second
		w.logf("update %s in place (kill timeout %s)", js.job.ID, js.kill)
	}
	w.eval(w.cluster.Register(js.job))
}

// reevaluate runs the evaluations Nomad's blocked-evals tracker would
// unblock: every live job that has fewer allocations than it asks for.
func (w *World) reevaluate() {
	if !w.connected {
		return
	}
	for _, js := range w.liveJobs() {
		want := 0
		for _, g := range js.job.Groups {
			want += g.Count
		}
		have := 0
		for _, sa := range w.cluster.Allocs(nodeID) {
			if sa.JobID == js.job.ID && !sa.TerminalStatus() {
				have++
			}
		}
		if have < want && (!js.job.Batch || have == 0) {
			w.eval(w.cluster.Evaluate(nsOf(js.job), js.job.ID, structs.EvalTriggerQueuedAllocs))
		}
	}
}

func nsOf(j scheduler.Job) string {
	if j.Namespace == "" {
		return structs.DefaultNamespace
	}
	return j.Namespace
}

// gc deletes one or all client-terminal allocations from the servers.
func (w *World) gc() {
	var ids []string
	for _, sa := range w.cluster.Allocs(nodeID) {
		if sa.ClientTerminalStatus() {
			ids = append(ids, sa.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	if w.rng.IntN(2) == 0 {
		ids = ids[w.rng.IntN(len(ids)):][:1]
	}
	if err := w.cluster.GC(ids...); err != nil {
		w.violate("harness", "GC: %v", err)
		return
	}
	w.logf("servers GC %d allocs", len(ids))
	w.dropGCd()
}

func (w *World) zfsFail() {
	sub := subcommands[w.rng.IntN(len(subcommands))]
	cmd := "zfs"
	stderr := fmt.Sprintf("cannot %s: pool I/O is currently suspended", sub)
	if w.rng.IntN(8) == 0 {
		cmd, sub, stderr = "zpool", "list", "cannot open 'tank': pool I/O is currently suspended"
	}
	w.zfsFaults = append(w.zfsFaults, &zfsFault{cmd: cmd, sub: sub, stderr: stderr, times: 1 + w.rng.IntN(2)})
	w.logf("next %s %s fails: %s", cmd, sub, stderr)
}

// busy makes a slot's dataset busy for a while, as a process left behind
// in it would.
func (w *World) busy() {
	var names []string
	for _, c := range w.cfg.Classes {
		for n := 1; n <= c.Slots; n++ {
			names = append(names, parent+"/"+c.Name+"/"+model.SlotID(c.Name, n))
		}
	}
	name := names[w.rng.IntN(len(names))]
	if err := w.fake.SetBusy(name, true); err != nil {
		return
	}
	d := time.Duration(w.rng.IntN(90)) * time.Second
	w.busyTill[name] = w.now.Add(d)
	w.logf("%s busy for %s", name, d)
}
