package model

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Small builders for scans; the real column parsing is tested in package zfs.

var testCfg = &Config{
	Parent:       "tank/nomad",
	ScanInterval: time.Minute,
	Classes: []Class{
		{Name: "scratch", Slots: 2, MountPath: "/data", Properties: map[string]string{"quota": "1G"}},
	},
}

func onlinePool() []zfs.Pool {
	return []zfs.Pool{{Name: "tank", Health: "ONLINE", Size: 1 << 30, Free: 1 << 29}}
}

func fsRow(name string, user map[string]string) zfs.Dataset {
	return zfs.Dataset{Name: name, Type: "filesystem", Mountpoint: "/" + name, Mounted: true, Available: 1 << 29, User: zfs.UserPropsOf(user)}
}

func ownedRow(name string, state State) zfs.Dataset {
	u := map[string]string{PropOwner: name}
	if state != "" {
		u[PropState] = string(state)
		u[PropGeneration] = "1"
	}
	return fsRow(name, u)
}

// withUnmounted copies rows, marking the named datasets not mounted.
func withUnmounted(rows []zfs.Dataset, names ...string) []zfs.Dataset {
	out := append([]zfs.Dataset(nil), rows...)
	for i := range out {
		for _, n := range names {
			if out[i].Name == n {
				out[i].Mounted = false
			}
		}
	}
	return out
}

func TestBuildViewHealth(t *testing.T) {
	full := []zfs.Dataset{
		fsRow("tank/nomad", nil),
		ownedRow("tank/nomad/scratch", ""),
		ownedRow("tank/nomad/scratch/scratch-1", StateReady),
		ownedRow("tank/nomad/scratch/scratch-2", StateHeld),
	}
	unmounted := append([]zfs.Dataset(nil), full...)
	unmounted[3].Mounted = false

	// A dataset created by hand below an owned one inherits the owner value,
	// which names the parent: it must not count as owned.
	inherited := append([]zfs.Dataset(nil), full[:3]...)
	inherited = append(inherited, fsRow("tank/nomad/scratch/scratch-2", map[string]string{PropOwner: "tank/nomad/scratch"}))

	releasing := append([]zfs.Dataset(nil), full...)
	releasing[2] = ownedRow("tank/nomad/scratch/scratch-1", StateReleasing)

	cases := []struct {
		name       string
		scan       Scan
		wantHealth [2]bool
		wantReason [2]string
	}{
		{name: "all ready", scan: Scan{Pools: onlinePool(), Sets: full}, wantHealth: [2]bool{true, true}},
		{name: "pool missing", scan: Scan{PoolErr: zfs.NewError("zpool", nil, "cannot open 'tank': no such pool", 1)},
			wantReason: [2]string{`pool "tank" not found (parent = "tank/nomad")`, `pool "tank" not found`}},
		{name: "pool degraded", scan: Scan{Pools: []zfs.Pool{{Name: "tank", Health: "DEGRADED"}}, Sets: full},
			wantReason: [2]string{`pool "tank" is DEGRADED`, "DEGRADED"}},
		{name: "pool suspended", scan: Scan{Pools: []zfs.Pool{{Name: "tank", Health: "SUSPENDED"}}, Sets: full},
			wantReason: [2]string{"SUSPENDED", "SUSPENDED"}},
		{name: "pool read-only", scan: Scan{Pools: []zfs.Pool{{Name: "tank", Health: "ONLINE", ReadOnly: true}}, Sets: full},
			wantReason: [2]string{"read-only", "read-only"}},
		{name: "parent missing", scan: Scan{Pools: onlinePool(), ListErrs: map[string]error{"tank/nomad": zfs.NewError("zfs", nil, "cannot open 'tank/nomad': dataset does not exist", 1)}},
			wantReason: [2]string{`parent dataset "tank/nomad" does not exist`, "zfs create -p tank/nomad"}},
		{name: "nothing created yet", scan: Scan{Pools: onlinePool(), Sets: full[:1]},
			wantReason: [2]string{"not created yet", "not created yet"}},
		{name: "create failed", scan: Scan{Pools: onlinePool(), Sets: full[:2], CreateErrs: map[string]string{"tank/nomad/scratch/scratch-2": "out of space"}},
			wantReason: [2]string{"not created yet", "cannot create tank/nomad/scratch/scratch-2: out of space"}},
		{name: "held slot stays healthy, unmounted one does not", scan: Scan{Pools: onlinePool(), Sets: unmounted},
			wantHealth: [2]bool{true, false}, wantReason: [2]string{"", "not mounted"}},
		{name: "inherited owner is not ownership", scan: Scan{Pools: onlinePool(), Sets: inherited},
			wantHealth: [2]bool{true, false}, wantReason: [2]string{"", "not owned by nomad-device-zfs"}},
		// Offered: Reserve finishes the release first, and an unhealthy
		// instance can block a job's evaluation for good.
		{name: "releasing slot stays offered", scan: Scan{Pools: onlinePool(), Sets: releasing},
			wantHealth: [2]bool{true, true}},
		{name: "parent not mounted: nothing below it counts", scan: Scan{Pools: onlinePool(), Sets: withUnmounted(full, "tank/nomad")},
			wantReason: [2]string{`parent dataset "tank/nomad" is not mounted`, "zfs mount tank/nomad"}},
		{name: "slot mounted below an unmounted class dataset", scan: Scan{Pools: onlinePool(), Sets: withUnmounted(full, "tank/nomad/scratch")},
			wantReason: [2]string{"is mounted while its class dataset tank/nomad/scratch is not", "may be covered"}},
		{name: "class dataset not ours", scan: Scan{Pools: onlinePool(), Sets: []zfs.Dataset{fsRow("tank/nomad", nil), fsRow("tank/nomad/scratch", nil)}},
			wantReason: [2]string{`dataset "tank/nomad/scratch" exists but is not owned`, "not touching it"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := BuildView(testCfg, tc.scan, nil)
			if len(v.Classes) != 1 || len(v.Classes[0].Slots) != 2 {
				t.Fatalf("want 1 class with 2 slots (IDs come from config), got %+v", v.Classes)
			}
			for i, s := range v.Classes[0].Slots {
				if want := SlotID("scratch", i+1); s.ID != want {
					t.Errorf("slot %d ID %q, want %q", i, s.ID, want)
				}
				if s.Healthy != tc.wantHealth[i] {
					t.Errorf("%s healthy = %v, want %v (reason %q)", s.ID, s.Healthy, tc.wantHealth[i], s.Reason)
				}
				if !strings.Contains(s.Reason, tc.wantReason[i]) || (tc.wantReason[i] == "" && s.Reason != "") {
					t.Errorf("%s reason %q, want %q", s.ID, s.Reason, tc.wantReason[i])
				}
			}
		})
	}
}

// TestBuildViewKeepsLastGoodSet: a transient scan failure keeps the slots
// and their data, marked unhealthy, instead of dropping them.
func TestBuildViewKeepsLastGoodSet(t *testing.T) {
	good := BuildView(testCfg, Scan{Pools: onlinePool(), Sets: []zfs.Dataset{
		fsRow("tank/nomad", nil),
		ownedRow("tank/nomad/scratch", ""),
		ownedRow("tank/nomad/scratch/scratch-1", StateReady),
	}}, nil)
	failed := BuildView(testCfg, Scan{Pools: onlinePool(), ListErrs: map[string]error{"tank/nomad": errors.New("zfs list: signal: killed")}}, good)
	s := failed.Classes[0].Slots[0]
	if !s.Exists || s.Healthy || !strings.Contains(s.Reason, "zfs list failed") {
		t.Fatalf("got %+v", s)
	}
	if s.Dataset != "tank/nomad/scratch/scratch-1" || s.Info.Available != 1<<29 || s.State != StateReady {
		t.Errorf("last good data lost: %+v", s)
	}
}

// TestBuildViewDataAge: a view is as old as its data. A failed scan keeps
// the last good set, so its view is as old as that set, and a slot re-read
// between the two is newer than it (the Manager keeps such a re-read over
// the view's row). A scan that listed, or found the parent missing, is as
// new as the scan.
func TestBuildViewDataAge(t *testing.T) {
	t0, t1 := time.Unix(1000, 0), time.Unix(1060, 0)
	good := BuildView(testCfg, Scan{At: t0, Pools: onlinePool(), Sets: []zfs.Dataset{
		fsRow("tank/nomad", nil), ownedRow("tank/nomad/scratch", ""), ownedRow("tank/nomad/scratch/scratch-1", StateReady),
	}}, nil)
	cases := []struct {
		name string
		scan Scan
		prev *View
		want time.Time
	}{
		{name: "listed", scan: Scan{At: t1, Pools: onlinePool(), Sets: []zfs.Dataset{fsRow("tank/nomad", nil)}}, prev: good, want: t1},
		{name: "list failed: the last good set's age", scan: Scan{At: t1, Pools: onlinePool(), ListErrs: map[string]error{"tank/nomad": errors.New("zfs list: signal: killed")}}, prev: good, want: t0},
		{name: "list failed, no good set yet", scan: Scan{At: t1, Pools: onlinePool(), ListErrs: map[string]error{"tank/nomad": errors.New("zfs list: signal: killed")}}, want: t1},
		{name: "parent missing: nothing kept", scan: Scan{At: t1, Pools: onlinePool(), ListErrs: map[string]error{"tank/nomad": zfs.NewError("zfs", nil, "cannot open 'tank/nomad': dataset does not exist", 1)}}, prev: good, want: t1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := BuildView(testCfg, tc.scan, tc.prev).ScannedAt; !got.Equal(tc.want) {
				t.Errorf("ScannedAt %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPlanEnsure(t *testing.T) {
	now := time.Unix(1700000000, 0)
	spaceCfg := &Config{Parent: "tank/nomad", Classes: []Class{{Name: "db", Slots: 3, NeedBytes: 2 << 30}}}
	dbClass := ownedRow("tank/nomad/db", "")
	dbClass.Available = 5 << 30
	unmounted := ownedRow("tank/nomad/scratch/scratch-1", StateReady)
	unmounted.Mounted = false

	cases := []struct {
		name        string
		cfg         *Config
		scan        Scan
		want        []string // "kind dataset"
		wantBlocked []string
	}{
		{name: "fresh parent: class then slots", cfg: testCfg, scan: Scan{Pools: onlinePool(), Sets: []zfs.Dataset{fsRow("tank/nomad", nil)}},
			want: []string{"create class dataset tank/nomad/scratch", "create slot tank/nomad/scratch/scratch-1", "create slot tank/nomad/scratch/scratch-2"}},
		{name: "one missing slot", cfg: testCfg, scan: Scan{Pools: onlinePool(), Sets: []zfs.Dataset{
			fsRow("tank/nomad", nil), ownedRow("tank/nomad/scratch", ""), ownedRow("tank/nomad/scratch/scratch-2", StateReady)}},
			want: []string{"create slot tank/nomad/scratch/scratch-1"}},
		{name: "unmounted ready slot is mounted", cfg: testCfg, scan: Scan{Pools: onlinePool(), Sets: []zfs.Dataset{
			fsRow("tank/nomad", nil), ownedRow("tank/nomad/scratch", ""), unmounted, ownedRow("tank/nomad/scratch/scratch-2", StateHeld)}},
			want: []string{"mount slot tank/nomad/scratch/scratch-1"}},
		{name: "pool problem plans nothing", cfg: testCfg, scan: Scan{Pools: []zfs.Pool{{Name: "tank", Health: "DEGRADED"}}, Sets: []zfs.Dataset{fsRow("tank/nomad", nil)}}},
		{name: "parent missing plans nothing", cfg: testCfg, scan: Scan{Pools: onlinePool(), ListErrs: map[string]error{"tank/nomad": zfs.NewError("zfs", nil, "dataset does not exist", 1)}}},
		{name: "foreign class dataset is left alone", cfg: testCfg, scan: Scan{Pools: onlinePool(), Sets: []zfs.Dataset{fsRow("tank/nomad", nil), fsRow("tank/nomad/scratch", nil)}}},
		{name: "foreign slot is left alone", cfg: testCfg, scan: Scan{Pools: onlinePool(), Sets: []zfs.Dataset{
			fsRow("tank/nomad", nil), ownedRow("tank/nomad/scratch", ""), fsRow("tank/nomad/scratch/scratch-1", nil)}},
			want: []string{"create slot tank/nomad/scratch/scratch-2"}},
		{name: "after import -N: class first, then its slots", cfg: testCfg, scan: Scan{Pools: onlinePool(), Sets: withUnmounted([]zfs.Dataset{
			fsRow("tank/nomad", nil), ownedRow("tank/nomad/scratch", ""), ownedRow("tank/nomad/scratch/scratch-1", StateReady), ownedRow("tank/nomad/scratch/scratch-2", StateHeld)},
			"tank/nomad/scratch", "tank/nomad/scratch/scratch-1", "tank/nomad/scratch/scratch-2")},
			want: []string{"mount class dataset tank/nomad/scratch", "mount slot tank/nomad/scratch/scratch-1", "mount slot tank/nomad/scratch/scratch-2"}},
		{name: "parent unmounted plans nothing", cfg: testCfg, scan: Scan{Pools: onlinePool(), Sets: withUnmounted([]zfs.Dataset{
			fsRow("tank/nomad", nil), ownedRow("tank/nomad/scratch", ""), ownedRow("tank/nomad/scratch/scratch-1", StateReady)},
			"tank/nomad", "tank/nomad/scratch", "tank/nomad/scratch/scratch-1")}},
		{name: "space for two reserved slots of three", cfg: spaceCfg, scan: Scan{Pools: onlinePool(), Sets: []zfs.Dataset{fsRow("tank/nomad", nil), dbClass}},
			want:        []string{"create slot tank/nomad/db/db-1", "create slot tank/nomad/db/db-2"},
			wantBlocked: []string{"tank/nomad/db/db-3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := BuildView(tc.cfg, tc.scan, nil)
			acts, blocked := PlanEnsure(v, now)
			var got []string
			for _, a := range acts {
				got = append(got, a.Kind.String()+" "+a.Dataset)
				if (a.Kind == CreateClass || a.Kind == CreateSlot) && a.Ops[0].Props[PropOwner] != a.Dataset {
					t.Errorf("%s created without its ownership mark: %v", a.Dataset, a.Ops[0].Props)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			for _, ds := range tc.wantBlocked {
				if !strings.Contains(blocked[ds], "out of space") {
					t.Errorf("%s not blocked for space: %q", ds, blocked[ds])
				}
			}
			if len(blocked) != len(tc.wantBlocked) {
				t.Errorf("blocked %v, want %v", blocked, tc.wantBlocked)
			}
		})
	}
}

func TestNewSlotProps(t *testing.T) {
	c := Class{Name: "scratch", Properties: map[string]string{"quota": "1G", "compression": "lz4"}}
	got := NewSlotProps(c, "tank/nomad/scratch/scratch-1", 1, 0, time.Unix(1700000000, 0))
	want := map[string]string{
		"quota": "1G", "compression": "lz4",
		PropOwner: "tank/nomad/scratch/scratch-1", PropState: "ready", PropGeneration: "1", PropSince: "1700000000",
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, ok := c.Properties[PropOwner]; ok {
		t.Error("the class's properties map was modified")
	}
}

// TestSlotPathComesFromTheNaming: the path a task is given is the one the
// slot's name puts it at below the parent; a mountpoint or origin changed
// with zfs set (or a hand-made clone) makes the slot unhealthy and is never
// mounted or handed out.
func TestSlotPathComesFromTheNaming(t *testing.T) {
	slot := "tank/nomad/scratch/scratch-1"
	with := func(mod func(d *zfs.Dataset)) []zfs.Dataset {
		rows := []zfs.Dataset{fsRow("tank/nomad", nil), ownedRow("tank/nomad/scratch", ""), ownedRow(slot, StateReady)}
		mod(&rows[2])
		return rows
	}
	cases := []struct {
		name       string
		sets       []zfs.Dataset
		wantHealth bool
		wantReason string
		wantMount  bool
	}{
		{name: "inherited mountpoint", sets: with(func(*zfs.Dataset) {}), wantHealth: true},
		{name: "mountpoint set elsewhere", sets: with(func(d *zfs.Dataset) { d.Mountpoint = "/etc" }),
			wantReason: `mounted at "/etc", not at "/tank/nomad/scratch/scratch-1"`},
		{name: "mountpoint set elsewhere, unmounted, is not mounted", sets: with(func(d *zfs.Dataset) { d.Mountpoint, d.Mounted = "/etc", false }),
			wantReason: `its mountpoint is "/etc"`},
		{name: "legacy mountpoint", sets: with(func(d *zfs.Dataset) { d.Mountpoint, d.Mounted = "legacy", false }),
			wantReason: "zfs inherit mountpoint"},
		{name: "inherited, unmounted, is mounted", sets: with(func(d *zfs.Dataset) { d.Mounted = false }),
			wantReason: "not mounted", wantMount: true},
		{name: "clone of another slot's snapshot", sets: with(func(d *zfs.Dataset) { d.Origin = "tank/nomad/scratch/scratch-2@x" }),
			wantReason: "may hold another allocation's data"},
		{name: "clone of a golden image outside the parent", sets: with(func(d *zfs.Dataset) { d.Origin = "tank/golden@seed" }), wantHealth: true},
	}
	cfg := &Config{Parent: "tank/nomad", Classes: []Class{{Name: "scratch", Slots: 1}}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := BuildView(cfg, Scan{Pools: onlinePool(), Sets: tc.sets}, nil)
			s := v.Classes[0].Slots[0]
			if s.Healthy != tc.wantHealth || !strings.Contains(s.Reason, tc.wantReason) {
				t.Errorf("healthy %v reason %q; want %v, %q", s.Healthy, s.Reason, tc.wantHealth, tc.wantReason)
			}
			acts, _ := PlanEnsure(v, time.Unix(0, 0))
			mounts := false
			for _, a := range acts {
				mounts = mounts || a.Kind == MountSlot
			}
			if mounts != tc.wantMount {
				t.Errorf("plans a mount: %v, want %v", mounts, tc.wantMount)
			}
		})
	}
}

// TestStrangersBelowASlot: what lies below a slot is the plugin's only when
// it is one of its own snapshots; everything else is a stranger, and an
// inherited owner mark does not make a snapshot the plugin's.
func TestStrangersBelowASlot(t *testing.T) {
	slot := "tank/nomad/scratch/scratch-1"
	snap := func(name string) zfs.Dataset {
		return zfs.Dataset{Name: name, Type: "snapshot", User: zfs.UserPropsOf(map[string]string{PropOwner: slot})} // inherited
	}
	rows := []zfs.Dataset{fsRow("tank/nomad", nil), ownedRow("tank/nomad/scratch", ""), ownedRow(slot, StateReady),
		snap(slot + "@pristine"), snap(slot + "@mine"), fsRow(slot+"/child", map[string]string{PropOwner: slot}),
		snap(slot + "/child@x")}
	cfg := &Config{Parent: "tank/nomad", Classes: []Class{{Name: "scratch", Slots: 1}}}
	s := BuildView(cfg, Scan{Pools: onlinePool(), Sets: rows}, nil).Classes[0].Slots[0]
	want := []string{slot + "/child", slot + "/child@x", slot + "@mine"}
	if strings.Join(s.Strangers, " ") != strings.Join(want, " ") || !s.HasPristine || s.Healthy {
		t.Fatalf("strangers %v (want %v), pristine %v, healthy %v", s.Strangers, want, s.HasPristine, s.Healthy)
	}
	if err := CheckRelease(cfg, s); err == nil || !strings.Contains(err.Error(), slot+"/child") {
		t.Fatalf("CheckRelease: %v", err)
	}
}

// TestSlotByID: a built view finds a slot from its ID alone (<class>-<n>
// is Slots[n-1]) exactly where a search would, and nothing else.
func TestSlotByID(t *testing.T) {
	cfg := &Config{Parent: "tank/nomad", Classes: []Class{{Name: "a-b", Slots: 3}, {Name: "a", Slots: 12}}}
	v := BuildView(cfg, Scan{Pools: onlinePool(), Sets: []zfs.Dataset{fsRow("tank/nomad", nil)}}, nil)
	searched := &View{Classes: v.Classes}
	tests := []struct {
		id        string
		class, at int
		found     bool
	}{
		{id: "a-b-1", class: 0, at: 0, found: true},
		{id: "a-b-3", class: 0, at: 2, found: true},
		{id: "a-1", class: 1, at: 0, found: true},
		{id: "a-12", class: 1, at: 11, found: true},
		{id: "a-b-4"},
		{id: "a-13"},
		{id: "a-0"},
		{id: "a-01"},
		{id: "a-+1"},
		{id: "a--1"},
		{id: "a-b"},
		{id: "b-1"},
		{id: "a"},
		{id: ""},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			for name, view := range map[string]*View{"built": v, "searched": searched} {
				ci, si, ok := view.SlotIndex(tt.id)
				s, cv := view.Slot(tt.id)
				if ok != tt.found || (s != nil) != tt.found || (ok && (ci != tt.class || si != tt.at || s.ID != tt.id || cv != &view.Classes[ci])) {
					t.Errorf("%s: SlotIndex %d %d %v, Slot %v", name, ci, si, ok, s)
				}
			}
		})
	}
}

// TestReplicaBasesBelowAHeldSlot: a held slot's replica snapshots and
// bookmarks (a replica pull's bases on the holder) are the plugin's only
// when the plugin made them: an @replica-<n> with its own mark naming it
// (ReplicaSnapshotProps, set by the snapshot that takes it), a
// #replica-<n> bookmark of the slot. A snapshot named alike that has the
// slot's mark only by inheritance (a replication tool's), a bookmark of
// another name, or one of a dataset below the slot is a stranger, and
// keeps the slot from being released.
func TestReplicaBasesBelowAHeldSlot(t *testing.T) {
	slot := "tank/nomad/scratch/scratch-1"
	inherited := func(name string) zfs.Dataset {
		return zfs.Dataset{Name: name, Type: zfs.DatasetSnapshot, User: zfs.UserPropsOf(map[string]string{PropOwner: slot})}
	}
	marked := func(name string) zfs.Dataset {
		return zfs.Dataset{Name: name, Type: zfs.DatasetSnapshot, User: zfs.UserPropsOf(ReplicaSnapshotProps(name))}
	}
	otherMark := func(name, owner string) zfs.Dataset {
		return zfs.Dataset{Name: name, Type: zfs.DatasetSnapshot, User: zfs.UserPropsOf(map[string]string{PropOwner: owner})}
	}
	bookmark := func(name string) zfs.Dataset { return zfs.Dataset{Name: name, Type: zfs.DatasetBookmark, GUID: "7"} }
	tests := []struct {
		name                  string
		below                 []zfs.Dataset
		own, marks, strangers []string
		releasable, pristine  bool
	}{
		{name: "the plugin's replica snapshot and bookmarks",
			below: []zfs.Dataset{inherited(slot + "@pristine"), marked(slot + "@replica-3"), bookmark(slot + "#replica-2"), bookmark(slot + "#replica-3")},
			own:   []string{slot + "@pristine", slot + "@replica-3"}, marks: []string{slot + "#replica-2", slot + "#replica-3"},
			releasable: true, pristine: true},
		{name: "a stranger's @replica-1 without the mark: foreign",
			below:     []zfs.Dataset{marked(slot + "@replica-3"), inherited(slot + "@replica-1")},
			own:       []string{slot + "@replica-3"},
			strangers: []string{slot + "@replica-1"}},
		{name: "a mark naming another snapshot: foreign",
			below:     []zfs.Dataset{otherMark(slot+"@replica-4", slot+"@replica-3")},
			strangers: []string{slot + "@replica-4"}},
		{name: "not a replica number: foreign even with a mark naming it",
			below:     []zfs.Dataset{marked(slot + "@replica-03"), marked(slot + "@replica-0")},
			strangers: []string{slot + "@replica-0", slot + "@replica-03"}},
		{name: "someone's bookmark: foreign",
			below:     []zfs.Dataset{bookmark(slot + "#zrepl_20260101"), bookmark(slot + "#replica-x")},
			strangers: []string{slot + "#replica-x", slot + "#zrepl_20260101"}},
		{name: "a bookmark of a child dataset: foreign, with its dataset",
			below:     []zfs.Dataset{fsRow(slot+"/child", map[string]string{PropOwner: slot}), bookmark(slot + "/child#replica-1")},
			strangers: []string{slot + "/child", slot + "/child#replica-1"}},
	}
	cfg := &Config{Parent: "tank/nomad", Classes: []Class{{Name: "scratch", Slots: 1}}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows := append([]zfs.Dataset{fsRow("tank/nomad", nil), ownedRow("tank/nomad/scratch", ""), ownedRow(slot, StateHeld)}, tc.below...)
			v := BuildView(cfg, Scan{Pools: onlinePool(), Sets: rows}, nil)
			s := v.Classes[0].Slots[0]
			if strings.Join(s.OwnSnapshots, " ") != strings.Join(tc.own, " ") || strings.Join(s.OwnBookmarks, " ") != strings.Join(tc.marks, " ") ||
				strings.Join(s.Strangers, " ") != strings.Join(tc.strangers, " ") || s.HasPristine != tc.pristine {
				t.Errorf("own %v, bookmarks %v, strangers %v, pristine %v\nwant %v, %v, %v, %v",
					s.OwnSnapshots, s.OwnBookmarks, s.Strangers, s.HasPristine, tc.own, tc.marks, tc.strangers, tc.pristine)
			}
			if err := CheckRelease(cfg, s); (err == nil) != tc.releasable {
				t.Errorf("CheckRelease: %v, want releasable %v", err, tc.releasable)
			}
			if cv := v.Classes[0]; len(cv.Orphans)+len(cv.Parked)+len(cv.Retained) != 0 {
				t.Errorf("a bookmark or snapshot taken for data aside: %+v", cv)
			}
			// A slot re-read alone reads the same.
			if r := SlotFromListing(cfg, "scratch", slot, rows[2:], "/tank/nomad"); !slices.Equal(r.OwnBookmarks, s.OwnBookmarks) ||
				!slices.Equal(r.Strangers, s.Strangers) || !slices.Equal(r.OwnSnapshots, s.OwnSnapshots) {
				t.Errorf("re-read: own %v, bookmarks %v, strangers %v", r.OwnSnapshots, r.OwnBookmarks, r.Strangers)
			}
		})
	}
}
