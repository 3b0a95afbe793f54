//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// metricsBlock asks the plugin for its endpoint on a port the system
// picks; metricsAddr reads it back from the agent's log.
const metricsBlock = "metrics {\n  address = \"127.0.0.1:0\"\n}\n"

// TestMetricsScrape scrapes the plugin's endpoint on real Nomad and real
// OpenZFS: a held slot's series carry its job's labels (Nomad's names)
// and are gone once the job has ended and the slot is released; the
// release counter and the latency histogram moved; the pool's health
// follows a mirror taken DEGRADED and back.
func TestMetricsScrape(t *testing.T) {
	t.Parallel()
	p := newPool(t, "e2emetrics", true)
	a := startAgent(t, p, metricsBlock+scratchClass)
	a.WaitForNodeDevice(t, "zfs", "dataset", "scratch", 2, deviceTimeout)
	url := "http://" + metricsAddr(t, a) + "/metrics"
	scope := map[string]string{"pool": p.Name, "class": "scratch"}

	before := scrapeWhen(t, url, "the endpoint to show the ready slots", func(s scraped) (bool, string) {
		n, _ := s.value("nomad_device_zfs_slots", with(scope, "state", "ready"))
		return n == 2, fmt.Sprintf("%v ready", n)
	})
	released, _ := before.value("nomad_device_zfs_releases_total", with(scope, "policy", "destroy", "outcome", "complete", "result", "ok"))
	latencies, _ := before.value("nomad_device_zfs_release_latency_seconds", with(scope, "policy", "destroy"))

	alloc, _ := startHeld(t, a, batchJob("metrics-held", "raw_exec", "scratch", held("true"), ""))
	slot := deviceID(t, alloc)
	waitHolder(t, p.Parent+"/scratch/"+slot, alloc.ID)
	holder := with(scope, "slot", slot, "alloc_id", alloc.ID, "namespace", "default", "job", "metrics-held", "task_group", "g")
	heldScrape := scrapeWhen(t, url, "the held slot's series with its job's labels", func(s scraped) (bool, string) {
		_, ok := s.value("nomad_device_zfs_slot_used_bytes", holder)
		return ok, s.lines("nomad_device_zfs_slot_used_bytes")
	})
	if q, ok := heldScrape.value("nomad_device_zfs_slot_quota_bytes", holder); !ok || q != 64<<20 {
		t.Errorf("the held slot's quota: %v (found %v), want 64 MiB", q, ok)
	}
	if n, _ := heldScrape.value("nomad_device_zfs_reserve_duration_seconds", with(scope, "result", "ok")); n < 1 {
		t.Errorf("%v Reserves timed, want the job's", n)
	}
	t.Logf("the endpoint while %s holds %s:\n%s", alloc.ID, slot, heldScrape.lines("nomad_device_zfs_slot_used_bytes", "nomad_device_zfs_slot_referenced_bytes",
		"nomad_device_zfs_slot_quota_bytes", "nomad_device_zfs_slots", "nomad_device_zfs_slots_free", "nomad_device_zfs_pool_health",
		"nomad_device_zfs_reserve_duration_seconds_count"))
	if curl := os.Getenv("NDZ_E2E_CURL"); curl != "" {
		out, err := exec.Command(curl, "-s", url).CombinedOutput()
		t.Logf("curl -s %s (err %v):\n%s", url, err, out)
	}

	finish(t, a, alloc.ID)
	after := scrapeWhen(t, url, "the release counted and timed, the holder's series gone", func(s scraped) (bool, string) {
		r, _ := s.value("nomad_device_zfs_releases_total", with(scope, "policy", "destroy", "outcome", "complete", "result", "ok"))
		l, _ := s.value("nomad_device_zfs_release_latency_seconds", with(scope, "policy", "destroy"))
		left := s.withLabel("alloc_id", alloc.ID)
		return r == released+1 && l == latencies+1 && len(left) == 0,
			fmt.Sprintf("releases %v (was %v), latencies %v (was %v), series of %s: %v", r, released, l, latencies, alloc.ID, left)
	})
	t.Logf("after the release:\n%s", after.lines("nomad_device_zfs_releases_total", "nomad_device_zfs_release_latency_seconds_sum",
		"nomad_device_zfs_release_latency_seconds_count", "nomad_device_zfs_slots"))

	run(t, "zpool", "offline", p.Name, p.Vdevs[1])
	checkPoolHealth(t, p.Name, "DEGRADED")
	degraded := scrapeWhen(t, url, "the pool DEGRADED and its slots unhealthy", func(s scraped) (bool, string) {
		d, _ := s.value("nomad_device_zfs_pool_health", map[string]string{"pool": p.Name, "health": "DEGRADED"})
		o, _ := s.value("nomad_device_zfs_pool_health", map[string]string{"pool": p.Name, "health": "ONLINE"})
		u, _ := s.value("nomad_device_zfs_slots_unhealthy", scope)
		return d == 1 && o == 0 && u == 2, s.lines("nomad_device_zfs_pool_health", "nomad_device_zfs_slots_unhealthy")
	})
	t.Logf("one side of the mirror offline:\n%s", degraded.lines("nomad_device_zfs_pool_health", "nomad_device_zfs_slots_free", "nomad_device_zfs_slots_unhealthy"))
	run(t, "zpool", "online", p.Name, p.Vdevs[1])
	scrapeWhen(t, url, "the pool ONLINE again", func(s scraped) (bool, string) {
		o, _ := s.value("nomad_device_zfs_pool_health", map[string]string{"pool": p.Name, "health": "ONLINE"})
		f, _ := s.value("nomad_device_zfs_slots_free", scope)
		return o == 1 && f == 2, s.lines("nomad_device_zfs_pool_health", "nomad_device_zfs_slots_free")
	})
}

// listeningRE finds the plugin's line as the agent logs it again, its
// fields in any order: "... metrics endpoint listening: plugin=...
// address=127.0.0.1:41235 path=/metrics ...".
var listeningRE = regexp.MustCompile(`metrics endpoint listening:.* address=(\S+)`)

// metricsAddr is the address the agent's plugin says its endpoint
// listens on.
func metricsAddr(t testing.TB, a *nomadtest.Agent) string {
	t.Helper()
	var addr string
	waitFor(t, deviceTimeout, "the plugin's metrics endpoint in the agent log", func() (bool, string) {
		all := listeningRE.FindAllStringSubmatch(a.Logs(), -1)
		if len(all) > 0 {
			addr = all[len(all)-1][1] // a relaunched plugin listens anew
		}
		return len(all) > 0, "no \"metrics endpoint listening\" line yet"
	})
	return addr
}

// scraped is one answer of the endpoint, parsed, with its text.
type scraped struct {
	fams map[string]*dto.MetricFamily
	text string
}

func scrape(url string) (scraped, error) {
	resp, err := http.Get(url)
	if err != nil {
		return scraped{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return scraped{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return scraped{}, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	p := expfmt.NewTextParser(pmodel.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	return scraped{fams: fams, text: string(body)}, err
}

// scrapeWhen scrapes until cond holds and returns that scrape.
func scrapeWhen(t testing.TB, url, what string, cond func(scraped) (bool, string)) scraped {
	t.Helper()
	var s scraped
	waitFor(t, releaseTimeout, what, func() (bool, string) {
		var err error
		if s, err = scrape(url); err != nil {
			return false, err.Error()
		}
		return cond(s)
	})
	return s
}

// value is the one series of name whose labels include want: a gauge's or
// counter's value, a histogram's count. ok is false unless exactly one.
func (s scraped) value(name string, want map[string]string) (float64, bool) {
	var found []*dto.Metric
	if f := s.fams[name]; f != nil {
		for _, m := range f.Metric {
			if hasLabels(m, want) {
				found = append(found, m)
			}
		}
	}
	if len(found) != 1 {
		return 0, false
	}
	switch m := found[0]; {
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount()), true
	}
	return 0, false
}

// histogram is the one series of histogram name with labels want.
func (s scraped) histogram(name string, want map[string]string) *dto.Histogram {
	if f := s.fams[name]; f != nil {
		for _, m := range f.Metric {
			if hasLabels(m, want) && m.Histogram != nil {
				return m.Histogram
			}
		}
	}
	return nil
}

// withLabel lists the families with a series labelled name=value.
func (s scraped) withLabel(name, value string) []string {
	var out []string
	for fam, f := range s.fams {
		for _, m := range f.Metric {
			if hasLabels(m, map[string]string{name: value}) {
				out = append(out, fam)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// lines are the text lines of the families with the given prefixes.
func (s scraped) lines(prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(s.text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p+"{") || strings.HasPrefix(l, p+" ") {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.Label {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// with is base and more labels.
func with(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// quantile estimates quantile q of h as Prometheus's histogram_quantile
// does: linearly within the bucket the rank falls in.
func quantile(q float64, h *dto.Histogram) float64 {
	if h == nil || h.GetSampleCount() == 0 {
		return 0
	}
	rank := q * float64(h.GetSampleCount())
	lower, below := 0.0, 0.0
	for _, b := range h.Bucket {
		upper, count := b.GetUpperBound(), float64(b.GetCumulativeCount())
		if count >= rank {
			if count == below {
				return upper
			}
			return lower + (upper-lower)*(rank-below)/(count-below)
		}
		lower, below = upper, count
	}
	return lower
}
