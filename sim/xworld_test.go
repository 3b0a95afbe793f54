package sim

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

var (
	flagXEvents   = flag.Int("sim.xevents", 80, "events per schedule of the two-node world")
	flagXReplicas = flag.Bool("sim.replicas", false, "play only the seeds whose world has three nodes keeping replicas")
)

// TestTwoNodes runs seeded schedules of two nodes whose sticky data
// follows its allocation from one to the other, with transfers cut,
// senders killed, plugins that cannot reach each other, lies, hostile and
// stalling senders and forged requests, full pools, parked data held busy
// and crashes, and fails on the first violation of X1-X10
// (docs/lifecycle.md) with its seed, a shrunk timeline and the flags that
// replay it. SIM_SCHEDULES (or
// -sim.schedules) sets how many; -sim.first the first seed; -sim.seed
// replays one.
func TestTwoNodes(t *testing.T) {
	dir := workDir(t)
	if *flagSeed != 0 {
		var logger hclog.Logger
		if *flagVerbose {
			logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: os.Stderr})
		}
		events := GenerateX(*flagSeed, *flagXEvents)
		if *flagKeep != "" {
			events = Keep(events, keepList())
		}
		r, _ := PlayX(*flagSeed, events, Options{Dir: dir, Logger: logger})
		t.Logf("timeline of seed %d:\n%s", r.Seed, strings.Join(r.Timeline, "\n"))
		reportX(t, r, Options{Dir: dir})
		return
	}
	n := xSchedules(t)
	start := time.Now()
	counts := make([]XCounts, n)
	seeds := xSeeds(n)
	results := playSeeds(n, func(i int, _ uint64) Result {
		seed := seeds[i]
		r, c := PlayX(seed, GenerateX(seed, *flagXEvents), Options{Dir: dir})
		counts[i] = c
		return r
	})
	ran, events, violations, first := tally(results)
	var total XCounts
	for i, r := range results {
		if r != nil {
			total.add(counts[i])
		}
	}
	if first != nil {
		reportX(t, *first, Options{Dir: dir})
	}
	summary := fmt.Sprintf("%d two-node schedules, %d events, %d violations (%s)\n  %s", ran, events, violations,
		time.Since(start).Round(time.Second), total)
	t.Log(summary)
	fmt.Println(summary)
}

// xSchedules is -sim.schedules, else $SIM_SCHEDULES, else 100 (30 with
// -short or -race): a two-node schedule costs about five one-node ones,
// and `go test ./sim` runs both worlds.
// xSeeds are the n seeds played from -sim.first: each in turn, or with
// -sim.replicas only those whose world keeps replicas (a third of them),
// so that a seed replays alone as it ran.
func xSeeds(n int) []uint64 {
	seeds := make([]uint64, 0, n)
	for seed := *flagFirst; len(seeds) < n; seed++ {
		if !*flagXReplicas || replicaWorld(seed) {
			seeds = append(seeds, seed)
		}
	}
	return seeds
}

func xSchedules(t *testing.T) int {
	if *flagSchedules > 0 || os.Getenv("SIM_SCHEDULES") != "" {
		return schedules(t)
	}
	if testing.Short() || raceEnabled {
		return 30
	}
	return 100
}

func reportX(t *testing.T, r Result, o Options) {
	t.Helper()
	if !r.Failed() {
		return
	}
	s := shrinkWith(r, *flagShrink, func(events []Event) Result {
		res, _ := PlayX(r.Seed, events, Options{Dir: o.Dir})
		return res
	})
	var evs, keep []string
	for _, e := range s.Events {
		evs = append(evs, fmt.Sprintf("[%d] +%s %s", e.Index, e.Dt, XKind(e.Kind)))
		keep = append(keep, fmt.Sprint(e.Index))
	}
	// The events kept are indices into the whole schedule GenerateX
	// draws, of -sim.xevents events (not r's, which a replay with
	// -sim.keep has already cut).
	t.Errorf("seed %d: %s\nshrunk from %d to %d events: %s\n"+
		"replay: go test ./sim -run TestTwoNodes -sim.seed=%d -sim.xevents=%d -sim.keep=%s\n"+
		"timeline of the shrunk schedule (%s):\n%s",
		r.Seed, r.Violations[0], len(r.Events), len(s.Events), strings.Join(evs, ", "),
		r.Seed, *flagXEvents, strings.Join(keep, ","), s.Violations[0], strings.Join(s.Timeline, "\n"))
}
