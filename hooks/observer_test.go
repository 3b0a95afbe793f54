package hooks

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// priorityRunner records each command with whether its context was
// marked zfs.Background.
type priorityRunner struct {
	zfs.Runner
	mu   sync.Mutex
	runs []string // "bg zfs list ..." or "fg zfs destroy ..."
}

func (p *priorityRunner) Run(ctx context.Context, cmd string, args ...string) ([]byte, error) {
	mark := "fg"
	if zfs.IsBackground(ctx) {
		mark = "bg"
	}
	p.mu.Lock()
	p.runs = append(p.runs, mark+" "+cmd+" "+strings.Join(args, " "))
	p.mu.Unlock()
	return p.Runner.Run(ctx, cmd, args...)
}

func (p *priorityRunner) seen(prefix string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.ContainsFunc(p.runs, func(r string) bool { return strings.HasPrefix(r, prefix) })
}

// recordingObserver records what the Manager reports.
type recordingObserver struct {
	mu       sync.Mutex
	releases []ReleaseEvent
	scans    []ScanEvent
}

func (o *recordingObserver) ReleaseDone(ev ReleaseEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.releases = append(o.releases, ev)
}

func (o *recordingObserver) ScanDone(ev ScanEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.scans = append(o.scans, ev)
}

// TestPeriodicScanInTheBackground: Run's periodic scan (its zpool and zfs
// list) runs marked zfs.Background, so that a release's processes win the
// CPU over it; the release's own commands are not marked. The Observer
// hears the scans and the release, with its policy and times.
func TestPeriodicScanInTheBackground(t *testing.T) {
	f, _ := newFakeZFS(t)
	pr := &priorityRunner{Runner: f}
	fa := &fakeAllocs{gone: map[string]bool{}, forbid: map[string]bool{}, running: map[string]bool{}}
	cfg := &model.Config{Parent: "tank/nomad", ScanInterval: time.Second,
		Classes: []model.Class{{Name: "scratch", Slots: 1, MountPath: "/data"}}}
	obs := &recordingObserver{}
	m := mustManager(t, Config{Slots: cfg, ZFS: zfs.NewClient(pr), Allocs: fa, Observer: obs})
	runManager(t, m)
	waitUntil(t, 30*time.Second, "a periodic scan", func() bool {
		return pr.seen("bg zfs list -H -p -r -t filesystem,snapshot") && pr.seen("bg zpool list")
	})

	fa.set(alloc("A", 10, "running", "run", "scratch-1"))
	m.OnAllocs(fa.snap())
	waitUntil(t, 30*time.Second, "the holder recorded", func() bool {
		s, _ := m.current("scratch-1")
		return s != nil && s.State == model.StateHeld
	})
	ended := alloc("A", 10, "complete", "run", "scratch-1")
	ended.FinishedAt = time.Now()
	fa.set(ended)
	m.OnAllocs(fa.snap())
	waitUntil(t, 30*time.Second, "the release", func() bool { return pr.seen("fg zfs destroy tank/nomad/scratch/scratch-1") })
	if pr.seen("bg zfs destroy") || pr.seen("bg zfs create") || pr.seen("bg zfs set") {
		t.Errorf("a lifecycle command ran in the background: %q", pr.runs)
	}

	waitUntil(t, 30*time.Second, "the Observer to hear the release", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return len(obs.releases) == 1
	})
	obs.mu.Lock()
	defer obs.mu.Unlock()
	ev := obs.releases[0]
	if ev.Slot.ID != "scratch-1" || ev.Holder.ID != "A" || ev.Outcome != model.OutcomeComplete ||
		ev.Policy != string(model.PolicyDestroy) || ev.Err != nil || ev.Done.Before(ev.Started) || !ev.Holder.FinishedAt.Equal(ended.FinishedAt) {
		t.Errorf("release heard as %+v", ev)
	}
	if len(obs.scans) == 0 || obs.scans[0].Pool != "tank" || obs.scans[0].Err != nil {
		t.Errorf("scans heard as %+v", obs.scans)
	}
}

// starvingRunner times out the commands run in the background whose
// command line starts with one of starve, as a host too busy to give a
// nice-19 process the CPU does; fails fails them in the foreground too.
type starvingRunner struct {
	priorityRunner
	starve []string
	fails  bool
}

func (s *starvingRunner) Run(ctx context.Context, cmd string, args ...string) ([]byte, error) {
	line := cmd + " " + strings.Join(args, " ")
	for _, p := range s.starve {
		if strings.HasPrefix(line, p) && (zfs.IsBackground(ctx) || s.fails) {
			s.priorityRunner.mu.Lock()
			s.priorityRunner.runs = append(s.priorityRunner.runs, "timed out "+line)
			s.priorityRunner.mu.Unlock()
			e := zfs.NewError(cmd, args, "", -1)
			e.Kind, e.Cause = zfs.ErrTimeout, context.DeadlineExceeded
			return nil, e
		}
	}
	return s.priorityRunner.Run(ctx, cmd, args...)
}

// TestStarvedScanReadIsReadAgain: a read of the periodic scan that times
// out at the lowest priority is run again at once at the normal priority,
// and its slots stay healthy; a read that fails at the normal priority too
// is the pool's problem, and its slots are unhealthy.
func TestStarvedScanReadIsReadAgain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		starve  string
		fails   bool
		problem string // in the slot's reason; "" healthy
	}{
		{name: "zpool list starved", starve: "zpool list"},
		{name: "zfs list starved", starve: "zfs list -H -p -r"},
		{name: "zpool list times out in the foreground too", starve: "zpool list", fails: true, problem: "zpool list failed"},
		{name: "zfs list times out in the foreground too", starve: "zfs list -H -p -r", fails: true, problem: "zfs list failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := newFakeZFS(t)
			cfg := &model.Config{Parent: "tank/nomad", ScanInterval: time.Hour,
				Classes: []model.Class{{Name: "scratch", Slots: 1, MountPath: "/data"}}}
			m := mustManager(t, Config{Slots: cfg, ZFS: zfs.NewClient(f)})
			m.Reconcile(t.Context())
			sr := &starvingRunner{priorityRunner: priorityRunner{Runner: f}, starve: []string{tc.starve}, fails: tc.fails}
			m.zfs = zfs.NewClient(sr)

			m.reconcileScanned(t.Context(), m.scan(zfs.Background(t.Context()), nil))
			if !sr.seen("timed out " + tc.starve) {
				t.Fatalf("nothing timed out: %q", sr.runs)
			}
			s, _ := m.current("scratch-1")
			switch {
			case tc.problem == "" && !s.Healthy:
				t.Errorf("after a starved read: unhealthy: %s", s.Reason)
			case tc.problem == "" && !sr.seen("fg "+tc.starve):
				t.Errorf("the starved read was not run again in the foreground: %q", sr.runs)
			case tc.problem != "" && (s.Healthy || !strings.Contains(s.Reason, tc.problem)):
				t.Errorf("after a read that timed out in the foreground too: healthy %v, reason %q; want %q", s.Healthy, s.Reason, tc.problem)
			}
		})
	}
}
