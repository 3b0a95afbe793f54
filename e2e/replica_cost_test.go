//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// What replication costs the holder's node (issue 30, docs/node-loss.md
// "What it costs"), measured on the real cluster of the replica tests:
// A's slot on node 1, its replica pulled by node 2. A benchmark: it
// prints the "replica-cost ..." lines (make bench-replica) and asserts
// no timing; it fails when no increment comes, or when the bytes on the
// wire exceed costBound of the bytes changed.

var replicaCost = flag.Bool("ndz.replica-cost", false, "measure what replication costs the holder's node (make bench-replica); skipped without it")

// The data TestReplicaCost changes in A's slot (mounted in the guest, so
// the test writes it itself, a known number of bytes at a known time):
// random bytes, which no compression shrinks. The task of replicaService
// writes its line a second besides.
const (
	costBaseMiB = 64 // first: what a full re-send would carry again
	costStepMiB = 4  // each measured increment: one file rewritten whole
	costSteps   = 5
	costCutMiB  = 32 // the increment whose stream is cut by killing node 1's plugin
	costIdle    = 3  // windows with node 2 gone: the holder's CPU with no pull
)

// costSlack is what a window may carry beyond twice the bytes changed
// (costBound): the task's own writes (8-44 KB an increment on this
// cluster, docs/node-loss.md), the stream's records (a 312-byte header a
// 128 KiB record, object and free records) and the pulls with nothing
// else to carry.
const costSlack = 1 << 20

// costBound is the most a window may put on the wire for changed bytes:
// twice, so that a cut increment may be sent again whole from the
// bookmark after what came before the cut, and no more, so that a full
// re-send of the slot fails it: the base alone (64 MiB) is more than 2 x
// 4 MiB + 1 MiB, and the base with the cut increment (96 MiB and more)
// more than 2 x 32 MiB + 1 MiB.
func costBound(changed int64) float64 { return float64(2*changed + costSlack) }

// costSample is the counters at one moment.
type costSample struct {
	at       time.Time
	sent     float64 // node 1: nomad_device_zfs_transfer_sent_bytes_total{kind="replica"}
	received float64 // node 2: ..._received_bytes_total{kind="replica"}, 0 once node 2 is gone
	pid      int     // node 1's plugin
	cpu      float64 // its CPU seconds and its reaped children's (zfs)
	replica  int     // the newest @replica-<n> on node 2
}

// costWindow is what one change of the slot cost, from the change to the
// increment that holds it on node 2.
type costWindow struct {
	name     string
	changed  int64
	wire     float64 // node 1 sent
	received float64 // node 2 received
	pulls    int
	cpu      float64 // NaN: node 1's plugin was killed in the window
	took     time.Duration
}

// costMeter reads the counters of the cluster's two plugins.
type costMeter struct {
	t          *testing.T
	n1, n2     *clusterNode
	a          replicaRun
	replica    string // node 2's replica of A's slot
	url1, url2 string // "" once node 2 is gone
}

func (m *costMeter) sample() costSample {
	m.t.Helper()
	s := costSample{at: time.Now()}
	// Exactly one: Nomad may run a throw-away one for a moment.
	waitFor(m.t, 30*time.Second, "one plugin process on node 1", func() (bool, string) {
		pids := pluginPIDs(m.t, m.n1.Agent)
		if len(pids) == 1 {
			s.pid = pids[0]
		}
		return len(pids) == 1, fmt.Sprintf("plugin processes %v", pids)
	})
	self, children := cpuTimes(s.pid)
	s.cpu = self + children
	s.sent = m.counter(m.url1, "sent")
	if m.url2 != "" {
		s.received = m.counter(m.url2, "received")
		for k := range replicaSnapshots(m.t, m.replica) {
			s.replica = max(s.replica, k)
		}
	}
	return s
}

// counter is a plugin's nomad_device_zfs_transfer_<dir>_bytes_total of
// replicas.
func (m *costMeter) counter(url, dir string) float64 {
	m.t.Helper()
	name := "nomad_device_zfs_transfer_" + dir + "_bytes_total"
	s, err := scrape(url)
	if err != nil {
		m.t.Fatalf("scraping %s: %v", url, err)
	}
	v, ok := s.value(name, map[string]string{"kind": "replica"})
	if !ok {
		m.t.Fatalf("%s has no %s{kind=\"replica\"}:\n%s", url, name, s.lines("nomad_device_zfs_transfer_"))
	}
	return v
}

// change writes mib MiB of random bytes to file in A's slot, over what
// it held.
func (m *costMeter) change(file string, mib int) {
	m.t.Helper()
	f, err := os.Create(filepath.Join("/"+m.a.ds, file))
	if err != nil {
		m.t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for range mib {
		_, _ = rand.Read(buf)
		if _, err := f.Write(buf); err != nil {
			m.t.Fatalf("writing %s in %s: %v", file, m.a.ds, err)
		}
	}
	if err := f.Close(); err != nil {
		m.t.Fatal(err)
	}
}

// token is the partial receive into node 2's replica, if there is one,
// and how many bytes its resume token says it holds (as of the last
// transaction group synced: 0 early in a stream).
func (m *costMeter) token() (partial bool, bytes int64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tok, err := zc.ResumeToken(ctx, m.replica)
	if err != nil || tok == "" {
		return false, 0
	}
	rt, err := zc.DecodeResumeToken(ctx, tok)
	if err != nil {
		return true, 0
	}
	return true, int64(rt.Bytes)
}

// waitPulled waits until node 2 holds @replica-<k> or later with no
// partial receive, and samples then.
func (m *costMeter) waitPulled(k int, mib int) costSample {
	m.t.Helper()
	var s costSample
	waitFor(m.t, jobTimeout+time.Duration(mib)*time.Second, fmt.Sprintf("node 2 holding @replica-%d or later, whole", k), func() (bool, string) {
		s = m.sample()
		partial, n := m.token()
		return s.replica >= k && !partial, fmt.Sprintf("newest @replica-%d, partial receive %v (%d bytes)", s.replica, partial, n)
	})
	return s
}

// window changes file by mib MiB and waits for the increment that holds
// the change: the second pull after the write (the first may have begun
// before it ended).
func (m *costMeter) window(name, file string, mib int) costWindow {
	m.t.Helper()
	s0 := m.sample()
	m.change(file, mib)
	written := m.sample()
	m.t.Logf("%s: %d MiB written in %s; newest @replica-%d", name, mib, written.at.Sub(s0.at).Round(10*time.Millisecond), written.replica)
	s1 := m.waitPulled(written.replica+2, mib)
	w := costWindow{name: name, changed: int64(mib) << 20, wire: s1.sent - s0.sent, received: s1.received - s0.received,
		pulls: s1.replica - s0.replica, cpu: s1.cpu - s0.cpu, took: s1.at.Sub(s0.at)}
	if s1.pid != s0.pid {
		w.cpu = math.NaN()
	}
	costReport("%s", w)
	return w
}

// cut changes the slot by mib MiB, kills node 1's plugin (SIGKILL) once
// node 2's partial receive of that increment holds some of it, and waits
// for the increment that holds the change once Nomad has launched the
// plugin again. The window's wire bytes are node 2's (its plugin lives
// on): what came before the cut and after it. An increment that arrives
// whole before it can be cut is tried again, three times at most.
func (m *costMeter) cut(mib int) (costWindow, bool) {
	m.t.Helper()
	for attempt := 1; attempt <= 3; attempt++ {
		s0 := m.sample()
		m.change(fmt.Sprintf("cut-%d", attempt), mib)
		written := m.sample()
		var partial int64
		var whole bool
		waitFor(m.t, jobTimeout+time.Duration(mib)*time.Second, "node 2's pull of the cut increment under way", func() (bool, string) {
			var under bool
			if under, partial = m.token(); under {
				return true, ""
			}
			s := m.sample()
			under, _ = m.token()
			whole = s.replica >= written.replica+2 && !under
			return whole, fmt.Sprintf("newest @replica-%d, no partial receive", s.replica)
		})
		if whole {
			m.t.Logf("attempt %d: the %d MiB increment arrived whole before it could be cut", attempt, mib)
			continue
		}
		before := m.sample()
		listening := len(listeningRE.FindAllString(m.n1.Logs(), -1))
		killed := time.Now()
		killProcess(m.t, before.pid)
		m.t.Logf("killed node 1's plugin (pid %d) with node 2's partial receive of the %d MiB increment under way (its token: %d bytes synced); node 2 had received %.0f bytes", before.pid, mib, partial, before.received-s0.received)
		waitFor(m.t, 60*time.Second, "node 1's plugin launched again, its endpoint listening", func() (bool, string) {
			now := pluginPIDs(m.t, m.n1.Agent)
			n := len(listeningRE.FindAllString(m.n1.Logs(), -1))
			return len(now) == 1 && now[0] != before.pid && n > listening, fmt.Sprintf("plugin processes %v", now)
		})
		m.url1 = "http://" + metricsAddr(m.t, m.n1.Agent) + "/metrics"
		relaunched := time.Since(killed)
		// The cut increment is before.replica+1, whole once the next is.
		s1 := m.waitPulled(before.replica+2, mib)
		w := costWindow{name: "cut", changed: int64(mib) << 20, wire: (before.sent - s0.sent) + s1.sent, received: s1.received - s0.received,
			pulls: s1.replica - s0.replica, cpu: math.NaN(), took: s1.at.Sub(s0.at)}
		detail := []string{fmt.Sprintf("cut with %.0f bytes received by node 2 (its token: %d synced); node 1's plugin running again %s after the kill",
			before.received-s0.received, partial, relaunched.Round(100*time.Millisecond))}
		detail = append(detail, m.linesSince(m.n2, killed, m.a.alloc.ID)...)
		detail = append(detail, m.linesSince(m.n1, killed, m.a.alloc.ID)...)
		costReport("%s", w)
		for _, l := range detail {
			costReport("cut-log %s", l)
		}
		return w, true
	}
	m.t.Errorf("the %d MiB increment arrived whole three times before it could be cut: the guest is too fast for %d MiB", mib, mib)
	return costWindow{}, false
}

// linesSince are node n's log lines since at holding every one of subs,
// the first 40.
func (m *costMeter) linesSince(n *clusterNode, at time.Time, subs ...string) []string {
	var out []string
	for _, l := range logLines(n.Logs(), "", "", subs...) {
		if ts, ok := lineTime(l); ok && !ts.Before(at.Add(-time.Second)) && len(out) < 40 {
			out = append(out, n.Pool.Name+": "+l)
		}
	}
	return out
}

// idle changes the slot by mib MiB and waits d, with no node pulling:
// the holder's CPU without replication. It scrapes node 1 every
// pollInterval meanwhile, as waitPulled does: the endpoint's own CPU is
// in both.
func (m *costMeter) idle(name, file string, mib int, d time.Duration) costWindow {
	m.t.Helper()
	s0 := m.sample()
	m.change(file, mib)
	s1 := s0
	for time.Since(s0.at) < d {
		time.Sleep(pollInterval)
		s1 = m.sample()
	}
	w := costWindow{name: name, changed: int64(mib) << 20, wire: s1.sent - s0.sent, cpu: s1.cpu - s0.cpu, took: s1.at.Sub(s0.at)}
	if s1.pid != s0.pid {
		w.cpu = math.NaN()
	}
	costReport("%s", w)
	return w
}

// costReport prints a "replica-cost ..." line (bench/replica-cost.sh
// keeps them) as it is measured: a run that fails later keeps what it
// measured.
func costReport(format string, args ...any) {
	fmt.Printf("replica-cost "+format+"\n", args...)
}

func (w costWindow) ratio() float64 { return w.wire / float64(w.changed) }

func (w costWindow) String() string {
	return fmt.Sprintf("window=%s changed_mib=%d wire_mib=%.3f received_mib=%.3f ratio=%.4f pulls=%d took_s=%.1f cpu_s=%.2f",
		w.name, w.changed>>20, w.wire/(1<<20), w.received/(1<<20), w.ratio(), w.pulls, w.took.Seconds(), w.cpu)
}

// guestSpeed times `zfs version` five times and reports it: the guest's
// speed, as the pacer reads it (probeIdle on an idle guest).
func guestSpeed(when string) {
	var all []time.Duration
	for range 5 {
		all = append(all, probe(context.Background()).Round(time.Millisecond))
	}
	sorted := slices.Clone(all)
	slices.Sort(sorted)
	costReport("guest %s at=%s zfs_version_median_ms=%d zfs_version=%v idle_guest_ms=%d slowness=%.1f", when,
		time.Now().UTC().Format("15:04:05Z"), sorted[len(sorted)/2].Milliseconds(), all, probeIdle.Milliseconds(), pace.Slowness())
}

// TestReplicaCost measures what A's replica costs node 1, the holder:
// the bytes its transfer server sends for each increment against the
// bytes changed, its plugin's CPU (with its zfs children) for each, the
// same with no node pulling, and an increment whose stream is cut by
// killing node 1's plugin: what reaches node 2 for it, resumed from its
// token or sent again from the bookmark, is measured against the
// increment and the whole slot.
func TestReplicaCost(t *testing.T) {
	if !*replicaCost {
		t.Skip("replication's cost is measured only with -ndz.replica-cost (make bench-replica)")
	}
	began := time.Now()
	guestSpeed("before")
	c := replicaClusterWith(t, "e2ecost", metricsBlock)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	const job = "cost"
	a := runReplicated(t, c, job)
	m := &costMeter{t: t, n1: n1, n2: n2, a: a, replica: replicaOf(n2, a),
		url1: "http://" + metricsAddr(t, n1.Agent) + "/metrics", url2: "http://" + metricsAddr(t, n2.Agent) + "/metrics"}

	windows := []costWindow{m.window("base", "base", costBaseMiB)}
	for i := 1; i <= costSteps; i++ {
		windows = append(windows, m.window(fmt.Sprintf("step%d", i), "step", costStepMiB))
	}
	cut, cutOK := m.cut(costCutMiB)
	if cutOK {
		windows = append(windows, cut)
	}
	slot := mustLookup(t, a.ds)

	// Node 2 gone: nobody pulls. The same change, each window as long as
	// a step's was on average.
	var stepTook time.Duration
	for _, w := range windows[1 : 1+costSteps] {
		stepTook += w.took
	}
	stepTook /= costSteps
	n2.Kill(t)
	m.url2 = ""
	var idle []costWindow
	for i := 1; i <= costIdle; i++ {
		idle = append(idle, m.idle(fmt.Sprintf("idle%d", i), "step", costStepMiB, stepTook))
	}
	guestSpeed("after")

	// The summary.
	var idleCPU, idleTook float64
	for _, w := range idle {
		idleCPU += w.cpu
		idleTook += w.took.Seconds()
	}
	idleRate := idleCPU / idleTook // CPU seconds a second, nobody pulling
	var stepCPU, stepExtra, stepWire float64
	for _, w := range windows[1 : 1+costSteps] {
		stepCPU += w.cpu
		stepExtra += w.cpu - idleRate*w.took.Seconds()
		stepWire += w.wire
	}
	base := windows[0]
	baseExtra := base.cpu - idleRate*base.took.Seconds()
	mib := func(b float64) float64 { return b / (1 << 20) }
	costReport("summary steps=%d step_mib=%d wire_per_step_mib=%.3f ratio=%.4f cpu_per_step_s=%.2f idle_cpu_per_step_s=%.2f extra_cpu_per_step_s=%.2f extra_cpu_s_per_mib=%.3f",
		costSteps, costStepMiB, mib(stepWire)/costSteps, stepWire/float64(costSteps*costStepMiB<<20),
		stepCPU/costSteps, idleRate*stepTook.Seconds(), stepExtra/costSteps, stepExtra/mib(stepWire))
	costReport("summary base_mib=%d wire_mib=%.3f extra_cpu_s=%.2f extra_cpu_s_per_mib=%.3f",
		costBaseMiB, mib(base.wire), baseExtra, baseExtra/mib(base.wire))
	if cutOK {
		costReport("summary cut_mib=%d received_mib=%.3f ratio=%.4f slot_referenced_mib=%.1f (what a full re-send would carry)",
			costCutMiB, mib(cut.received), cut.received/float64(cut.changed), mib(float64(slot.Referenced)))
	}
	costReport("summary bound=wire<=2*changed+%d took=%s", costSlack, time.Since(began).Round(time.Second))

	for _, w := range windows {
		got := max(w.wire, w.received)
		if got > costBound(w.changed) {
			t.Errorf("%s: %.0f bytes on the wire for %d changed, more than the bound %.0f: a re-send?", w.name, got, w.changed, costBound(w.changed))
		}
		if w.received < float64(w.changed) {
			t.Errorf("%s: %.0f bytes received for %d changed: the change did not reach node 2?", w.name, w.received, w.changed)
		}
	}
	for _, w := range idle {
		if w.wire != 0 {
			t.Errorf("%s: %.0f bytes sent with no node pulling", w.name, w.wire)
		}
	}
}
