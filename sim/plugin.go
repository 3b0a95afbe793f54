package sim

import (
	"context"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/allocwatch"
	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	devplugin "github.com/nomad-device-zfs/nomad-device-zfs/plugin"
	"github.com/nomad-device-zfs/nomad-device-zfs/scheduler"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// plugin is one incarnation of the plugin process: a Manager and a
// Watcher built from nothing but the configuration, over the same ZFS,
// and the device plugin Nomad's client calls Reserve on. The world runs
// what the plugin's goroutines run: the watcher's Run (watchLoop), and
// the Manager's loop as events (a pass, a Settle on the watcher's news).
type plugin struct {
	mgr     *hooks.Manager
	watcher *allocwatch.Watcher
	dev     *devplugin.Plugin
	run     *runner
	watch   *watchLoop
	// refreshed is the last answer a Reserve's refresh got (recorder):
	// with the watcher's last delivery, the newest snapshot the Manager has.
	refreshed model.Snapshot
	// scan is a periodic scan Run started off its loop, not yet acted on:
	// watches and Reserves go on meanwhile.
	scan *model.Scan
}

// launch starts a plugin process: new Manager, new Watcher (its Run
// starts, and delivers its first answer), one reconcile (the Manager's
// Run does that at once).
func (w *World) launch(why string) {
	cfg := w.cfg
	cfg.Classes = slices.Clone(w.cfg.Classes)
	r := &runner{w: w, fake: w.fake, budget: -1}
	wa, err := allocwatch.New(allocwatch.Config{Config: nomadapi.Config{Address: "unix://" + w.api.sock, Token: "sim-token"}, NodeID: nodeID}, w.logger)
	if err != nil {
		w.violate("harness", "allocwatch.New: %v", err)
		return
	}
	p := &plugin{watcher: wa, run: r}
	mgr, err := hooks.NewManager(hooks.Config{Slots: &cfg, ZFS: zfs.NewClient(r), Allocs: recorder{wa, p}, Logger: w.logger,
		Sim: &hooks.Simulation{Now: w.clock, Sleep: w.sleep, Sequential: true}})
	if err != nil {
		w.violate("harness", "hooks.NewManager: %v", err)
		return
	}
	now := func() time.Time { return w.now }
	dev := devplugin.NewHosted(w.logger, &devplugin.Settings{Slots: cfg, ReserveTimeout: reserveTO},
		devplugin.Host{Manager: mgr, Now: now})
	p.mgr, p.dev = mgr, dev
	w.plugin = p
	w.logf("plugin launched (%s)", why)
	p.watch = w.startWatch(p)
	w.reconcile()
}

// recorder is the Manager's allocation source: the watcher, with the last
// answer a refresh got kept for the world (watchStalled).
type recorder struct {
	*allocwatch.Watcher
	p *plugin
}

func (r recorder) Refresh(ctx context.Context) (model.Snapshot, error) {
	s, err := r.Watcher.Refresh(ctx)
	if err == nil {
		r.p.refreshed = s
	}
	return s, err
}

// stop ends the process's goroutines: the watcher's Run, and whatever its
// methods wait on (a Reserve).
func (w *World) stop(p *plugin) {
	p.run.dead = true
	p.dev.Shutdown()
	w.stopWatch(p.watch)
}

// kill ends the plugin process now.
func (w *World) kill(why string) {
	if w.plugin == nil {
		return
	}
	w.stop(w.plugin)
	w.plugin = nil
	w.logf("plugin killed (%s)", why)
}

// alive reports whether the plugin still runs, after a crash its runner
// may have caused in the middle of a call.
func (w *World) alive() bool {
	if w.plugin != nil && w.plugin.run.dead {
		w.stop(w.plugin)
		w.plugin = nil
		w.logf("plugin died mid-operation")
	}
	return w.plugin != nil
}

// reconcile runs a pass of Run's loop: on the scan it started, if one is
// pending, else on a scan taken now.
func (w *World) reconcile() {
	w.scanOrReconcile(false)
}

// scanOrReconcile is the Reconcile event. Run takes its periodic scan off
// its loop and acts on it later, so with start set (and no scan pending)
// it only takes the scan: the pass runs on it at a later Reconcile event,
// after whatever the events between changed.
func (w *World) scanOrReconcile(start bool) {
	if !w.alive() {
		return
	}
	ctx, cancel := w.simContext(w.cfg.ScanInterval)
	defer cancel()
	p := w.plugin
	w.passErrs = 0
	switch {
	case p.scan != nil:
		s := *p.scan
		p.scan = nil
		w.logf("pass on the scan of %s", s.At.Format("15:04:05.000"))
		hooks.StepsOf(p.mgr).ReconcileScanned(ctx, s)
		w.checkPruned(s.At)
	case start:
		s := hooks.StepsOf(p.mgr).Scan(ctx)
		p.scan = &s
		w.logf("scan taken")
	default:
		at := w.now
		p.mgr.Reconcile(ctx)
		w.checkPruned(at)
	}
	w.alive()
}

// watch lets the watcher's Run go on as far as what it waits for allows
// (its pause is over; its blocking query has an answer) and, when it
// delivered news, runs the Settle pass that Run's loop starts on it (only
// the slots the allocations call for, without a scan).
func (w *World) watch() {
	if !w.alive() {
		return
	}
	snap, ok := w.pumpWatch(w.plugin.watch)
	if !ok || !w.alive() {
		return
	}
	w.logf("watch: %d allocs at index %d", len(snap.Allocs), snap.Index)
	ctx, cancel := w.simContext(30 * time.Second)
	defer cancel()
	w.plugin.mgr.Settle(ctx)
	w.alive()
}

// recheck is the timer of Run's loop for the slots that wait on what no
// event reports (hooks.Steps.Recheck): when the earliest of their clocks
// is due in simulated time, the Manager looks again.
func (w *World) recheck() {
	if !w.alive() {
		return
	}
	next, ok := hooks.StepsOf(w.plugin.mgr).NextRecheck()
	if !ok || next.After(w.now) {
		return
	}
	w.logf("recheck: a waiting slot's clock is due")
	ctx, cancel := w.simContext(30 * time.Second)
	defer cancel()
	hooks.StepsOf(w.plugin.mgr).Recheck(ctx)
	w.alive()
}

// fingerprint sends the plugin's view to the servers as the node's
// devices, and lets blocked evaluations run again.
func (w *World) fingerprint() {
	if !w.alive() || !w.connected {
		return
	}
	v, _ := w.plugin.mgr.View()
	if v == nil {
		return
	}
	node := scheduler.Node{ID: nodeID, Name: "node-a"}
	var desc []string
	for _, cv := range v.Classes {
		g := scheduler.DeviceGroup{Class: cv.Class.Name, Attributes: map[string]string{"pool": pool}}
		for _, s := range cv.Slots {
			g.Instances = append(g.Instances, scheduler.Instance{ID: s.ID, Healthy: s.Healthy, HealthDesc: s.Reason})
			mark := "+"
			if !s.Healthy {
				mark = "-"
			}
			desc = append(desc, mark+s.ID)
		}
		node.Devices = append(node.Devices, g)
	}
	if reflect.DeepEqual(node, w.node) {
		return // the plugin sends only what changed, and the client registers only that
	}
	w.node = node
	w.registerNode()
	w.logf("fingerprint: %s", strings.Join(desc, " "))
}

// runner is the plugin's zfs.Runner: the fake, plus the faults only a
// process boundary has — the process dying between two commands, and a
// command that times out whether or not it took effect. It also checks
// I5 on every command before it runs.
type runner struct {
	w    *World
	fake *zfstest.Fake
	dead bool
	// budget is the commands left before the process dies; -1: no death.
	budget int
	// timeout makes the next command matching sub time out; applied says
	// whether it runs anyway (a zfs stuck in the kernel that finishes).
	timeoutSub string
	applied    bool
	// dieBefore, if set, kills the process before the first command it
	// accepts (scripted scenarios).
	dieBefore func(args []string) bool
}

// maxCmdsPerEvent bounds the zfs commands one event may run: a loop that
// spins without waiting is a bug, not a slow node.
const maxCmdsPerEvent = 5000

var errKilled = errors.New("plugin process killed")

func (r *runner) Run(ctx context.Context, cmd string, args ...string) ([]byte, error) {
	if r.dead {
		return nil, errKilled
	}
	if r.budget == 0 || r.dieBefore != nil && r.dieBefore(args) {
		r.dead = true
		r.w.logf("plugin dies before: %s %s", cmd, strings.Join(args, " "))
		return nil, errKilled
	}
	if r.budget > 0 {
		r.budget--
	}
	if r.w.cmds++; r.w.cmds > maxCmdsPerEvent {
		r.dead = true
		r.w.violate("liveness", "runaway: more than %d zfs commands in one event, the last %s %s", maxCmdsPerEvent, cmd, strings.Join(args, " "))
		return nil, errKilled
	}
	if cmd == "zfs" && len(args) > 0 && mutating[args[0]] {
		r.w.zfsChanged = true
	}
	r.w.checkTrespass(cmd, args)
	if f := r.w.zfsFault(cmd, args); f != nil {
		r.w.passErrs++
		r.w.logf("zfs fault: %s %s: %s", cmd, strings.Join(args, " "), f.stderr)
		return nil, zfs.NewError(cmd, args, f.stderr+"\n", 1)
	}
	if r.timeoutSub != "" && len(args) > 0 && args[0] == r.timeoutSub {
		r.timeoutSub = ""
		if r.applied {
			_, _ = r.fake.Run(ctx, cmd, args...)
		}
		r.w.passErrs++
		r.w.logf("zfs timed out (ran: %v): %s %s", r.applied, cmd, strings.Join(args, " "))
		e := zfs.NewError(cmd, args, "", -1)
		e.Kind, e.Cause = zfs.ErrTimeout, context.DeadlineExceeded
		return nil, e
	}
	out, err := r.fake.Run(ctx, cmd, args...)
	if err != nil && (strings.Contains(err.Error(), "suspended") || strings.Contains(err.Error(), "busy")) {
		r.w.passErrs++ // a fault, not the answer to a question (does it exist?)
	}
	if err != nil && len(args) > 0 && args[0] != "list" && args[0] != "get" {
		r.w.logf("zfs %s: %v", strings.Join(args, " "), short(err))
	}
	return out, err
}

// zfsFault is an injected failure of the plugin's next commands that
// name sub (ZFSFail). It is the plugin's runner's, not the fake's, so that
// the world's own reads (its checks) neither fail nor use it up.
type zfsFault struct {
	cmd, sub, stderr string
	times            int
}

// zfsFault returns the fault the command meets, if any, using it once.
func (w *World) zfsFault(cmd string, args []string) *zfsFault {
	for i, f := range w.zfsFaults {
		if f.cmd == cmd && slices.Contains(args, f.sub) {
			if f.times--; f.times == 0 {
				w.zfsFaults = slices.Delete(w.zfsFaults, i, i+1)
			}
			return f
		}
	}
	return nil
}

// mutating are the zfs subcommands that change something.
var mutating = map[string]bool{"create": true, "destroy": true, "rollback": true, "rename": true, "set": true,
	"inherit": true, "snapshot": true, "clone": true, "hold": true, "release": true, "mount": true,
	"unmount": true, "umount": true, "promote": true}

// checkTrespass is I5: a changing command names only datasets below the
// parent, and none of the foreign ones (or below them).
func (w *World) checkTrespass(cmd string, args []string) {
	if cmd != "zfs" || len(args) == 0 || !mutating[args[0]] {
		return
	}
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "-") || strings.Contains(a, "=") && !strings.HasPrefix(a, pool) {
			continue
		}
		if !strings.HasPrefix(a, pool) {
			continue // a hold tag, a property name
		}
		name := strings.SplitN(a, "@", 2)[0]
		if !strings.HasPrefix(name, parent+"/") {
			if !(args[0] == "clone" && strings.Contains(a, "@")) {
				w.violate("I5", "zfs %s touches %s, outside %s", strings.Join(args, " "), a, parent)
			}
			continue
		}
		for _, f := range w.foreign {
			if strings.Contains(f.name, "@") {
				// A snapshot: only a command naming it touches it; one that
				// takes it along with its dataset is seen in the data
				// (checkForeign).
				if a == f.name {
					w.violate("I5", "zfs %s touches %s, which the plugin does not own", strings.Join(args, " "), a)
				}
				continue
			}
			if name == f.name || strings.HasPrefix(name, f.name+"/") {
				w.violate("I5", "zfs %s touches %s, which the plugin does not own", strings.Join(args, " "), a)
			}
		}
	}
}

func short(err error) string {
	s := err.Error()
	if len(s) > 160 && os.Getenv("NDZ_SIM_LONG") == "" {
		s = s[:160] + "…"
	}
	return s
}
