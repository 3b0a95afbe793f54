package sim

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// check runs the invariants that hold at every instant, from data: the
// token files the tasks wrote and the datasets the plugin does not own.
func (w *World) check() {
	for _, a := range w.sortedLocal() {
		if !a.live() {
			continue
		}
		for _, t := range a.tasks {
			for j, p := range t.paths {
				w.readForeign(a, t.ids[j], p) // I1
				b, err := os.ReadFile(filepath.Join(p, tokenName(a.id)))
				if err != nil || string(b) != a.id {
					w.violate("I2", "%s is %s and its token in %s (%s) is gone: %v", a.short(), a.phase, t.ids[j], p, errText(err))
				}
			}
		}
	}
	if !w.zfsChanged {
		return // what follows reads ZFS, and nothing changed it
	}
	w.zfsChanged = false
	sets, err := w.cliZFS().List(context.Background(), parent, model.UserProps)
	if err != nil {
		w.violate("harness", "zfs list: %v", err)
		return
	}
	w.checkForeign(sets, false)
	w.checkRetainedKept(sets)
}

func errText(err error) string {
	if err == nil {
		return "content differs"
	}
	return err.Error()
}

// settle ends the faults and lets the node run until nothing changes,
// then checks what must hold at quiescence: I3 and liveness.
func (w *World) settle() {
	w.logf("--- settle: faults end ---")
	w.zfsFaults = nil
	for name := range w.busyTill {
		_ = w.fake.SetBusy(name, false)
		delete(w.busyTill, name)
	}
	w.setFaults(func(f *apiFaults) {
		f.downTill, f.forbidTill, f.statsFailTill, f.lowIndex, f.indexShift = w.now, w.now, w.now, false, 0
	})
	w.strangerGone(true)
	w.pending = nil
	if w.plugin != nil {
		w.plugin.run.budget, w.plugin.run.timeoutSub = -1, ""
	} else {
		w.launch("settle")
	}
	w.reconnect()
	end := w.now
	last, same := "", 0
	// endedAt: when settle first saw each slot held by a holder that has
	// ended on the node (readyInTime).
	endedAt := map[string]time.Time{}
	// Quiescent: nothing changed for three rounds, and the watcher is not
	// waiting on an index the servers no longer reach (after a reset, its
	// blocking query returns only when its wait runs out).
	for round := 0; round < 40 && same < 3; round++ {
		w.cmds = 0
		w.advance(w.cfg.ScanInterval)
		w.recheck()
		for _, a := range w.sortedLocal() {
			w.report(a)
		}
		for i := 0; i < 12; i++ {
			if !w.alive() {
				w.launch("relaunched by the client after a crash")
			}
			w.clientStep(uint64(i))
		}
		w.watch()
		w.reconcile()
		w.fingerprint()
		w.reevaluate()
		w.dropGCd()
		w.check()
		w.readyInTime(endedAt, end)
		d := w.digest()
		if d == last && !w.watchStalled() {
			same++
		} else {
			same = 0
		}
		last = d
	}
	if len(w.violations) == 0 && w.watchStalled() {
		w.violate("liveness", "the watcher still waits %s after the faults ended (on index %d, the servers answer %d)",
			w.now.Sub(end), w.plugin.watch.at.index, w.api.index(w.faults()))
	}
	if len(w.violations) == 0 {
		w.checkQuiescent()
	}
}

// readyWithin bounds how long, once the faults have ended, a slot stays
// held by a holder that has ended on the node: the release waits for no
// news of other allocations (issue 31), only for the plugin's own clocks
// (model.RecheckCeiling apart at most) and a settle round's pace.
const readyWithin = 2 * time.Minute

// readyInTime is liveness for releases: every configured slot whose holder
// has ended on the node (its local client has no task of it running, nor
// may start one) is released within readyWithin of the first settle round
// that saw it so. endedAt carries those first sightings across rounds.
//
// After the servers' state started over (ClusterReset), the clock starts
// only once the watcher has delivered since the faults ended (settled):
// its blocking query may wait on an index the servers no longer reach, up
// to its five minutes (fact 9; the settle waits that out, watchStalled),
// and meanwhile the plugin may take a holder the reset erased for one that
// runs. That is the reset's cost, a fault's, not a wait without a clock;
// a purge, which no fault causes, is counted from the first round.
func (w *World) readyInTime(endedAt map[string]time.Time, settled time.Time) {
	if !w.resetAt.IsZero() && (w.plugin == nil || w.plugin.watch == nil || w.plugin.watch.news.At.Before(settled)) {
		clear(endedAt)
		return
	}
	sets, err := w.cliZFS().List(context.Background(), parent, []string{model.PropOwner, model.PropState, model.PropHolder})
	if err != nil {
		w.violate("harness", "zfs list: %v", err)
		return
	}
	held := map[string]string{}
	for _, d := range sets {
		state := model.State(d.User.Get(model.PropState))
		if d.IsSnapshot() || d.User.Get(model.PropOwner) != d.Name || (state != model.StateHeld && state != model.StateReleasing) {
			continue
		}
		holder := d.User.Get(model.PropHolder)
		if a, ok := w.localGet(holder); ok && a.phase != dead {
			continue // it runs, or may start
		}
		held[d.Name] = holder
	}
	for name := range endedAt {
		if _, ok := held[name]; !ok {
			delete(endedAt, name)
		}
	}
	for name, holder := range held {
		first, ok := endedAt[name]
		if !ok {
			endedAt[name] = w.now
			continue
		}
		if w.now.Sub(first) > readyWithin {
			w.violate("liveness", "slot %s is still held by %s more than %s after the faults ended and its holder had ended on the node: its release waits for news that may never come",
				path.Base(name), lastFour(holder), readyWithin)
		}
	}
}

// lastFour is how the timeline names an allocation.
func lastFour(id string) string { return id[max(len(id)-4, 0):] }

// digest summarises the node's state, to see when it stops changing.
func (w *World) digest() string {
	var b strings.Builder
	for _, a := range w.sortedLocal() {
		fmt.Fprintf(&b, "%s:%s:%s ", a.id, a.phase, a.reported)
	}
	for _, sa := range w.cluster.Allocs(nodeID) {
		fmt.Fprintf(&b, "%s:%s/%s ", sa.ID, sa.DesiredStatus, sa.ClientStatus)
	}
	if w.plugin != nil {
		if v, _ := w.plugin.mgr.View(); v != nil {
			for _, cv := range v.Classes {
				for _, s := range cv.Slots {
					fmt.Fprintf(&b, "%s:%s:%v:%s ", s.ID, s.State, s.Healthy, s.Holder)
				}
				fmt.Fprintf(&b, "r%d ", len(cv.Retained))
			}
		}
	}
	return b.String()
}

// checkQuiescent is I3 (no leak, every class has its slots) and liveness
// (a job whose ask fits runs), read from ZFS and the tasks.
func (w *World) checkQuiescent() {
	ctx := context.Background()
	props := []string{model.PropOwner, model.PropState, model.PropHolder, model.PropRetainAs, model.PropExpires}
	sets, err := w.cliZFS().List(ctx, parent, props)
	if err != nil {
		w.violate("harness", "final zfs list: %v", err)
		return
	}
	liveHolders := map[string]string{} // slot dataset → live alloc using it
	for _, a := range w.sortedLocal() {
		if !a.live() {
			continue
		}
		for _, t := range a.tasks {
			for j := range t.ids {
				liveHolders[strings.TrimPrefix(t.paths[j], w.fake.Mountpoint(pool))] = a.id
			}
		}
	}
	configured := map[string]bool{}
	for _, c := range w.cfg.Classes {
		configured[parent+"/"+c.Name] = true
		for n := 1; n <= c.Slots; n++ {
			configured[parent+"/"+c.Name+"/"+model.SlotID(c.Name, n)] = false
		}
	}
	seen := map[string]bool{}
	for _, d := range sets {
		if d.IsSnapshot() {
			continue
		}
		owner, state := d.User.Get(model.PropOwner), model.State(d.User.Get(model.PropState))
		if owner != d.Name && d.User.Get(model.PropRetainAs) != d.Name {
			continue
		}
		seen[d.Name] = true
		isClass, isSlot := configured[d.Name]
		switch {
		case isSlot && isClass:
		case !isSlot && state == model.StateHeld && w.holderLive(d.User.Get(model.PropHolder)):
			// A slot the configuration no longer has (slots lowered, class
			// removed) stays while its holder runs; it goes after.
		case isSlot && state == model.StateReady:
			if !d.Mounted {
				w.violate("I3", "ready slot %s is not mounted", d.Name)
			}
			w.checkEmpty(d.Name)
		case isSlot && state == model.StateHeld:
			if !w.holderLive(d.User.Get(model.PropHolder)) {
				w.violate("I3", "slot %s is held by %s, which no longer runs here", d.Name, d.User.Get(model.PropHolder))
			}
		case state == model.StateRetained || state == model.StateParked:
			// Parked data waits, bounded, for a replacement Nomad may
			// still create (a reschedule): like retained data, it expires.
			if d.User.Get(model.PropExpires) == "" {
				w.violate("I3", "%s %s has no expiry", state, d.Name)
			}
		case strings.Count(strings.TrimPrefix(d.Name, parent+"/"), "/") == 0:
			// A class dataset no longer configured goes once nothing is
			// below it (its orphans released, its retained data expired).
			if hasBelow(sets, d.Name) {
				break
			}
			w.violate("I3", "class dataset %s is no longer configured and nothing is below it, yet it is still there", d.Name)
		default:
			w.violate("I3", "owned dataset %s is %q after quiescence (configured slot: %v)", d.Name, state, isSlot)
		}
	}
	for name, isClass := range configured {
		if !isClass && !seen[name] {
			w.violate("I3", "configured slot %s does not exist after quiescence", name)
		}
	}
	w.checkForeign(sets, true)
	w.checkLeaks(sets)
	w.checkLiveness()
}

// hasBelow reports whether anything in sets (a snapshot included) lies
// below dataset.
func hasBelow(sets []zfs.Dataset, dataset string) bool {
	for _, d := range sets {
		if strings.HasPrefix(d.Name, dataset+"/") || strings.HasPrefix(d.Name, dataset+"@") {
			return true
		}
	}
	return false
}

func (w *World) outside() []zfs.Dataset {
	sets, _ := w.cliZFS().List(context.Background(), pool+"/outside", nil)
	return sets
}

// checkEmpty: a ready slot holds no allocation's data.
func (w *World) checkEmpty(name string) {
	mp := w.fake.Mountpoint(name)
	if mp == "" {
		return
	}
	ents, _ := os.ReadDir(mp)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "token-") {
			w.violate("I3", "ready slot %s still holds %s", name, e.Name())
		}
	}
}

func (w *World) holderLive(id string) bool {
	a, ok := w.localGet(id)
	return ok && a.live()
}

// checkLiveness: no slot sits free while a service job that fits in it
// waits.
func (w *World) checkLiveness() {
	used := map[string]bool{}
	for _, a := range w.sortedLocal() {
		if a.phase != dead {
			for _, id := range a.deviceIDs() {
				used[id] = true
			}
		}
	}
	for _, js := range w.liveJobs() {
		if js.job.Batch {
			continue
		}
		g := js.job.Groups[0]
		runningN := 0
		for _, a := range w.sortedLocal() {
			if a.job == js.job.ID && a.phase == running {
				runningN++
			}
		}
		if runningN >= g.Count {
			continue
		}
		class, need := "", 0
		for _, t := range g.Tasks {
			for _, ask := range t.Devices {
				class, need = ask.Class, need+ask.Count
			}
		}
		var free []string
		for _, c := range w.cfg.Classes {
			if c.Name != class {
				continue
			}
			for n := 1; n <= c.Slots; n++ {
				if id := model.SlotID(c.Name, n); !used[id] {
					free = append(free, id)
				}
			}
		}
		if need > 0 && len(free) >= need {
			sort.Strings(free)
			w.violate("liveness", "job %s runs %d of %d allocations while %v of class %s are free", js.job.ID, runningN, g.Count, free, class)
		}
	}
}

// checkLeaks is I3 for what is not the plugin's by its mark: at
// quiescence, every dataset below the parent is the plugin's (its mark,
// or a retain_as naming it) or someone else's the world made (w.foreign),
// and every snapshot of the plugin's data is @pristine, or @retained of
// data kept aside. A crash between two steps may leave data whose mark is
// not written yet; a pass must find and finish it.
func (w *World) checkLeaks(sets []zfs.Dataset) {
	foreign := map[string]bool{}
	for _, f := range w.foreign {
		foreign[f.name] = true
	}
	state := map[string]model.State{}
	for _, d := range sets {
		if !d.IsSnapshot() && model.Owned(&d) {
			state[d.Name] = model.State(d.User.Get(model.PropState))
		}
	}
	for _, d := range sets {
		if d.Name == parent || foreign[d.Name] {
			continue
		}
		ds, snap, isSnap := strings.Cut(d.Name, "@")
		switch {
		case !isSnap && !model.Owned(&d):
			w.violate("I3", "%s is below the parent and nobody's: no owner mark, and nothing the world made", d.Name)
		case !isSnap:
		case snap == model.PristineSnapshot:
		case snap == model.RetainedSnapshot && (state[ds] == model.StateRetained || state[ds] == model.StateParked):
		default:
			w.violate("I3", "snapshot %s is left behind (its dataset is %q)", d.Name, state[ds])
		}
	}
}
