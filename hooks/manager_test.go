package hooks

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// newFakeZFS returns a fake pool "tank" with the operator's parent
// tank/nomad, and a client over it.
func newFakeZFS(t *testing.T) (*zfstest.Fake, *zfs.Client) {
	t.Helper()
	f := zfstest.New(zfstest.Options{MountRoot: t.TempDir()})
	if err := f.AddPool("tank", 1<<30); err != nil {
		t.Fatal(err)
	}
	c := zfs.NewClient(f)
	if err := c.Create(context.Background(), "tank/nomad", nil); err != nil {
		t.Fatal(err)
	}
	f.ResetCalls()
	return f, c
}

// mustManager is NewManager(c), failing tb on an error.
func mustManager(tb testing.TB, c Config) *Manager {
	tb.Helper()
	m, err := NewManager(c)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func newTestManager(t *testing.T, z ZFS, classes ...model.Class) *Manager {
	t.Helper()
	cfg := &model.Config{Parent: "tank/nomad", ScanInterval: time.Hour, Classes: classes}
	return mustManager(t, Config{Slots: cfg, ZFS: z})
}

func zfsCalls(f *zfstest.Fake, verb string) int {
	n := 0
	for _, c := range f.Calls() {
		if len(c) > 1 && c[0] == "zfs" && c[1] == verb {
			n++
		}
	}
	return n
}

func TestManagerCreatesReadySlots(t *testing.T) {
	f, c := newFakeZFS(t)
	m := newTestManager(t, c, model.Class{Name: "scratch", Slots: 3, MountPath: "/data", Properties: map[string]string{"quota": "1G", "compression": "lz4"}})
	m.Reconcile(t.Context())

	v, _ := m.View()
	if v.Problem != "" {
		t.Fatalf("problem: %s", v.Problem)
	}
	for _, s := range v.Classes[0].Slots {
		if !s.Healthy || s.State != model.StateReady || s.Generation != 1 || !s.Mounted {
			t.Errorf("%s: %+v", s.ID, s)
		}
		if s.Info.Quota != 1<<30 || s.Info.Compression != "lz4" {
			t.Errorf("%s: class properties not applied: quota %d compression %q", s.ID, s.Info.Quota, s.Info.Compression)
		}
		if _, err := os.Stat(s.Mountpoint); err != nil {
			t.Errorf("%s: mountpoint: %v", s.ID, err)
		}
	}
	// One scan is one zfs list: two scans here (before and after creating).
	if n := zfsCalls(f, "list"); n != 2 {
		t.Errorf("%d zfs list processes, want 2", n)
	}

	// A second pass has nothing to do: one list, no create.
	f.ResetCalls()
	m.Reconcile(t.Context())
	if n, cr := zfsCalls(f, "list"), zfsCalls(f, "create"); n != 1 || cr != 0 {
		t.Errorf("idle pass ran %d lists and %d creates, want 1 and 0", n, cr)
	}
}

func TestManagerReplacesMissingSlot(t *testing.T) {
	f, c := newFakeZFS(t)
	m := newTestManager(t, c, model.Class{Name: "scratch", Slots: 2, MountPath: "/data"})
	m.Reconcile(t.Context())
	if err := c.Destroy(t.Context(), "tank/nomad/scratch/scratch-2", zfs.DestroyOptions{}); err != nil {
		t.Fatal(err)
	}
	f.ResetCalls()
	m.Reconcile(t.Context())
	v, _ := m.View()
	if s := v.Classes[0].Slots[1]; !s.Healthy || !s.Exists {
		t.Fatalf("scratch-2 not replaced: %+v", s)
	}
	if n := zfsCalls(f, "create"); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
}

// TestManagerNeverTouchesForeignDatasets: nothing without the ownership
// mark, and nothing outside the parent, is created, changed or destroyed.
func TestManagerNeverTouchesForeignDatasets(t *testing.T) {
	f, c := newFakeZFS(t)
	ctx := t.Context()
	for _, ds := range []string{"tank/other", "tank/nomad/scratch", "tank/nomad/scratch/scratch-1"} {
		if err := c.Create(ctx, ds, map[string]string{"com.example:mine": "yes"}); err != nil {
			t.Fatal(err)
		}
	}
	f.ResetCalls()
	m := newTestManager(t, c, model.Class{Name: "scratch", Slots: 2, MountPath: "/data"}, model.Class{Name: "fast", Slots: 1, MountPath: "/fast"})
	m.Reconcile(ctx)

	for _, call := range f.Calls() {
		if call[0] == "zfs" && call[1] != "list" {
			if strings.Contains(strings.Join(call, " "), "scratch") || strings.Contains(strings.Join(call, " "), "tank/other") {
				t.Errorf("touched a foreign dataset: %q", call)
			}
		}
	}
	v, _ := m.View()
	scratch, fast := v.Classes[0], v.Classes[1]
	if scratch.Class.Name != "scratch" || !strings.Contains(scratch.Slots[0].Reason, "not owned") {
		t.Errorf("foreign class dataset not reported: %+v", scratch.Slots[0])
	}
	if !fast.Slots[0].Healthy {
		t.Errorf("the other class should still work: %+v", fast.Slots[0])
	}
}

func TestManagerPoolProblems(t *testing.T) {
	cases := []struct {
		name       string
		setup      func(t *testing.T, f *zfstest.Fake, c *zfs.Client)
		wantReason string
	}{
		{"pool missing", func(t *testing.T, f *zfstest.Fake, c *zfs.Client) { must(t, f.RemovePool("tank")) }, `pool "tank" not found`},
		{"pool degraded", func(t *testing.T, f *zfstest.Fake, c *zfs.Client) { must(t, f.SetPoolHealth("tank", "DEGRADED")) }, `pool "tank" is DEGRADED`},
		{"pool suspended", func(t *testing.T, f *zfstest.Fake, c *zfs.Client) { must(t, f.SetPoolHealth("tank", "SUSPENDED")) }, "SUSPENDED"},
		{"parent missing", func(t *testing.T, f *zfstest.Fake, c *zfs.Client) {
			must(t, c.Destroy(t.Context(), "tank/nomad", zfs.DestroyOptions{}))
		}, `parent dataset "tank/nomad" does not exist`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFakeZFS(t)
			tc.setup(t, f, c)
			f.ResetCalls()
			m := newTestManager(t, c, model.Class{Name: "scratch", Slots: 2, MountPath: "/data"})
			m.Reconcile(t.Context())
			v, _ := m.View()
			for _, s := range v.Classes[0].Slots {
				if s.Healthy || !strings.Contains(s.Reason, tc.wantReason) {
					t.Errorf("%s: healthy=%v reason %q, want %q", s.ID, s.Healthy, s.Reason, tc.wantReason)
				}
			}
			if n := zfsCalls(f, "create"); n != 0 {
				t.Errorf("%d creates while the pool has a problem", n)
			}
		})
	}
}

// TestManagerTransientFailureKeepsSlots: a zfs list that fails (not "does
// not exist") keeps the last good set, unhealthy, and recovers.
func TestManagerTransientFailureKeepsSlots(t *testing.T) {
	f, c := newFakeZFS(t)
	m := newTestManager(t, c, model.Class{Name: "scratch", Slots: 1, MountPath: "/data"})
	m.Reconcile(t.Context())
	f.Inject(zfstest.Fault{Cmd: "zfs", ArgsContain: []string{"list"}, Stderr: "internal error: Input/output error", ExitCode: 1, Times: 1})
	m.Reconcile(t.Context())
	v, _ := m.View()
	s := v.Classes[0].Slots[0]
	if s.Healthy || !s.Exists || !strings.Contains(s.Reason, "Input/output error") {
		t.Fatalf("got %+v", s)
	}
	m.Reconcile(t.Context())
	if v, _ = m.View(); !v.Classes[0].Slots[0].Healthy {
		t.Fatalf("did not recover: %+v", v.Classes[0].Slots[0])
	}
}

func TestManagerCreateFailureIsAReason(t *testing.T) {
	f, c := newFakeZFS(t)
	f.Inject(zfstest.Fault{Cmd: "zfs", ArgsContain: []string{"create", "tank/nomad/scratch/scratch-2"}, Stderr: "cannot create 'tank/nomad/scratch/scratch-2': out of space", ExitCode: 1, Times: 1})
	m := newTestManager(t, c, model.Class{Name: "scratch", Slots: 2, MountPath: "/data"})
	m.Reconcile(t.Context())
	v, _ := m.View()
	if s := v.Classes[0].Slots[1]; s.Healthy || !strings.Contains(s.Reason, "pool out of space") {
		t.Fatalf("got %+v", s)
	}
	if s := v.Classes[0].Slots[0]; !s.Healthy {
		t.Fatalf("scratch-1 should be fine: %+v", s)
	}
	m.Reconcile(t.Context()) // the fault was once: now it is created
	if v, _ = m.View(); !v.Classes[0].Slots[1].Healthy {
		t.Fatalf("not created on retry: %+v", v.Classes[0].Slots[1])
	}
}

func TestManagerReserve(t *testing.T) {
	f, c := newFakeZFS(t)
	m := newTestManager(t, c, model.Class{Name: "scratch", Slots: 2, MountPath: "/data"})

	// Before the first scan Reserve waits, bounded.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.Reserve(ctx, []string{"scratch-1"}); !errors.Is(err, ErrNotReady) {
		t.Fatalf("before any scan: got %v", err)
	}

	m.Reconcile(t.Context())
	f.ResetCalls()
	grants, err := m.Reserve(t.Context(), []string{"scratch-2", "scratch-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(grants) != 2 || grants[0].Slot.ID != "scratch-2" || grants[1].Slot.Dataset != "tank/nomad/scratch/scratch-1" {
		t.Fatalf("grants %+v", grants)
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Errorf("Reserve of ready slots ran zfs: %q", calls)
	}

	// A restart gets the same dataset, its data untouched.
	marker := filepath.Join(grants[1].Slot.Mountpoint, "data")
	must(t, os.WriteFile(marker, []byte("keep"), 0o644))
	again, err := m.Reserve(t.Context(), []string{"scratch-1"})
	if err != nil || again[0].Slot.Mountpoint != grants[1].Slot.Mountpoint {
		t.Fatalf("restart: %v %+v", err, again)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "keep" {
		t.Fatalf("data changed across a restart: %q %v", b, err)
	}

	cases := []struct {
		name string
		ids  []string
		want error
	}{
		{"unknown ID", []string{"scratch-9"}, ErrUnknownSlot},
		{"other plugin's ID", []string{"GPU-1234"}, ErrUnknownSlot},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Reserve(t.Context(), tc.ids)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.ids[0]) {
				t.Fatalf("got %v, want %v naming %s", err, tc.want, tc.ids[0])
			}
		})
	}

	must(t, f.SetPoolHealth("tank", "DEGRADED"))
	m.Reconcile(t.Context())
	if _, err := m.Reserve(t.Context(), []string{"scratch-1"}); !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "DEGRADED") {
		t.Fatalf("degraded pool: got %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestPassWaits(t *testing.T) {
	const s = time.Second
	cases := []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"a quick scan keeps the interval", scanWait(15*s, 200*time.Millisecond), 15 * s},
		{"a scan of a tenth of the interval still keeps it", scanWait(15*s, 1500*time.Millisecond), 15 * s},
		{"a slow scan keeps scans to a tenth of the time", scanWait(15*s, 6*s), 54 * s},
		{"a stalled scan puts the next off by ten intervals at most", scanWait(15*s, 2*time.Minute), 150 * s},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %s, want %s", tc.got, tc.want)
			}
		})
	}
}
