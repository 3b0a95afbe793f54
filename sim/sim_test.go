package sim

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

var (
	flagSeed      = flag.Uint64("sim.seed", 0, "replay this one schedule (its seed), with its timeline and logs")
	flagSchedules = flag.Int("sim.schedules", 0, "schedules to run (default: $SIM_SCHEDULES, else 2000; 150 with -short or -race)")
	flagEvents    = flag.Int("sim.events", 60, "events per schedule")
	flagFirst     = flag.Uint64("sim.first", 1, "seed of the first schedule")
	flagShrink    = flag.Int("sim.shrink", 300, "replays spent shrinking a failing schedule")
	flagVerbose   = flag.Bool("sim.log", false, "with -sim.seed: print the plugin's logs too")
	flagKeep      = flag.String("sim.keep", "", "with -sim.seed: replay only these events (a shrunk schedule), e.g. 3,7,12")
)

func keepList() []int {
	var out []int
	for _, f := range strings.Split(*flagKeep, ",") {
		var i int
		if _, err := fmt.Sscan(f, &i); err == nil {
			out = append(out, i)
		}
	}
	return out
}

func schedules(t *testing.T) int {
	if *flagSchedules > 0 {
		return *flagSchedules
	}
	if s := os.Getenv("SIM_SCHEDULES"); s != "" {
		var n int
		if _, err := fmt.Sscan(s, &n); err == nil && n > 0 {
			return n
		}
	}
	if testing.Short() || raceEnabled {
		return 150
	}
	return 2000
}

// TestSimulation runs seeded schedules of the whole system and fails on
// the first violated invariant, with its seed, a shrunk timeline and the
// flag that replays it.
func TestSimulation(t *testing.T) {
	dir := workDir(t)
	if *flagSeed != 0 {
		var logger hclog.Logger
		if *flagVerbose {
			logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: os.Stderr})
		}
		events := Generate(*flagSeed, *flagEvents, nil)
		if *flagKeep != "" {
			events = Keep(events, keepList())
		}
		r := Play(*flagSeed, events, Options{Dir: dir, Logger: logger})
		t.Logf("timeline of seed %d:\n%s", r.Seed, strings.Join(r.Timeline, "\n"))
		report(t, r, Options{Dir: dir})
		return
	}
	n := schedules(t)
	start := time.Now()
	results := playSeeds(n, func(_ int, seed uint64) Result {
		return Play(seed, Generate(seed, *flagEvents, nil), Options{Dir: dir})
	})
	ran, events, violations, first := tally(results)
	if first != nil {
		report(t, *first, Options{Dir: dir})
	}
	// The summary line `make sim` ends with.
	summary := fmt.Sprintf("%d schedules, %d events, %d violations (%s)", ran, events, violations, time.Since(start).Round(time.Second))
	t.Log(summary)
	fmt.Println(summary)
}

// playSeeds plays n schedules, seeds -sim.first on, on every core (they
// are independent worlds), and hands out no more once one has failed;
// results[i] is nil for a schedule not played. A result keeps its
// timeline only if it failed: the report replays it.
func playSeeds(n int, play func(i int, seed uint64) Result) []*Result {
	results := make([]*Result, n)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				r := play(i, *flagFirst+uint64(i))
				r.Timeline = nil
				results[i] = &r
				if r.Failed() {
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	return results
}

// tally counts the schedules played, their events and the failed ones, and
// returns the failed one with the lowest seed.
func tally(results []*Result) (ran, events, violations int, first *Result) {
	for _, r := range results {
		if r == nil {
			continue
		}
		ran++
		events += len(r.Events)
		if r.Failed() {
			violations++
			if first == nil {
				first = r
			}
		}
	}
	return ran, events, violations, first
}

// report fails t with r's shrunk schedule and the command that replays it.
// -sim.keep indexes the schedule Generate makes of -sim.events events, so
// the replay names that count, not r's: a replay of a shrunk schedule has
// only the kept events, and -sim.events set to their number generates a
// shorter schedule that the kept indexes miss (it then passes, having
// replayed nothing).
func report(t *testing.T, r Result, o Options) {
	t.Helper()
	if !r.Failed() {
		return
	}
	s := Shrink(r, o, *flagShrink)
	var evs, keep []string
	for _, e := range s.Events {
		evs = append(evs, e.String())
		keep = append(keep, fmt.Sprint(e.Index))
	}
	t.Errorf("seed %d: %s\nshrunk from %d to %d events: %s\n"+
		"replay: go test ./sim -run TestSimulation -sim.seed=%d -sim.events=%d -sim.keep=%s\n"+
		"timeline of the shrunk schedule (%s):\n%s",
		r.Seed, r.Violations[0], len(r.Events), len(s.Events), strings.Join(evs, ", "),
		r.Seed, *flagEvents, strings.Join(keep, ","), s.Violations[0], strings.Join(s.Timeline, "\n"))
}

// workDir is where the worlds keep their files: a RAM file system when
// there is one (/dev/shm), as a world creates and removes thousands of
// files and a disk makes that the run's bottleneck.
func workDir(t *testing.T) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "ndz-sim-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}
