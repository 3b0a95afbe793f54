//go:build e2e

package e2e

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	dto "github.com/prometheus/client_model/go"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The scale measurements of docs/performance.md, on real OpenZFS in the VM
// with a real agent. They take minutes (1000 slots are 1000 zfs creates at
// 80-180 ms each in the emulated guest), so they run only when asked:
//
//	scripts/e2e.sh -test.run Scale -ndz.scale 1,1000 -ndz.releases 20
//
// (bench/vm.sh does that). Each prints "scale ..." lines, the figures.
var (
	scaleSlots    = flag.String("ndz.scale", "", "comma-separated slot counts to measure at (empty: skip the scale tests)")
	scaleReleases = flag.Int("ndz.releases", 20, "releases timed per slot count")
	scalePolicy   = flag.String("ndz.policy", "destroy", "the measured class's release policy (destroy, rollback, snapshot)")
	scaleVariants = flag.String("ndz.variants", "", "name=plugin-binary,...: builds to compare in one run; each slot count's agent restarts with each in turn (empty: the staged plugin)")
	scaleTurns    = flag.Int("ndz.turns", 2, "with -ndz.variants: turns each build takes per slot count, its releases split among them")
)

// variant is one build of the plugin TestScale measures.
type variant struct{ name, binary string }

// scaleBuilds are the builds to measure: -ndz.variants, or the staged
// plugin alone.
func scaleBuilds(t *testing.T) []variant {
	if *scaleVariants == "" {
		return []variant{{"", filepath.Join(pluginDir, pluginName)}}
	}
	var out []variant
	for _, f := range strings.Split(*scaleVariants, ",") {
		name, bin, ok := strings.Cut(f, "=")
		if !ok || name == "" || bin == "" {
			t.Fatalf("-ndz.variants: %q is not name=binary", f)
		}
		out = append(out, variant{name, bin})
	}
	return out
}

// install puts build v's binary in dir as the plugin, replacing any.
func install(t *testing.T, v variant, dir string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+pluginName)
	_ = os.Remove(tmp)
	if err := copyExecutable(v.binary, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, pluginName)); err != nil {
		t.Fatal(err)
	}
}

func scaleCounts(t *testing.T) []int {
	if *scaleSlots == "" {
		t.Skip("scale measurements run only with -ndz.scale (bench/vm.sh)")
	}
	var out []int
	for _, f := range strings.Split(*scaleSlots, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("-ndz.scale: %q is not a number", f)
		}
		out = append(out, n)
	}
	return out
}

// TestScale: for each slot count, an agent with one class of that many
// slots on a fresh pool. It times the first healthy instance and all of
// them in the node record from the plugin's start (its "managing slots" log
// line); the plugin's scan of the tree against a bare `zfs list -o name` of
// the same tree; and releases: from each batch task's end to the plugin's
// "slot ready" log line for its slot, and as the plugin's release latency
// histogram shows them (its metrics endpoint is on). With -ndz.variants
// the agent restarts with each build in turn, -ndz.turns times, on the same
// slots, and each build's releases are reported apart: two builds compared
// in one guest, interleaved, see the same machine.
func TestScale(t *testing.T) {
	builds := scaleBuilds(t)
	turns := 1
	if len(builds) > 1 {
		turns = max(*scaleTurns, 1)
	}
	counts := scaleCounts(t)
	// p50s are each build's release medians by slot count, for the
	// target: the same at every count (the last line).
	p50s := make([]map[int]time.Duration, len(builds))
	for i := range p50s {
		p50s[i] = map[int]time.Duration{}
	}
	defer func() {
		for i, b := range builds {
			lo, hi := p50s[i][counts[0]], p50s[i][counts[len(counts)-1]]
			if len(counts) > 1 && lo > 0 && hi > 0 {
				fmt.Printf("scale%s release_p50_ratio slots=%d/%d %.2f\n", variantField(b.name), counts[len(counts)-1], counts[0], hi.Seconds()/lo.Seconds())
			}
		}
	}()
	for _, n := range counts {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			p := newPool(t, fmt.Sprintf("e2escale%d", n), false)
			dir := t.TempDir()
			install(t, builds[0], dir)
			cfg := agentConfig(p, 15*time.Second, metricsBlock+fmt.Sprintf("class \"s\" {\n  slots = %d\n  release { policy = %q }\n}", n, *scalePolicy), "")
			cfg.PluginDir = dir
			a := startAgentConfig(t, cfg)
			var started time.Time
			waitFor(t, deviceTimeout, "the plugin's start in the agent log", func() (bool, string) {
				started = logTime(t, a.Logs(), "managing slots", "")
				return !started.IsZero(), "no \"managing slots\" line yet"
			})
			first := waitHealthy(t, a, 1, started)
			all := waitHealthy(t, a, n, started)
			fmt.Printf("scale slots=%d first_device_s=%.1f all_ready_s=%.1f\n", n, first.Seconds(), all.Seconds())

			plugin, bare, bareTypes := scanTimes(t, p.Parent, 5)
			fmt.Printf("scale slots=%d scan_ms=%.0f bare_ms=%.0f ratio=%.2f bare_snapshots_ms=%.0f ratio_same_types=%.2f\n",
				n, ms(plugin), ms(bare), plugin.Seconds()/bare.Seconds(), ms(bareTypes), plugin.Seconds()/bareTypes.Seconds())

			results := make([]releaseRun, len(builds))
			for turn := 0; turn < turns; turn++ {
				for i, b := range builds {
					if turn > 0 || i > 0 {
						install(t, b, dir)
						restarted := time.Now()
						a.Restart(t)
						waitFor(t, deviceTimeout, "the restarted plugin's start", func() (bool, string) {
							return !firstLogTime(t, a.Logs(), "managing slots", restarted).IsZero(), "no new \"managing slots\" line"
						})
						waitHealthy(t, a, n, restarted)
						// Let the restart's burst (the agent's and the
						// plugin's first scan) pass: the releases are timed
						// on a settled node, as the first build's are.
						time.Sleep(20 * time.Second)
					}
					count := *scaleReleases / turns
					if turn < *scaleReleases%turns {
						count++
					}
					for r := 0; r < count; r++ {
						results[i].add(timeRelease(t, a, fmt.Sprintf("scale-%d-%s-%d-%d", n, b.name, turn, r)))
					}
					// The same releases as the plugin's histogram shows them
					// (one plugin process a turn: their buckets add up).
					s, err := scrape("http://" + metricsAddr(t, a) + "/metrics")
					if err != nil {
						t.Fatal(err)
					}
					results[i].merge(s.histogram("nomad_device_zfs_release_latency_seconds", map[string]string{"class": "s"}))
				}
			}
			for i, b := range builds {
				p50s[i][n] = results[i].print(n, b.name)
			}
		})
	}
}

// releaseRun collects one build's releases at one slot count.
type releaseRun struct {
	lat, seen, acted, news []time.Duration
	// hist is the plugin's release latency histogram, its turns merged.
	hist *dto.Histogram
}

func (r *releaseRun) add(t releaseTimes) {
	r.lat, r.seen, r.acted, r.news = append(r.lat, t.total), append(r.seen, t.started), append(r.acted, t.total-t.started), append(r.news, t.news)
}

// merge adds histogram h's counts to r's.
func (r *releaseRun) merge(h *dto.Histogram) {
	if h == nil {
		return
	}
	if r.hist == nil {
		r.hist = h
		return
	}
	count, sum := r.hist.GetSampleCount()+h.GetSampleCount(), r.hist.GetSampleSum()+h.GetSampleSum()
	r.hist.SampleCount, r.hist.SampleSum = &count, &sum
	for i, b := range r.hist.Bucket {
		if i < len(h.Bucket) && h.Bucket[i].GetUpperBound() == b.GetUpperBound() {
			c := b.GetCumulativeCount() + h.Bucket[i].GetCumulativeCount()
			b.CumulativeCount = &c
		}
	}
}

// print writes the "scale ..." lines of r.
func (r *releaseRun) print(n int, build string) (p50 time.Duration) {
	for _, d := range [][]time.Duration{r.lat, r.seen, r.acted, r.news} {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	}
	head := fmt.Sprintf("scale slots=%d%s", n, variantField(build))
	fmt.Printf("%s policy=%s releases=%d release_p50_ms=%.0f release_p99_ms=%.0f release_max_ms=%.0f\n",
		head, *scalePolicy, len(r.lat), ms(pct(r.lat, 50)), ms(pct(r.lat, 99)), ms(r.lat[len(r.lat)-1]))
	fmt.Printf("%s to_release_start_p50_ms=%.0f p99_ms=%.0f release_itself_p50_ms=%.0f p99_ms=%.0f\n",
		head, ms(pct(r.seen, 50)), ms(pct(r.seen, 99)), ms(pct(r.acted, 50)), ms(pct(r.acted, 99)))
	fmt.Printf("%s to_watcher_news_p50_ms=%.0f p99_ms=%.0f\n", head, ms(pct(r.news, 50)), ms(pct(r.news, 99)))
	fmt.Printf("%s histogram_releases=%d histogram_release_p50_s=%.2f histogram_release_p99_s=%.2f\n",
		head, r.hist.GetSampleCount(), quantile(0.5, r.hist), quantile(0.99, r.hist))
	return pct(r.lat, 50)
}

// variantField is " variant=<name>" for a named build, "" otherwise.
func variantField(build string) string {
	if build == "" {
		return ""
	}
	return " variant=" + build
}

// waitHealthy polls the node record every 100 ms until n instances are
// healthy and says how long after since that was.
func waitHealthy(t *testing.T, a *nomadtest.Agent, n int, since time.Time) time.Duration {
	t.Helper()
	deadline := time.Now().Add(30 * time.Minute)
	for time.Now().Before(deadline) {
		node, _, err := a.Client().Nodes().Info(a.NodeID(), nil)
		if err == nil && node.NodeResources != nil {
			healthy := 0
			for _, g := range node.NodeResources.Devices {
				for _, in := range g.Instances {
					if in.Healthy {
						healthy++
					}
				}
			}
			if healthy >= n {
				return time.Since(since)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%d healthy instances not seen within 30 minutes", n)
	return 0
}

// scanTimes runs the plugin's scan of parent (its own argv), a bare
// listing of names, and a bare listing of the same types the scan lists
// (filesystems and snapshots: zfs looks for each filesystem's snapshots),
// rounds times each, in turn, and returns the medians.
func scanTimes(t *testing.T, parent string, rounds int) (plugin, bare, bareTypes time.Duration) {
	t.Helper()
	args, err := zfs.ListArgs(parent, model.UserProps)
	if err != nil {
		t.Fatal(err)
	}
	cmds := [][]string{args,
		{"list", "-H", "-p", "-r", "-o", "name", parent},
		{"list", "-H", "-p", "-r", "-t", "filesystem,snapshot", "-o", "name", parent}}
	times := make([][]time.Duration, len(cmds))
	for i := 0; i < rounds; i++ {
		for c, argv := range cmds {
			start := time.Now()
			run(t, "zfs", argv...)
			times[c] = append(times[c], time.Since(start))
		}
	}
	for _, ts := range times {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	}
	return times[0][rounds/2], times[1][rounds/2], times[2][rounds/2]
}

// releaseTimes are one release's figures, from its holder's task's end.
type releaseTimes struct {
	// total: to the plugin's "slot ready" line for the slot (slightly more
	// than to the moment the server counts the slot free).
	total time.Duration
	// started: to the "releasing slot" line: Nomad's report of the end, the
	// watcher's query and the slot's re-read. The rest is the release's own
	// zfs commands.
	started time.Duration
	// news: to the watcher's first "allocations changed" line since the
	// end, the part of started that is Nomad's (the client's report, the
	// servers' answer); zero when there is no such line before started.
	news time.Duration
}

// timeRelease runs a batch job that exits at once and times the release of
// the slot it held.
func timeRelease(t *testing.T, a *nomadtest.Agent, job string) releaseTimes {
	t.Helper()
	alloc := runBatch(t, a, batchJob(job, "raw_exec", "s", "true", noRetry), api.AllocClientStatusComplete)
	slot := deviceID(t, alloc)
	// The task's end on the client: the allocation's ModifyTime moves with
	// every later update of the record, so it may come after the release.
	ts := alloc.TaskStates["t"]
	if ts == nil || ts.FinishedAt.IsZero() {
		t.Fatalf("allocation %s has no finished task", alloc.ID)
	}
	ended := ts.FinishedAt
	var readyAt time.Time
	waitFor(t, releaseTimeout, "slot "+slot+" ready after "+job, func() (bool, string) {
		readyAt = logTime(t, a.Logs(), "slot ready", "slot="+slot+" ")
		return !readyAt.Before(ended), "no slot ready line since the allocation ended"
	})
	startAt := logTime(t, a.Logs(), "releasing slot", "slot="+slot+" ")
	if startAt.Before(ended) || startAt.After(readyAt) {
		t.Fatalf("%s: releasing slot at %s, not between the end %s and slot ready %s", job, startAt, ended, readyAt)
	}
	r := releaseTimes{total: readyAt.Sub(ended), started: startAt.Sub(ended)}
	if news := firstLogTime(t, a.Logs(), "allocations changed", ended); !news.IsZero() && !news.After(startAt) {
		r.news = news.Sub(ended)
	}
	return r
}

// firstLogTime is the timestamp of the first agent log line containing msg
// at or after since, the zero time if there is none.
func firstLogTime(t *testing.T, logs, msg string, since time.Time) time.Time {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, msg) {
			continue
		}
		if at, ok := lineTime(l); ok && !at.Before(since) {
			return at
		}
	}
	return time.Time{}
}

// logTime is the timestamp of the last agent log line containing msg and
// (if set) also, the zero time if there is none.
func logTime(t *testing.T, logs, msg, also string) time.Time {
	t.Helper()
	var last time.Time
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, msg) || (also != "" && !strings.Contains(l, also)) {
			continue
		}
		if at, ok := lineTime(l); ok {
			last = at
		}
	}
	return last
}

// lineTime is the timestamp an agent log line starts with.
func lineTime(l string) (time.Time, bool) {
	ts, _, _ := strings.Cut(strings.TrimSpace(l), " ") // the agent's lines are indented
	at, err := time.Parse("2006-01-02T15:04:05.000Z0700", ts)
	return at, err == nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(min(i, len(sorted))-1, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
