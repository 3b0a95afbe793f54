package model_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// world is one node's datasets on the zfs fake (below the seam: real files,
// OpenZFS's answers), for the plan tests: plans are applied to it command
// by command, as the Manager's executor applies them, and read back as a
// scan reads them.
type world struct {
	t    *testing.T
	f    *zfstest.Fake
	c    *zfs.Client
	cfg  *model.Config
	now  time.Time
	snap *model.Snapshot
}

const parent = "tank/nomad"

// newWorld makes the pool, the parent, the class datasets and every
// configured slot, ready (generation 1), as a first pass would.
func newWorld(t *testing.T, classes ...model.Class) *world {
	t.Helper()
	w := &world{t: t, now: time.Unix(1_800_000_000, 0)}
	w.f = zfstest.New(zfstest.Options{MountRoot: t.TempDir(), Now: func() time.Time { return w.now }})
	must(t, w.f.AddPool("tank", 1<<30))
	w.c = zfs.NewClient(w.f)
	must(t, w.c.Create(t.Context(), parent, nil))
	// The golden image a class may clone its slots from.
	must(t, w.c.Create(t.Context(), "tank/golden", nil))
	w.write("tank/golden", "seed", "golden")
	must(t, w.c.Snapshot(t.Context(), "tank/golden@seed", nil))
	w.cfg = &model.Config{Parent: parent, ScanInterval: time.Minute, Classes: classes}
	w.settle(nil, 10)
	return w
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// apply runs p's commands in order, as hooks' executor does, crashing (the
// process gone: nothing more runs, OnFail neither) once crashAt commands
// have run; crashAt < 0 never crashes. It returns how many commands ran and
// the error that stopped the plan: errAgain, with the name a command found
// taken read into seen, when the plan is to be made again.
func (w *world) apply(p model.Plan, crashAt int, seen model.Seen) (ran int, err error) {
	w.t.Helper()
	for _, op := range p.Ops {
		if ran == crashAt {
			return ran, errCrash
		}
		err := w.c.Exec(w.t.Context(), op.Command)
		ran++
		switch op.Outcome(err) {
		case model.Next:
			continue
		case model.Again:
			rows, lerr := w.c.List(w.t.Context(), op.Check, model.UserProps)
			if lerr != nil && !errors.Is(lerr, zfs.ErrNotExist) {
				w.t.Fatal(lerr)
			}
			seen[op.Check] = rows
			return ran, errAgain
		}
		for _, o := range p.OnFail {
			_ = w.c.Exec(w.t.Context(), o.Command)
		}
		return ran, err
	}
	return ran, nil
}

var (
	errCrash = errors.New("crashed")
	errAgain = errors.New("plan again")
)

// view reads the node as a scan does.
func (w *world) view() *model.View {
	w.t.Helper()
	s := model.Scan{At: w.now}
	s.Pools, s.PoolErr = w.c.Pools(w.t.Context(), "tank")
	var err error
	if s.Sets, err = w.c.List(w.t.Context(), parent, model.UserProps); err != nil {
		s.ListErrs = map[string]error{parent: err}
	}
	return model.BuildView(w.cfg, s, nil)
}

// pass is what one reconcile pass plans from the node as it is, in the
// Manager's order (hooks.Manager.ReconcileScanned): the creates and mounts,
// every slot's lifecycle step, then per class the data kept aside (crash
// finishes, prunes, parked data no replacement will claim) and removed
// classes. Steps that ask Nomad first (a lost or vanished holder) are not
// in these worlds.
func (w *world) pass() []model.Plan {
	steps := w.steps()
	plans := make([]model.Plan, len(steps))
	for i, s := range steps {
		plans[i] = s.plan
	}
	return plans
}

// step is one plan of a pass, and how to make it again from a fresh
// reading with what a command found (a release's; nil for the others).
type step struct {
	plan  model.Plan
	again func(seen model.Seen) model.Plan
}

func (w *world) steps() []step {
	w.t.Helper()
	v := w.view()
	var plans []step
	add := func(ps ...model.Plan) {
		for _, p := range ps {
			plans = append(plans, step{plan: p})
		}
	}
	acts, _ := model.PlanEnsure(v, w.now)
	for _, a := range acts {
		add(model.Plan{Ops: a.Ops})
	}
	slotOf := func(id string) (model.Slot, bool) {
		if s, _ := v.Slot(id); s != nil {
			return *s, true
		}
		return model.Slot{}, false
	}
	for _, st := range model.PlanLifecycle(v, w.snap) {
		c := w.cfg.Class(st.Slot.Class)
		switch st.Kind {
		case model.StepRecord:
			add(model.PlanRecord(st.Slot, st.Alloc, w.now))
		case model.StepTidy:
			add(model.PlanTidy(st.Slot))
		case model.StepPristine:
			add(model.PlanPristine(st.Slot))
		case model.StepRelease:
			release := func(s model.Slot, seen model.Seen) model.Plan {
				p, err := model.PlanRelease(model.ReleaseInput{Config: w.cfg, Class: c, Slot: s, Holder: st.Alloc,
					Outcome: st.Outcome, Snap: w.snap, SlotOf: slotOf, Seen: seen, Now: w.now})
				must(w.t, err)
				return p
			}
			plans = append(plans, step{plan: release(st.Slot, model.Seen{}), again: func(seen model.Seen) model.Plan {
				return release(w.slot(st.Slot.Class, st.Slot.ID), seen)
			}})
		default:
			w.t.Fatalf("%s: %s asks Nomad first; not in these worlds", st.Slot.ID, st.Kind)
		}
	}
	for _, cvs := range [][]model.ClassView{v.Classes, v.Removed} {
		for ci := range cvs {
			cv := &cvs[ci]
			add(model.PlanFinishRetained(cv, w.now)...)
			prunes, _ := model.PlanPrunes(w.cfg, cv, w.now)
			add(prunes...)
			for _, p := range cv.Parked {
				switch ps := model.PlanParked(cv.Class, p, cv.Slots, w.snap, map[string]model.Alloc{}, w.now); ps.Kind {
				case model.ParkedFinish:
					add(model.PlanFinishParked(cv.Class, p, w.now))
				case model.ParkedRelease:
					pl, err := model.PlanReleaseParked(w.cfg, cv.Class, p, ps.Reason, w.now)
					must(w.t, err)
					add(pl)
				}
			}
		}
	}
	add(model.PlanRetireClasses(v)...)
	return plans
}

// settle runs passes until one plans nothing (at most max), as the
// Manager's passes do after a crash, each plan made again from a fresh
// reading when a command asks for it.
func (w *world) settle(snap *model.Snapshot, max int) {
	w.t.Helper()
	w.snap = snap
	for range max {
		steps := w.steps()
		if len(steps) == 0 {
			return
		}
		for _, st := range steps {
			w.carryOut(st)
		}
		w.now = w.now.Add(time.Second)
	}
	w.t.Fatalf("no quiescence after %d passes; still planned: %s", max, showAll(w.pass()))
}

// carryOut runs one step's plan to the end, made again from a fresh
// reading when a command asks for it (hooks.Manager.carryOut).
func (w *world) carryOut(st step) {
	w.t.Helper()
	seen := model.Seen{}
	p := st.plan
	for range 4 {
		_, err := w.apply(p, -1, seen)
		switch {
		case err == nil:
			return
		case errors.Is(err, errAgain) && st.again != nil:
			p = st.again(seen)
		default:
			w.t.Fatalf("running %s: %v", show(p), err)
		}
	}
	w.t.Fatalf("%s: planned again and again", show(p))
}

// slot reads slot id as a step reads it before it acts.
func (w *world) slot(class, id string) model.Slot {
	w.t.Helper()
	dataset := w.cfg.SlotDataset(class, id)
	rows, err := w.c.List(w.t.Context(), dataset, model.UserProps)
	if err != nil && !errors.Is(err, zfs.ErrNotExist) {
		w.t.Fatal(err)
	}
	v := w.view()
	return model.SlotFromListing(w.cfg, class, dataset, rows, v.ParentMountpoint)
}

// write puts a file with content into dataset's mounted directory: a
// task's data.
func (w *world) write(dataset, name, content string) {
	w.t.Helper()
	dir := w.f.Mountpoint(dataset)
	if dir == "" {
		w.t.Fatalf("%s is not mounted", dataset)
	}
	must(w.t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
}

// state is the node as the tests compare it: every dataset and snapshot
// below the parent with the plugin's properties that say what it is (not
// when: since and expires move with the clock), its holds, and the files
// of each mounted filesystem.
func (w *world) state() string {
	w.t.Helper()
	ds, err := w.c.List(context.Background(), parent, model.UserProps)
	must(w.t, err)
	var lines []string
	for _, d := range ds {
		var props []string
		for _, p := range []string{model.PropState, model.PropHolder, model.PropHolderIndex, model.PropOutcome,
			model.PropGeneration, model.PropRetainAs} {
			if v := d.User.Get(p); v != "" && !d.IsSnapshot() {
				props = append(props, strings.TrimPrefix(p, model.PropPrefix)+"="+short(v))
			}
		}
		if d.Name == parent {
			continue
		}
		if d.User.Get(model.PropOwner) == d.Name {
			props = append(props, "owned")
		}
		line := short(d.Name) + " " + strings.Join(props, " ")
		if d.IsSnapshot() {
			holds, err := w.c.Holds(context.Background(), d.Name)
			must(w.t, err)
			for _, h := range holds {
				line += " hold=" + h.Tag
			}
		} else if dir := w.f.Mountpoint(d.Name); dir != "" && d.Mounted {
			line += " files=" + files(w.t, dir)
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// files lists a directory's regular files with their contents.
func files(t *testing.T, dir string) string {
	entries, err := os.ReadDir(dir)
	must(t, err)
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			must(t, err)
			out = append(out, e.Name()+":"+string(b))
		}
	}
	sort.Strings(out)
	return "[" + strings.Join(out, ",") + "]"
}

// short drops the parent from a name, so goldens read as the class layout.
func short(name string) string { return strings.TrimPrefix(name, parent+"/") }

// show is a plan's commands in short: "verb name [arg] [{props}]", with
// the plugin's property prefix dropped.
func show(p model.Plan) string {
	var cmds []string
	for _, c := range p.Commands() {
		s := strings.ReplaceAll(c.String(), parent+"/", "")
		cmds = append(cmds, strings.ReplaceAll(s, model.PropPrefix, ""))
	}
	return strings.Join(cmds, "; ")
}

// showAll is the plans of a pass, one per line.
func showAll(plans []model.Plan) string {
	out := make([]string, len(plans))
	for i, p := range plans {
		out[i] = show(p)
	}
	return strings.Join(slices.DeleteFunc(out, func(s string) bool { return s == "" }), "\n")
}

func alloc(id string, index uint64, client, desired, class string, slots ...string) model.Alloc {
	return model.Alloc{ID: id, Namespace: "default", JobID: "job", TaskGroup: "g", NodeID: "node",
		CreateIndex: index, ModifyIndex: index, ClientStatus: client, DesiredStatus: desired,
		Devices: []model.Device{{Task: "t", Vendor: model.Vendor, Type: model.DeviceType, Name: class, IDs: slots}}}
}

func snapshot(allocs ...model.Alloc) *model.Snapshot {
	return &model.Snapshot{NodeID: "node", Index: 100, Allocs: allocs}
}

func (w *world) String() string { return fmt.Sprintf("world at %s", w.now) }

// receivedFor is a world of class c where the copy of A's data (pg-1 on
// another node) was received whole for b, sent and received as a pull
// does (-u, the receive's marks), and marked parked by its pull for b's
// slot (PlanReceived).
func receivedFor(c model.Class, b model.Alloc) func(t *testing.T) *world {
	return func(t *testing.T) *world {
		w := newWorld(t, c)
		ctx := t.Context()
		const src = "tank/src"
		must(t, w.c.Create(ctx, src, nil))
		w.write(src, "data", "A")
		must(t, w.c.Snapshot(ctx, src+"@migrate-1", nil))
		must(t, w.c.Snapshot(ctx, src+"@migrate-final", nil))
		name := w.cfg.ParkedName(c.Name, "A", "pg-1")
		props := model.ReceiveProps(c, name, "A", w.now, w.now.Add(c.StickyWait))
		for _, snap := range []zfs.SendOptions{{Snapshot: src + "@migrate-1"}, {Snapshot: src + "@migrate-final", From: src + "@migrate-1"}} {
			r, wr := io.Pipe()
			go func() { _ = wr.CloseWithError(w.c.Send(ctx, snap, wr)) }()
			must(t, w.c.Receive(ctx, zfs.ReceiveOptions{Target: name, Resumable: true, NoMount: true, Props: props}, r))
		}
		slot := w.cfg.SlotDataset(c.Name, b.Devices[0].IDs[0])
		if _, err := w.apply(model.PlanReceived(name, slot, w.now, w.now.Add(c.StickyWait)), -1, model.Seen{}); err != nil {
			t.Fatal(err)
		}
		must(t, w.c.Destroy(ctx, src, zfs.DestroyOptions{Recursive: true}))
		return w
	}
}
