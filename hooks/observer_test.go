package hooks

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"

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
	m := NewManager(cfg, zfs.NewClient(pr), fa, hclog.NewNullLogger())
	obs := &recordingObserver{}
	m.SetObserver(obs)
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
