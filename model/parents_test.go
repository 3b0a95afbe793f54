package model

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Classes below several parents, on two pools: bulk below the block's
// parent (tank/nomad), fast below its own (nvme/nomad).

var twoCfg = &Config{
	Parent: "tank/nomad",
	Classes: []Class{
		{Name: "bulk", Slots: 1},
		{Name: "fast", Parent: "nvme/nomad", Slots: 1, Release: Release{Policy: PolicySnapshot}},
	},
}

func twoPools(nvmeHealth string) []zfs.Pool {
	return []zfs.Pool{{Name: "tank", Health: "ONLINE"}, {Name: "nvme", Health: nvmeHealth}}
}

// twoRows are both parents' listings: each class with its slot, held.
func twoRows() []zfs.Dataset {
	return []zfs.Dataset{
		fsRow("tank/nomad", nil), ownedRow("tank/nomad/bulk", ""), ownedRow("tank/nomad/bulk/bulk-1", StateHeld),
		fsRow("nvme/nomad", nil), ownedRow("nvme/nomad/fast", ""), ownedRow("nvme/nomad/fast/fast-1", StateHeld),
	}
}

func TestConfigParents(t *testing.T) {
	if got := twoCfg.Parents(); strings.Join(got, " ") != "tank/nomad nvme/nomad" {
		t.Errorf("Parents() = %v", got)
	}
	for class, want := range map[string]string{
		"bulk": "tank/nomad/bulk", "fast": "nvme/nomad/fast",
		"gone": "tank/nomad/gone", // not configured: the block's parent
	} {
		if got := twoCfg.ClassDataset(class); got != want {
			t.Errorf("ClassDataset(%s) = %s, want %s", class, got, want)
		}
	}
	if got := twoCfg.SlotDataset("fast", "fast-1"); got != "nvme/nomad/fast/fast-1" {
		t.Errorf("SlotDataset = %s", got)
	}
}

// TestBuildViewHealthPerParent: a parent's problem makes only its own
// classes' slots unhealthy; the other parent's are offered as before.
func TestBuildViewHealthPerParent(t *testing.T) {
	notExist := zfs.NewError("zfs", nil, "cannot open 'nvme/nomad': dataset does not exist", 1)
	unmountedNvme := withUnmounted(twoRows(), "nvme/nomad")
	cases := []struct {
		name string
		scan Scan
		// fastReason is the fast slot's reason ("" healthy); bulk stays healthy.
		fastReason string
	}{
		{name: "both online", scan: Scan{Pools: twoPools("ONLINE"), Sets: twoRows()}},
		{name: "second pool degraded", scan: Scan{Pools: twoPools("DEGRADED"), Sets: twoRows()},
			fastReason: `pool "nvme" is DEGRADED`},
		{name: "second pool not imported", scan: Scan{Pools: twoPools("ONLINE")[:1], Sets: twoRows()[:3]},
			fastReason: `pool "nvme" not found (parent = "nvme/nomad")`},
		{name: "second parent missing", scan: Scan{Pools: twoPools("ONLINE"), Sets: twoRows()[:3],
			ListErrs: map[string]error{"nvme/nomad": notExist}},
			fastReason: `parent dataset "nvme/nomad" does not exist`},
		{name: "second parent not mounted", scan: Scan{Pools: twoPools("ONLINE"), Sets: unmountedNvme},
			fastReason: `parent dataset "nvme/nomad" is not mounted`},
		{name: "second listing failed", scan: Scan{Pools: twoPools("ONLINE"), Sets: twoRows()[:3],
			ListErrs: map[string]error{"nvme/nomad": errors.New("signal: killed")}},
			fastReason: "zfs list failed: signal: killed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := BuildView(twoCfg, tc.scan, nil)
			bulk, fast := &v.Classes[0], &v.Classes[1]
			if bulk.Parent != "tank/nomad" || fast.Parent != "nvme/nomad" || fast.Dataset != "nvme/nomad/fast" {
				t.Fatalf("classes below %s (%s) and %s (%s)", bulk.Parent, bulk.Dataset, fast.Parent, fast.Dataset)
			}
			if s := bulk.Slots[0]; !s.Healthy || s.Dataset != "tank/nomad/bulk/bulk-1" {
				t.Errorf("bulk-1 at %s: healthy %v (%s)", s.Dataset, s.Healthy, s.Reason)
			}
			s := fast.Slots[0]
			if s.Dataset != "nvme/nomad/fast/fast-1" {
				t.Errorf("fast-1 at %s", s.Dataset)
			}
			if s.Healthy != (tc.fastReason == "") || !strings.Contains(s.Reason, tc.fastReason) {
				t.Errorf("fast-1: healthy %v, reason %q, want %q", s.Healthy, s.Reason, tc.fastReason)
			}
			if v.Problem != "" || v.Parent("tank/nomad").Problem != "" {
				t.Errorf("the block's parent has a problem: %q", v.Problem)
			}
			if got := v.ParentProblem(fast); !strings.Contains(got, tc.fastReason) || (got == "") != (tc.fastReason == "") {
				t.Errorf("fast's parent problem %q, want %q", got, tc.fastReason)
			}
			if len(v.Parents) != 2 || v.Parents[1].Dataset != "nvme/nomad" {
				t.Errorf("parents %+v", v.Parents)
			}
		})
	}
}

// TestLifecyclePerParent: a DEGRADED second pool stops the lifecycle of its
// class alone: bulk's ended holder is released, fast's is not (until the
// pool is back); nothing is created below it, and no removed class below
// it is destroyed.
func TestLifecyclePerParent(t *testing.T) {
	cfg := &Config{Parent: "tank/nomad", Classes: []Class{{Name: "bulk", Slots: 1}, {Name: "fast", Parent: "nvme/nomad", Slots: 2}}}
	held := func(name, holder string) zfs.Dataset {
		return fsRow(name, map[string]string{PropOwner: name, PropState: string(StateHeld), PropHolder: holder, PropGeneration: "1"})
	}
	rows := []zfs.Dataset{
		fsRow("tank/nomad", nil), ownedRow("tank/nomad/bulk", ""), held("tank/nomad/bulk/bulk-1", "a"),
		ownedRow("tank/nomad/gone", ""),                                                                // a removed class below the healthy parent
		fsRow("nvme/nomad", nil), ownedRow("nvme/nomad/fast", ""), held("nvme/nomad/fast/fast-1", "b"), // fast-2 not created yet
		ownedRow("nvme/nomad/old", ""), // a removed class below the second parent
	}
	snap := &Snapshot{}
	for _, s := range []struct{ id, class string }{{"a", "bulk"}, {"b", "fast"}} {
		snap.Allocs = append(snap.Allocs, Alloc{ID: s.id, ClientStatus: "complete", DesiredStatus: "run", CreateIndex: 5,
			Devices: []Device{{Vendor: Vendor, Type: DeviceType, Name: s.class, IDs: []string{s.class + "-1"}}}})
	}
	cases := []struct {
		health                  string
		steps, created, retired string
	}{
		{"ONLINE", "release tank/nomad/bulk/bulk-1, release nvme/nomad/fast/fast-1", "nvme/nomad/fast/fast-2", "nvme/nomad/old tank/nomad/gone"},
		{"DEGRADED", "release tank/nomad/bulk/bulk-1", "", "tank/nomad/gone"},
	}
	for _, tc := range cases {
		t.Run(tc.health, func(t *testing.T) {
			v := BuildView(cfg, Scan{Pools: twoPools(tc.health), Sets: rows}, nil)
			var steps []string
			for _, st := range PlanLifecycle(v, snap) {
				steps = append(steps, st.Kind.String()+" "+st.Slot.Dataset)
			}
			if got := strings.Join(steps, ", "); got != tc.steps {
				t.Errorf("steps %q, want %q", got, tc.steps)
			}
			acts, _ := PlanEnsure(v, time.Unix(1700000000, 0))
			var made []string
			for _, a := range acts {
				made = append(made, a.Dataset)
			}
			if got := strings.Join(made, " "); got != tc.created {
				t.Errorf("created %q, want %q", got, tc.created)
			}
			var retired []string
			for _, p := range PlanRetireClasses(v) {
				retired = append(retired, p.Ops[0].Name)
			}
			if got := strings.Join(retired, " "); got != tc.retired {
				t.Errorf("retired %q, want %q", got, tc.retired)
			}
		})
	}
}

// TestRemovedAndMovedClassesPerParent: a removed class is found below
// whichever parent it is, its orphans and retained data named there; the
// dataset of a class now configured below another parent is moved, not
// removed, and nothing below it is planned for.
func TestRemovedAndMovedClassesPerParent(t *testing.T) {
	retained := ownedRow("nvme/nomad/old/retained-x", StateRetained)
	rows := append(twoRows(),
		ownedRow("nvme/nomad/old", ""), ownedRow("nvme/nomad/old/old-1", StateReady), retained,
		ownedRow("nvme/nomad/bulk", ""), ownedRow("nvme/nomad/bulk/bulk-1", StateHeld), // bulk's, from when it was below nvme
	)
	v := BuildView(twoCfg, Scan{Pools: twoPools("ONLINE"), Sets: rows}, nil)
	if len(v.Removed) != 1 {
		t.Fatalf("removed %+v", v.Removed)
	}
	old := v.Removed[0]
	if old.Parent != "nvme/nomad" || old.Dataset != "nvme/nomad/old" || len(old.Orphans) != 1 || len(old.Retained) != 1 {
		t.Fatalf("removed class old: parent %s dataset %s orphans %+v retained %+v", old.Parent, old.Dataset, old.Orphans, old.Retained)
	}
	if o := old.Orphans[0]; o.Dataset != "nvme/nomad/old/old-1" || !o.Orphan || o.Healthy {
		t.Errorf("orphan %+v", o)
	}
	if got := v.Parent("nvme/nomad").Moved; len(got) != 1 || got[0] != "nvme/nomad/bulk" {
		t.Errorf("moved %v, want nvme/nomad/bulk", got)
	}
	if got := v.Parent("tank/nomad").Moved; len(got) != 0 {
		t.Errorf("moved below tank/nomad: %v", got)
	}
	// The idle orphan goes; the moved class's held slot is not looked at.
	var steps []string
	for _, st := range PlanLifecycle(v, &Snapshot{}) {
		steps = append(steps, st.Kind.String()+" "+st.Slot.Dataset)
	}
	want := "check vanished holder tank/nomad/bulk/bulk-1, check vanished holder nvme/nomad/fast/fast-1, release nvme/nomad/old/old-1"
	if got := strings.Join(steps, ", "); got != want {
		t.Errorf("steps:\n%s\nwant\n%s", got, want)
	}
	// Retained data and a snapshot-policy release are named below the
	// slot's own class dataset.
	if got := twoCfg.RetainedName(v.Classes[1].Slots[0]); !strings.HasPrefix(got, "nvme/nomad/fast/retained-") {
		t.Errorf("fast's retained name %s", got)
	}
	if got := twoCfg.RetainedName(old.Orphans[0]); !strings.HasPrefix(got, "nvme/nomad/old/retained-") {
		t.Errorf("old's retained name %s", got)
	}
}

// TestKeepsLastGoodSetPerParent: a failed listing of one parent keeps that
// parent's last good datasets, marked unhealthy; the other parent's come
// from its fresh listing.
func TestKeepsLastGoodSetPerParent(t *testing.T) {
	good := BuildView(twoCfg, Scan{Pools: twoPools("ONLINE"), Sets: twoRows()}, nil)
	fresh := twoRows()[:3]
	fresh[2] = ownedRow("tank/nomad/bulk/bulk-1", StateReady)
	v := BuildView(twoCfg, Scan{Pools: twoPools("ONLINE"), Sets: fresh,
		ListErrs: map[string]error{"nvme/nomad": errors.New("signal: killed")}}, good)
	if s := v.Classes[0].Slots[0]; s.State != StateReady || !s.Healthy {
		t.Errorf("bulk-1 not from the fresh listing: %s, healthy %v (%s)", s.State, s.Healthy, s.Reason)
	}
	s := v.Classes[1].Slots[0]
	if !s.Exists || s.State != StateHeld || s.Healthy || !strings.Contains(s.Reason, "zfs list failed") {
		t.Errorf("fast-1 not kept from the last good set: exists %v %s, healthy %v (%s)", s.Exists, s.State, s.Healthy, s.Reason)
	}
	if s.WantMountpoint != "/nvme/nomad/fast/fast-1" {
		t.Errorf("fast-1's mountpoint from the last good set: %q", s.WantMountpoint)
	}
}
