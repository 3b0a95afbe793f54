package hooks

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// failingRescan is the fake ZFS, except that once armed, the pass's
// listing of the parent after its changes (its rescan) fails. during runs
// at the pass's first change (what else the node does meanwhile).
type failingRescan struct {
	zfs.Runner
	armed  bool
	scans  int
	during func()
}

func (f *failingRescan) Run(ctx context.Context, cmd string, args ...string) ([]byte, error) {
	if f.armed && f.during != nil && cmd == "zfs" && slices.Contains(args, "create") {
		during := f.during
		f.during = nil
		during()
	}
	if f.armed && cmd == "zfs" && slices.Contains(args, "list") && args[len(args)-1] == "tank/nomad" {
		if f.scans++; f.scans == 2 {
			f.armed = false
			return nil, zfs.NewError(cmd, args, "cannot open 'tank/nomad': pool I/O is currently suspended", 1)
		}
	}
	return f.Runner.Run(ctx, cmd, args...)
}

// TestFailedScanKeepsNewerRereads: a scan whose listing fails keeps the
// last good set (model.BuildView), which is only as new as the view it
// came from. A slot that a release or a Reserve re-read since is newer:
// the failed scan's view shows the re-read, never the older row, both as
// published and as Reserve reads it. Otherwise it would show a released
// slot still releasing for its ended holder (and a Reserve would release
// it again, over whoever got it since), or a slot just recorded for a
// Reserve's caller still ready, until the next good scan.
func TestFailedScanKeepsNewerRereads(t *testing.T) {
	cases := []struct {
		name string
		// setup runs before the pass; during, while its rescan lists.
		setup, during func(t *testing.T, m *Manager, fa *fakeAllocs)
		wantState     model.State
		wantHolder    string
		wantGen       int
	}{
		{
			name: "the pass's own release",
			setup: func(t *testing.T, m *Manager, fa *fakeAllocs) {
				fa.set(alloc("A", 10, "complete", "run", "scratch-1"))
				m.storeSnapshot(fa.snap())
			},
			wantState: model.StateReady, wantGen: 2,
		},
		{
			name: "a Reserve during the pass",
			setup: func(t *testing.T, m *Manager, fa *fakeAllocs) {
				fa.set(alloc("A", 10, "complete", "run", "scratch-1"))
				m.storeSnapshot(fa.snap())
				m.Settle(t.Context()) // released: ready, generation 2
			},
			during: func(t *testing.T, m *Manager, fa *fakeAllocs) {
				fa.set(alloc("A", 10, "complete", "run", "scratch-1"), alloc("B", 20, "pending", "run", "scratch-1"))
				if _, err := m.Reserve(t.Context(), []string{"scratch-1"}); err != nil {
					t.Errorf("Reserve during the pass: %v", err)
				}
			},
			wantState: model.StateHeld, wantHolder: "B", wantGen: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := newFakeZFS(t)
			runner := &failingRescan{Runner: f}
			fa := &fakeAllocs{gone: map[string]bool{}, forbid: map[string]bool{}, running: map[string]bool{}}
			cfg := &model.Config{Parent: "tank/nomad", ScanInterval: time.Hour,
				Classes: []model.Class{{Name: "scratch", Slots: 2, MountPath: "/data"}}}
			m := mustManager(t, Config{Slots: cfg, ZFS: zfs.NewClient(runner), Allocs: fa})
			m.Reconcile(t.Context())
			fa.set(alloc("A", 10, "running", "run", "scratch-1"))
			m.OnAllocs(fa.snap())
			m.Reconcile(t.Context())
			tc.setup(t, m, fa)
			// Something for the pass to change, so that it scans again.
			must(t, zfs.NewClient(f).Destroy(t.Context(), "tank/nomad/scratch/scratch-2", zfs.DestroyOptions{}))
			if tc.during != nil {
				runner.during = func() { tc.during(t, m, fa) }
			}
			runner.armed = true
			m.Reconcile(t.Context())

			v, _ := m.View()
			if v.Problem == "" || runner.armed {
				t.Fatal("the rescan did not fail: the test tests nothing")
			}
			published, _ := v.Slot("scratch-1")
			read, _ := m.current("scratch-1")
			for _, got := range []struct {
				from string
				s    *model.Slot
			}{{"the published view", published}, {"Reserve's read", read}} {
				if got.s.State != tc.wantState || got.s.Holder != tc.wantHolder || got.s.Generation != tc.wantGen {
					t.Errorf("%s after a failed scan: scratch-1 %s, holder %q, generation %d; want %s, holder %q, generation %d (as re-read before the scan)",
						got.from, got.s.State, got.s.Holder, got.s.Generation, tc.wantState, tc.wantHolder, tc.wantGen)
				}
			}
		})
	}
}
