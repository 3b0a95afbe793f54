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

	"github.com/nomad-device-zfs/nomad-device-zfs/scheduler"
)

// Each node's Nomad client: it pulls the allocations placed on its node,
// starts them through its plugin's Reserve (a task writes a token where
// its slot is mounted, and more as it runs), stops them within their
// job's kill timeout, and reports to the servers while it reaches them.

// xalloc is the client's alloc runner for one allocation: one task, one
// slot of pg.
type xalloc struct {
	id, job, prev string
	slot          string
	path          string // where the slot is mounted, once started
	phase         phase
	killAt        time.Time
	// attempts counts the starts that failed: the restart policy tries
	// again, then the allocation fails (Nomad reschedules it).
	attempts         int
	status, reported string
}

// xStartAttempts is the restart policy's: a start that fails (a Reserve
// that gave up waiting for the data) is tried again, then the allocation
// fails.
const xStartAttempts = 3

func (a *xalloc) short() string { return a.id[len(a.id)-4:] + "(" + a.job + ")" }

// xmove is one step the client can make for one allocation; start: it
// starts the task (a Reserve).
type xmove struct {
	id    string
	fn    func()
	start bool
}

// moves lists what the client can do next, one move per allocation.
func (n *xnode) moves() []xmove {
	var out []xmove
	byID := map[string]*structs.Allocation{}
	for _, sa := range n.w.cluster.Allocs(n.id) {
		byID[sa.ID] = sa
		if _, ok := n.local[sa.ID]; !ok && n.connected && !sa.ClientTerminalStatus() {
			out = append(out, xmove{id: sa.ID, fn: func() { n.pull(sa) }})
		}
	}
	for _, a := range n.sortedLocal() {
		sa := byID[a.id]
		stop := sa == nil || n.connected && (sa.DesiredStatus != structs.AllocDesiredStatusRun || sa.ClientStatus == structs.AllocClientStatusLost)
		switch {
		case a.phase == pulled && stop:
			out = append(out, xmove{id: a.id, fn: func() { n.finish(a, structs.AllocClientStatusComplete, "stopped before it started") }})
		case a.phase == pulled:
			out = append(out, xmove{id: a.id, fn: func() { n.start(a) }, start: true})
		case a.phase == running && stop:
			out = append(out, xmove{id: a.id, fn: func() { n.beginKill(a) }})
		case a.status != a.reported && n.connected && sa != nil:
			out = append(out, xmove{id: a.id, fn: func() { n.report(a) }})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (n *xnode) sortedLocal() []*xalloc {
	out := make([]*xalloc, 0, len(n.local))
	for _, a := range n.local {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (n *xnode) pull(sa *structs.Allocation) {
	a := &xalloc{id: sa.ID, job: sa.JobID, prev: sa.PreviousAllocation, status: structs.AllocClientStatusPending,
		reported: structs.AllocClientStatusPending}
	for _, t := range sa.AllocatedResources.Tasks {
		for _, d := range t.Devices {
			if len(d.DeviceIDs) > 0 {
				a.slot = d.DeviceIDs[0]
			}
		}
	}
	n.local[a.id] = a
	if n.w.data[a.id] == nil {
		n.w.data[a.id] = &xdata{node: n.name, prev: a.prev}
	}
	n.w.logf("%s: client pulls %s, slot %s, replacing %s", n.name, a.short(), a.slot, shortID(a.prev))
}

// start is the device hook (the plugin's Reserve, bounded by its
// reserve_timeout and the class's migrate timeout) and the task: it finds
// what its slot holds (X1), then writes its first token.
func (n *xnode) start(a *xalloc) {
	w := n.w
	if n.p == nil || n.p.run.dead {
		n.failStart(a, "plugin not running")
		return
	}
	w.reserving, w.reserveStart, w.starting = n, w.now, a.id
	if d := w.data[a.id]; d.firstAsked.IsZero() {
		d.firstAsked = w.now
	}
	res, err := n.p.dev.Reserve([]string{a.slot})
	waited := w.now.Sub(w.reserveStart)
	w.reserving, w.starting = nil, ""
	if w.blocked != nil {
		select {
		case <-w.blocked:
		case <-time.After(blockedAfter):
			w.violate("harness", "what waited for a Reserve did not go on once it returned")
			w.broken = true
		}
		w.blocked = nil
	}
	if err != nil {
		w.logf("%s: Reserve %s for %s after %s: %v", n.name, a.slot, a.short(), waited, short(err))
		if strings.Contains(err.Error(), "migrate timeout") {
			w.counts.StartFailed++
		}
		n.failStart(a, "device hook failed")
		return
	}
	if len(res.Mounts) != 1 {
		w.violate("harness", "Reserve %s for %s gave %d mounts", a.slot, a.short(), len(res.Mounts))
		return
	}
	a.path = res.Mounts[0].HostPath
	d := w.data[a.id]
	d.inherited = n.filesAt(a.path)
	d.started, d.startedAt = true, w.now
	// The migrate timeout counts from the first start's Reserve: a start
	// retried after it passed may start empty at once.
	w.checkStart(n, a, max(waited, w.now.Sub(d.firstAsked)))
	a.phase, a.status = running, structs.AllocClientStatusRunning
	w.logf("%s: client starts %s on %s with %d tokens (after %s)", n.name, a.short(), a.slot, len(d.inherited), waited)
	n.write(a)
	n.report(a)
}

// failStart is a failed task start: the restart policy tries again, then
// the allocation fails.
func (n *xnode) failStart(a *xalloc, why string) {
	if a.attempts++; a.attempts < xStartAttempts {
		n.w.logf("%s: %s's start failed (%s); the restart policy tries again", n.name, a.short(), why)
		return
	}
	n.finish(a, structs.AllocClientStatusFailed, why)
}

// write makes a running task write one more token into its slot.
func (n *xnode) write(a *xalloc) {
	d := n.w.data[a.id]
	name := fmt.Sprintf("%s-%d", tokenName(a.id), len(d.wrote)+1)
	if err := os.WriteFile(filepath.Join(a.path, name), []byte(a.id), 0o644); err != nil {
		n.w.violate("X3", "%s on %s cannot write into its slot %s: %v", a.short(), n.name, a.slot, err)
		return
	}
	d.wrote = append(d.wrote, name)
}

// filesAt lists the tokens in a directory, sorted.
func (n *xnode) filesAt(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "token-") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func (n *xnode) beginKill(a *xalloc) {
	kill := time.Duration(0)
	if j := n.w.jobs[a.job]; j != nil {
		kill = j.kill
	}
	a.phase, a.killAt = killing, n.w.now.Add(kill)
	n.w.logf("%s: client stops %s (kill timeout %s)", n.name, a.short(), kill)
}

func (n *xnode) finishKills() {
	for _, a := range n.sortedLocal() {
		if a.phase == killing && !n.w.now.Before(a.killAt) {
			n.finish(a, structs.AllocClientStatusComplete, "tasks stopped")
		}
	}
}

// finish ends the allocation's task: what its slot holds then is its
// final data, which its replacement is to get whole (X1, X2).
func (n *xnode) finish(a *xalloc, status, why string) {
	if a.phase == running || a.phase == killing {
		d := n.w.data[a.id]
		d.final = n.filesAt(a.path)
		if got, want := strings.Join(d.final, ","), strings.Join(d.content(), ","); got != want {
			n.w.violate("X3", "%s on %s ends with %q in %s, not what it found and wrote (%q)", a.short(), n.name, got, a.slot, want)
		}
		d.ended, d.endedAt = true, n.w.now
	}
	a.phase, a.status = dead, status
	n.w.logf("%s: client: %s %s (%s)", n.name, a.short(), status, why)
	n.report(a)
}

// goOn makes every move the client can make but a start: while a
// Reserve waits, the clients pull, stop and report (a start would be
// another Reserve, which the world runs only one at a time).
func (n *xnode) goOn() {
	for range 20 {
		moved := false
		for _, m := range n.moves() {
			if !m.start && m.id != n.w.starting {
				m.fn()
				moved = true
				break
			}
		}
		if !moved {
			return
		}
	}
}

func (n *xnode) report(a *xalloc) {
	if !n.connected || a.reported == a.status {
		return
	}
	sa := n.w.cluster.Alloc(a.id)
	if sa == nil {
		return
	}
	if sa.ClientStatus == structs.AllocClientStatusLost && a.status == structs.AllocClientStatusRunning {
		return // the servers gave it up; the client stops it
	}
	state := structs.TaskStateRunning
	if a.phase == dead {
		state = structs.TaskStateDead
	}
	if _, err := n.w.cluster.UpdateAllocClient(a.id, a.status, map[string]string{"main": state}); err != nil &&
		!errors.Is(err, scheduler.ErrDeviceCollision) {
		n.w.violate("harness", "UpdateAllocClient %s: %v", a.id, err)
		return
	}
	a.reported = a.status
}

// dropGCd forgets dead allocations the servers collected.
func (n *xnode) dropGCd() {
	for id, a := range n.local {
		if a.phase == dead && n.w.cluster.Alloc(id) == nil {
			delete(n.local, id)
		}
	}
}

func shortID(id string) string {
	if len(id) < 4 {
		return "-"
	}
	return id[len(id)-4:]
}
