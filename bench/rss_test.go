//go:build bench

package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/devicemanager"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/testrig"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

func TestMain(m *testing.M) {
	zfstest.ImpersonateIfCalled()
	code := m.Run()
	testrig.Cleanup()
	os.Exit(code)
}

// TestPluginMemory hosts the plugin binary as a Nomad client does, over
// slots that already exist (the fake zfs, installed as executables), takes
// its fingerprint and streams its Stats at the client's 1 s interval, and
// reads the plugin process's resident set twice: 20 s after all instances
// are healthy (VmRSS, and the peak so far, VmHWM), and at steady state,
// 150 s after (Go collects at least every two minutes; until a collection
// after the start-up burst, the heap keeps that burst's size). With each
// reading goes the plugin's own CPU time (user + system, not its zfs
// children's): until all are healthy (cpu_start_s), over the next 20 s,
// and over the 130 s to the steady reading (periodic scans), which is
// where a tighter garbage collector would show. One line per slot count:
//
//	rss slots=10000 rss_mib=... hwm_mib=... anon_mib=... file_mib=... cpu_start_s=... cpu_20s_s=...
//	    steady_rss_mib=... steady_anon_mib=... steady_file_mib=... cpu_130s_s=... all_healthy_ms=...
//
// The metrics endpoint is on and scraped every 15 s (a common Prometheus
// scrape_interval), each scrape read whole: metrics_scrape_kib is the
// last one's size, metrics_scrape_ms its time. NDZ_BENCH_METRICS=0 turns
// the endpoint off; NDZ_BENCH_HELD=N creates the first N slots held by an
// allocation (each then has its own series, as on a busy node).
//
// NDZ_BENCH_STEADY=0 skips the steady-state reading; NDZ_BENCH_RSSTRACE=path
// writes the resident set every second to path.<pid>. In a bench build
// (GOFLAGS=-tags=bench), NDZ_BENCH_HEAPPROFILE=path makes the plugin write
// its heap profile and memory statistics every 10 s to path.<seconds>
// (cmd/nomad-device-zfs/heapprofile_bench.go); its figures are then not
// the shipped binary's.
func TestPluginMemory(t *testing.T) {
	for _, n := range slotCounts(t, []int{10, 1000, 10000}) {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			pluginDir := testrig.PluginDir(t, testrig.BinaryName)
			f, c := testrig.FakeHost(t, 1<<40, true)
			cfg := slotConfig(n)
			createSlots(t, cfg, c, envInt(t, "NDZ_BENCH_HELD", 0))
			testrig.UseExecutables(t, f)

			agentFile := filepath.Join(t.TempDir(), "agent.hcl")
			var classes strings.Builder
			for _, cl := range cfg.Classes {
				fmt.Fprintf(&classes, "    class %q {\n      slots = %d\n    }\n", cl.Name, cl.Slots)
			}
			metricsURL := ""
			if os.Getenv("NDZ_BENCH_METRICS") != "0" {
				addr := freeAddr(t)
				metricsURL = "http://" + addr + "/metrics"
				fmt.Fprintf(&classes, "    metrics {\n      address = %q\n    }\n", addr)
			}
			hcl := fmt.Sprintf("plugin %q {\n  config {\n    parent = %q\n%s  }\n}\n", testrig.BinaryName, testrig.Parent, classes.String())
			if err := os.WriteFile(agentFile, []byte(hcl), 0o644); err != nil {
				t.Fatal(err)
			}
			af, err := devicemanager.ParseAgentFile(agentFile)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			h, err := devicemanager.Launch(&devicemanager.Config{PluginDir: pluginDir, Plugins: af.Plugins, Name: testrig.BinaryName})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
			defer cancel()
			healthyAt := waitAllHealthy(t, ctx, h, n)
			first := healthyAt.Sub(start)
			cpuStart, _ := cpuSeconds(t, h.Pid())

			stats, err := h.Device.Stats(ctx, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			trace := rssTrace(t, h.Pid(), healthyAt)
			var scrapeKiB, scrapeMS float64
			scrapeNow := func() {
				if metricsURL != "" {
					scrapeKiB, scrapeMS = scrapeMetrics(t, metricsURL)
				}
			}
			scrapeNow()
			drain := func(d time.Duration) {
				deadline := time.After(d)
				tick := time.NewTicker(time.Second)
				defer tick.Stop()
				scrapes := time.NewTicker(15 * time.Second)
				defer scrapes.Stop()
				for {
					select {
					case <-stats:
					case <-tick.C:
						trace()
					case <-scrapes.C:
						scrapeNow()
					case <-deadline:
						return
					}
				}
			}
			drain(20 * time.Second)
			m := memory(t, h.Pid())
			cpu20, _ := cpuSeconds(t, h.Pid())
			line := fmt.Sprintf("rss slots=%d rss_mib=%.1f hwm_mib=%.1f anon_mib=%.1f file_mib=%.1f cpu_start_s=%.2f cpu_20s_s=%.2f",
				n, m["VmRSS"], m["VmHWM"], m["RssAnon"], m["RssFile"], cpuStart, cpu20-cpuStart)
			if os.Getenv("NDZ_BENCH_STEADY") != "0" {
				drain(130 * time.Second)
				m = memory(t, h.Pid())
				cpuSteady, _ := cpuSeconds(t, h.Pid())
				line += fmt.Sprintf(" steady_rss_mib=%.1f steady_anon_mib=%.1f steady_file_mib=%.1f cpu_130s_s=%.2f",
					m["VmRSS"], m["RssAnon"], m["RssFile"], cpuSteady-cpu20)
			}
			if metricsURL != "" {
				line += fmt.Sprintf(" metrics_scrape_kib=%.0f metrics_scrape_ms=%.0f", scrapeKiB, scrapeMS)
			}
			fmt.Printf("%s all_healthy_ms=%d\n", line, first.Milliseconds())
		})
	}
}

// slotConfig is n slots in classes of at most 1000 (a class holds at most
// 1024): c0, c1, ...
func slotConfig(n int) *model.Config {
	cfg := &model.Config{Parent: testrig.Parent, ScanInterval: time.Hour}
	for i := 0; n > 0; i++ {
		k := min(n, 1000)
		cfg.Classes = append(cfg.Classes, model.Class{Name: fmt.Sprintf("c%d", i), Slots: k})
		n -= k
	}
	return cfg
}

// createSlots creates cfg's classes and slots in the in-process fake, with
// the properties the plugin gives them, as if it had made them earlier;
// the first held of them held by an allocation each.
func createSlots(t *testing.T, cfg *model.Config, c *zfs.Client, held int) {
	t.Helper()
	now := time.Now()
	for _, class := range cfg.Classes {
		ds := cfg.ClassDataset(class.Name)
		if err := c.Create(t.Context(), ds, model.ClassProps(ds)); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= class.Slots; i++ {
			slot := cfg.SlotDataset(class.Name, model.SlotID(class.Name, i))
			props := model.NewSlotProps(class, slot, 1, 0, now)
			if held > 0 {
				maps.Copy(props, model.HeldProps(fmt.Sprintf("%08x-0000-4000-8000-%012x", held, held), uint64(held), now))
				held--
			}
			if err := c.Create(t.Context(), slot, props); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// scrapeMetrics reads the plugin's metrics endpoint whole, as Prometheus
// does, and says how large the answer was (KiB) and how long it took (ms).
func scrapeMetrics(t *testing.T, url string) (kib, ms float64) {
	t.Helper()
	start := time.Now()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scraping the plugin: %v", err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping the plugin: %s, %v", resp.Status, err)
	}
	return float64(n) / 1024, float64(time.Since(start).Microseconds()) / 1000
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitAllHealthy reads the fingerprint stream until every one of n
// instances is healthy, and says when.
func waitAllHealthy(t *testing.T, ctx context.Context, h *devicemanager.Host, n int) time.Time {
	t.Helper()
	ch, err := h.Device.Fingerprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("not all %d instances healthy: %v", n, ctx.Err())
		case resp, ok := <-ch:
			if !ok || resp.Error != nil {
				t.Fatalf("fingerprint stream: open %v, error %v", ok, resp.Error)
			}
			healthy := 0
			for _, g := range resp.Devices {
				for _, d := range g.Devices {
					if d.Healthy {
						healthy++
					}
				}
			}
			if healthy == n {
				return time.Now()
			}
		}
	}
}

// rssTrace returns a function that appends the plugin's VmRSS and RssAnon
// (MiB), with the seconds since all were healthy, to the file
// $NDZ_BENCH_RSSTRACE.<pid> when that is set: the resident set between the
// two readings, second by second (scans, Stats responses, collections).
func rssTrace(t *testing.T, pid int, since time.Time) func() {
	base := os.Getenv("NDZ_BENCH_RSSTRACE")
	if base == "" {
		return func() {}
	}
	fh, err := os.Create(fmt.Sprintf("%s.%d", base, pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fh.Close() })
	return func() {
		m := memory(t, pid)
		fmt.Fprintf(fh, "%.0f %.1f %.1f\n", time.Since(since).Seconds(), m["VmRSS"], m["RssAnon"])
	}
}

// memory reads the memory figures of pid's /proc/<pid>/status, in MiB:
// VmRSS (resident now), VmHWM (peak), and the resident set's anonymous
// part (RssAnon: heap, stacks) and file-backed part (RssFile: the
// binary's pages in use).
func memory(t *testing.T, pid int) map[string]float64 {
	t.Helper()
	fh, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		if kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64); err == nil {
			m[k] = kib / 1024
		}
	}
	return m
}

// slotCounts is NDZ_BENCH_SLOTS (comma-separated) or def.
func slotCounts(t *testing.T, def []int) []int {
	s := os.Getenv("NDZ_BENCH_SLOTS")
	if s == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("NDZ_BENCH_SLOTS: %q is not a number", f)
		}
		out = append(out, n)
	}
	return out
}
