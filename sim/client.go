package sim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/nomad/structs"
	"github.com/hashicorp/nomad/plugins/device"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/scheduler"
)

// phase is where the local client is with one allocation.
type phase int

const (
	pulled  phase = iota // the client has it; no task started
	running              // its tasks run on what Reserve gave them
	killing              // told to stop; tasks exit at killAt
	dead                 // every task exited
)

func (p phase) String() string { return [...]string{"pulled", "running", "killing", "dead"}[p] }

// localAlloc is the local client's alloc runner for one allocation.
type localAlloc struct {
	id, job, ns string
	// prev is the allocation this one replaces (PreviousAllocation).
	prev   string
	seq    uint64 // CreateIndex
	phase  phase
	batch  bool
	tasks  []localTask
	killAt time.Time
	// status is what the client would report: pending, running,
	// complete, failed.
	status   string
	reported string
	// resend: the node reconnected and the client has not sent the
	// status since (it sends it even if unchanged; see partition.go).
	resend bool
}

// localTask is one task with devices and what Reserve gave it.
type localTask struct {
	name  string
	ids   []string
	paths []string // host paths, one per ID
}

// live reports whether the allocation's tasks may be running on the node:
// what I1 and I2 protect.
func (a *localAlloc) live() bool { return a.phase == running || a.phase == killing }

func tokenName(allocID string) string { return "token-" + allocID }

// move is one step the local client can make for one allocation.
type move struct {
	id string
	fn func()
}

// moves lists what the local client can do next, one move per allocation,
// sorted by allocation ID.
func (w *World) moves() []move {
	var moves []move
	server := w.cluster.Allocs(nodeID)
	byID := map[string]*structs.Allocation{}
	for _, sa := range server {
		byID[sa.ID] = sa
		if _, ok := w.localGet(sa.ID); !ok && w.connected && !sa.ClientTerminalStatus() {
			sa := sa
			moves = append(moves, move{sa.ID, func() { w.pull(sa) }})
		}
	}
	for _, a := range w.sortedLocal() {
		a := a
		sa := byID[a.id]
		stop := sa == nil || (w.connected && (sa.DesiredStatus != structs.AllocDesiredStatusRun || sa.ClientStatus == structs.AllocClientStatusLost))
		switch {
		case a.phase == pulled && stop:
			moves = append(moves, move{a.id, func() { w.finish(a, structs.AllocClientStatusComplete, "stopped before it started") }})
		case a.phase == pulled:
			moves = append(moves, move{a.id, func() { w.start(a) }})
		case a.phase == running && stop:
			moves = append(moves, move{a.id, func() { w.beginKill(a) }})
		case (a.status != a.reported || a.resend) && w.connected && sa != nil:
			moves = append(moves, move{a.id, func() { w.report(a) }})
		}
	}
	sort.SliceStable(moves, func(i, j int) bool { return moves[i].id < moves[j].id })
	return moves
}

// clientStep moves one allocation one step, chosen by the event's Arg
// among those that can move.
func (w *World) clientStep(arg uint64) {
	moves := w.moves()
	if len(moves) == 0 {
		return
	}
	moves[arg%uint64(len(moves))].fn()
}

// stepAlloc makes the local client's next move for one allocation, if it
// has one (scripted scenarios).
func (w *World) stepAlloc(id string) bool {
	for _, m := range w.moves() {
		if m.id == id {
			m.fn()
			return true
		}
	}
	return false
}

func (w *World) localGet(id string) (*localAlloc, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a, ok := w.local[id]
	return a, ok
}

// pull makes the client take a new allocation.
func (w *World) pull(sa *structs.Allocation) {
	a := &localAlloc{id: sa.ID, job: sa.JobID, ns: sa.Namespace, prev: sa.PreviousAllocation, seq: sa.CreateIndex,
		status: structs.AllocClientStatusPending, reported: structs.AllocClientStatusPending}
	if sa.Job != nil {
		a.batch = sa.Job.Type == structs.JobTypeBatch
	}
	if sa.AllocatedResources != nil {
		names := make([]string, 0, len(sa.AllocatedResources.Tasks))
		for n := range sa.AllocatedResources.Tasks {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			t := localTask{name: n}
			for _, d := range sa.AllocatedResources.Tasks[n].Devices {
				t.ids = append(t.ids, d.DeviceIDs...)
			}
			if len(t.ids) > 0 {
				a.tasks = append(a.tasks, t)
			}
		}
	}
	w.mu.Lock()
	w.local[a.id] = a
	w.prevOf[a.id] = a.prev
	w.mu.Unlock()
	w.logf("client pulls %s (%s) devices %v", a.id[len(a.id)-4:], a.job, a.deviceIDs())
}

func (a *localAlloc) deviceIDs() []string {
	var out []string
	for _, t := range a.tasks {
		out = append(out, t.ids...)
	}
	return out
}

func (a *localAlloc) short() string { return a.id[len(a.id)-4:] + "(" + a.job + ")" }

// start runs the device hook of each task (the plugin's Reserve, as
// Nomad's client calls it over gRPC, with its reserve_timeout) and, if all
// succeed, the tasks: each writes its allocation's token where the
// reservation mounts its slot, after looking at what is already there
// (I1). While a Reserve waits, the rest of the node goes on (nodeGoesOn).
func (w *World) start(a *localAlloc) {
	w.starting[a.id] = true
	defer delete(w.starting, a.id)
	for i := range a.tasks {
		t := &a.tasks[i]
		if !w.alive() {
			w.finish(a, structs.AllocClientStatusFailed, "device hook: plugin not running")
			return
		}
		inherit := w.inheritable(a, t)
		res, err := w.reserve(a, t.ids)
		if err != nil {
			w.logf("Reserve %v for %s: %v", t.ids, a.short(), short(err))
			w.finish(a, structs.AllocClientStatusFailed, "device hook failed")
			return
		}
		if len(res.Mounts) != len(t.ids) {
			w.violate("harness", "Reserve %v for %s gave %d mounts", t.ids, a.short(), len(res.Mounts))
			return
		}
		for j, m := range res.Mounts {
			t.paths = append(t.paths, m.HostPath)
			w.checkInherited(a, t, j, inherit[j])
		}
	}
	for _, t := range a.tasks {
		for j, p := range t.paths {
			w.readForeign(a, t.ids[j], p)
			if err := os.WriteFile(filepath.Join(p, tokenName(a.id)), []byte(a.id), 0o644); err != nil {
				w.violate("I2", "%s cannot write its token in %s (%s): %v", a.short(), t.ids[j], p, err)
			}
		}
	}
	a.phase, a.status = running, structs.AllocClientStatusRunning
	w.logf("client starts %s on %v", a.short(), a.deviceIDs())
	w.report(a)
}

// reserve is the device hook's call: the plugin's Reserve. A refusal that
// asks whether the token has read-job, while Nomad hid nothing from the
// token, blames it falsely: the operator would act on a wrong diagnosis.
func (w *World) reserve(a *localAlloc, ids []string) (*device.ContainerReservation, error) {
	for _, id := range ids {
		w.locked[id]++
	}
	w.reserving = append(w.reserving, w.now)
	w.mu.Lock()
	hides := w.hides
	w.mu.Unlock()
	res, err := w.plugin.dev.Reserve(ids)
	if w.blocked != nil && len(w.reserving) == 1 {
		select {
		case <-w.blocked:
		case <-time.After(blockedAfter):
			w.violate("harness", "what waited for a Reserve did not go on once it returned")
		}
		w.blocked = nil
	}
	w.reserving = w.reserving[:len(w.reserving)-1]
	for _, id := range ids {
		if w.locked[id]--; w.locked[id] == 0 {
			delete(w.locked, id)
		}
	}
	w.mu.Lock()
	hidden := w.hides > hides
	w.mu.Unlock()
	stopped := strings.Contains(fmt.Sprint(err), "stopped while its Reserve waited")
	if sa := w.cluster.Alloc(a.id); stopped && sa != nil && sa.DesiredStatus != structs.AllocDesiredStatusRun {
		hidden = true // the caller itself was stopped meanwhile, and the refusal says so first
	}
	if err != nil && strings.Contains(err.Error(), "read-job") && !hidden {
		w.violate("diagnosis", "Reserve %v for %s blames the token, and Nomad hid nothing from it meanwhile: %v", ids, a.short(), err)
	}
	return res, err
}

// readForeign is I1 from the task's side: what it finds in its slot.
func (w *World) readForeign(a *localAlloc, id, dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if a.phase == pulled {
			w.violate("I1", "%s was given %s at %s, which it cannot read: %v", a.short(), id, dir, err)
		}
		return
	}
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, "token-") || n == tokenName(a.id) {
			continue
		}
		other := strings.TrimPrefix(n, "token-")
		if w.inherits(a, other, id) {
			continue
		}
		w.violate("I1", "%s reads %s's token in slot %s (%s)", a.short(), other, id, dir)
	}
}

// inherits reports whether a may see other's data in slot id: a sticky
// class's replacement sees its predecessors' (other is a, or an
// allocation a replaces, directly or through others), once they no longer
// run.
func (w *World) inherits(a *localAlloc, other, id string) bool {
	class, _, _ := strings.Cut(id, "-")
	if !w.everSticky[class] {
		return false
	}
	for p, hops := a.prev, 0; p != "" && hops < 64; hops++ {
		// An allocation the client dropped (collected) no longer runs.
		pa, ok := w.localGet(p)
		if p == other {
			return !ok || !pa.live()
		}
		p = w.prevOf[p]
	}
	return false
}

// beginKill starts stopping an allocation's tasks; they exit after the
// job's kill timeout (a slow kill) or at the next tick.
func (w *World) beginKill(a *localAlloc) {
	kill := time.Duration(0)
	if js := w.jobs[a.job]; js != nil {
		kill = js.kill
	}
	a.phase, a.killAt = killing, w.now.Add(kill)
	w.logf("client stops %s (kill timeout %s)", a.short(), kill)
}

// finishKills ends the tasks whose kill timeout passed.
func (w *World) finishKills() {
	for _, a := range w.sortedLocal() {
		if a.phase == killing && !w.now.Before(a.killAt) {
			w.finish(a, structs.AllocClientStatusComplete, "tasks stopped")
		}
	}
}

// finish marks every task exited and reports it.
func (w *World) finish(a *localAlloc, status, why string) {
	a.phase, a.status = dead, status
	w.logf("client: %s %s (%s)", a.short(), status, why)
	w.report(a)
}

// report sends the allocation's status to the servers, when it can. After
// a reconnect (a.resend) it sends it even if it sent it before, as a
// reconnecting client does, also for an allocation the servers marked
// lost meanwhile: a running one is running again on the servers until
// its task is stopped.
func (w *World) report(a *localAlloc) {
	if !w.connected || (a.reported == a.status && !a.resend) {
		return
	}
	sa := w.cluster.Alloc(a.id)
	if sa == nil {
		return
	}
	if sa.ClientStatus == structs.AllocClientStatusLost && a.status == structs.AllocClientStatusRunning && !a.resend {
		return // the servers gave it up; the client will stop it
	}
	if a.resend {
		w.logf("client re-sends %s: %s (the servers had %s/%s)", a.short(), a.status, sa.ClientStatus, sa.DesiredStatus)
	}
	tasks := map[string]string{}
	// As Nomad's client reports them: a task is pending until it starts,
	// which is after its device hook (the plugin's Reserve) returned.
	state := structs.TaskStateRunning
	switch a.phase {
	case pulled:
		state = structs.TaskStatePending
	case dead:
		state = structs.TaskStateDead
	}
	for _, t := range a.tasks {
		tasks[t.name] = state
	}
	if len(tasks) == 0 {
		tasks["main"] = state
	}
	if _, err := w.cluster.UpdateAllocClient(a.id, a.status, tasks); errors.Is(err, scheduler.ErrDeviceCollision) {
		// The update is stored; the evaluation it triggered hit Nomad's
		// own bug and placed nothing (scheduler.ErrDeviceCollision).
		w.logf("eval error: %v", short(err))
	} else if err != nil {
		w.violate("harness", "UpdateAllocClient %s: %v", a.id, err)
		return
	}
	a.reported, a.resend = a.status, false
}

// taskExit ends a running allocation's tasks on their own.
func (w *World) taskExit(arg uint64) {
	var runningAllocs []*localAlloc
	for _, a := range w.sortedLocal() {
		if a.phase == running {
			runningAllocs = append(runningAllocs, a)
		}
	}
	if len(runningAllocs) == 0 {
		return
	}
	a := runningAllocs[arg%uint64(len(runningAllocs))]
	if !a.batch && arg&(1<<32) != 0 {
		// The restart policy restarts the task in place: Nomad does not
		// run its device hook again (no Reserve), and the task finds its
		// slot as it left it.
		w.logf("client: %s main task restarts in place", a.short())
		for _, t := range a.tasks {
			for j, p := range t.paths {
				w.readForeign(a, t.ids[j], p)
			}
		}
		return
	}
	status := structs.AllocClientStatusFailed
	if a.batch {
		status = structs.AllocClientStatusComplete
	}
	w.finish(a, status, "task exited")
}

// dropGCd forgets dead allocations the servers garbage-collected: the
// client GCs its runner then.
func (w *World) dropGCd() {
	for _, a := range w.sortedLocal() {
		if a.phase == dead && w.cluster.Alloc(a.id) == nil {
			w.mu.Lock()
			delete(w.local, a.id)
			w.mu.Unlock()
		}
	}
}

// holderSafe is the CLI's check before `release` marks a slot, as the CLI
// can make it: Nomad says the holder is client-terminal or does not know it,
// and for a lost holder the local client no longer has it.
func (w *World) holderSafe(s model.Slot) bool {
	if s.State == model.StateReleasing {
		return true
	}
	// The CLI's rule is the model's: Judge, then the local client.
	sa := w.cluster.Alloc(s.Holder)
	_, local := w.localGet(s.Holder)
	var a model.Alloc
	if sa != nil {
		a = model.Alloc{ID: sa.ID, ClientStatus: sa.ClientStatus, DesiredStatus: sa.DesiredStatus}
	}
	switch live, _ := model.Judge(a, sa != nil); live {
	case model.Ended:
		return true
	case model.AskClient:
		return !local
	}
	return false
}
