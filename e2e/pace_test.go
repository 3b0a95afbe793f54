//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"time"
)

// The suite's timeouts (deviceTimeout, jobTimeout, releaseTimeout, the
// agents' start) are what the waits take on an idle guest, with margin.
// On a busy host everything is slower by about the same factor (the guest
// is emulated: a second VM or a compile on the same cores takes its
// instructions away), so every wait stretches its timeout by the guest's
// measured slowness (nomadtest.Deadline): the time a zfs command takes
// now, against what it takes on an idle guest.
const (
	// probeIdle is `zfs version` in the idle guest (TCG, 2 vCPUs, on the
	// 2-core machine the timeouts were tuned on): 60-90 ms.
	probeIdle = 90 * time.Millisecond
	// probeEvery paces the probe: a zfs command is about 0.1 s of guest
	// CPU, so every 5 s it costs the suite about 2% of a vCPU.
	probeEvery = 5 * time.Second
	// maxSlowness bounds the stretch: beyond it the guest is not slow but
	// stuck, and a wait had better fail with what it saw.
	maxSlowness = 8
)

// pace is the guest's slowness, measured by TestMain's probe loop.
var pace = &pacer{}

// pacer keeps the latest probe times.
type pacer struct {
	mu      sync.Mutex
	recent  []time.Duration // the last 3 probes, oldest first
	worst   float64
	samples int
}

// probe times one `zfs version`: process start, libzfs loading and an
// ioctl, the same work as every zfs command the plugin and the tests run.
func probe(ctx context.Context) time.Duration {
	t0 := time.Now()
	_ = exec.CommandContext(ctx, "zfs", "version").Run() // the time is the result, not the output
	return time.Since(t0)
}

func (p *pacer) add(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recent = append(p.recent, d)
	if len(p.recent) > 3 {
		p.recent = p.recent[1:]
	}
	p.samples++
	p.worst = max(p.worst, p.slownessLocked())
}

// Slowness is how many times slower than an idle guest this one runs now:
// the median of the last three probes against probeIdle, at least 1, at
// most maxSlowness. The median keeps one probe that waited for a page of
// the binary or a scheduler tick from stretching every wait.
func (p *pacer) Slowness() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.slownessLocked()
}

func (p *pacer) slownessLocked() float64 {
	if len(p.recent) == 0 {
		return 1
	}
	s := slices.Clone(p.recent)
	slices.Sort(s)
	f := float64(s[len(s)/2]) / float64(probeIdle)
	return min(max(f, 1), maxSlowness)
}

// Run probes every probeEvery until ctx ends.
func (p *pacer) Run(ctx context.Context) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if d := probe(ctx); ctx.Err() == nil {
				p.add(d)
			}
		}
	}
}

// start takes three probes at once, so the first waits already know the
// guest's speed, and describes them.
func (p *pacer) start(ctx context.Context) string {
	var ds []string
	for i := 0; i < 3; i++ {
		d := probe(ctx)
		p.add(d)
		ds = append(ds, d.Round(time.Millisecond).String())
	}
	return fmt.Sprintf("zfs version took %v (idle guest: %s or less): timeouts x%.1f", ds, probeIdle, p.Slowness())
}

// summary says how slow the guest got over the run.
func (p *pacer) summary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("%d probes, slowest median x%.1f (timeouts stretched up to that)", p.samples, p.worst)
}

// paced is d, a period the plugin measures on its own clock (retain,
// sticky_wait) that a test's checks must fit in, stretched by the guest's
// slowness now and rounded up to a second: on a guest four times slower,
// the checks that take 10 s idle take 40 s, and a period that would
// expire meanwhile would fail the test for a reason of its machine.
func paced(d time.Duration) time.Duration {
	s := time.Duration(float64(d) * pace.Slowness())
	return (s + time.Second - 1).Truncate(time.Second)
}

// leftBefore reports whether at least margin, stretched by the guest's
// slowness now, is left before expires: a check of data that expires
// then runs only if it cannot race the expiry.
func leftBefore(expires time.Time, margin time.Duration) bool {
	return time.Until(expires) > time.Duration(float64(margin)*pace.Slowness())
}
