package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"

	"github.com/nomad-device-zfs/nomad-device-zfs/hooks"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// rig is a Manager over the fake zfs (below the Runner seam, counted by
// the metrics' runner) and fake allocations (below the Allocs seam), with
// the metrics wired as the plugin wires them, served over HTTP.
type rig struct {
	t      *testing.T
	f      *zfstest.Fake
	m      *Metrics
	mgr    *hooks.Manager
	allocs *fakeAllocs
	srv    *httptest.Server
}

func newRig(t *testing.T, classes ...model.Class) *rig {
	t.Helper()
	f := zfstest.New(zfstest.Options{MountRoot: t.TempDir()})
	if err := f.AddPool("tank", 1<<30); err != nil {
		t.Fatal(err)
	}
	if err := zfs.NewClient(f).Create(t.Context(), "tank/nomad", nil); err != nil {
		t.Fatal(err)
	}
	cfg := &model.Config{Parent: "tank/nomad", ScanInterval: time.Hour, Classes: classes}
	r := &rig{t: t, f: f, m: New(cfg, "v1.2.3-test"), allocs: &fakeAllocs{}}
	mgr, err := hooks.NewManager(hooks.Config{Slots: cfg, ZFS: zfs.NewClient(r.m.Commands(f)), Allocs: r.allocs, Observer: r.m})
	if err != nil {
		t.Fatal(err)
	}
	r.mgr = mgr
	r.m.Watch(r.mgr, r.allocs.latest)
	r.srv = httptest.NewServer(r.m.Handler(hclog.NewNullLogger()))
	t.Cleanup(r.srv.Close)
	return r
}

// deliver hands the manager a snapshot of allocs, as the watcher does,
// and lets it act on it.
func (r *rig) deliver(allocs ...model.Alloc) {
	r.t.Helper()
	s := r.allocs.set(allocs...)
	r.mgr.OnAllocs(s)
	r.mgr.Settle(r.t.Context())
}

// scrape reads the endpoint's output as Prometheus would.
func (r *rig) scrape() families {
	r.t.Helper()
	return scrapeURL(r.t, r.srv.URL)
}

type families map[string]*dto.MetricFamily

func scrapeURL(t testing.TB, url string) families {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(pmodel.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the endpoint's output: %v", err)
	}
	return fams
}

// find returns the series of family name whose labels include want.
func (fs families) find(name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	f := fs[name]
	if f == nil {
		return nil
	}
	for _, m := range f.Metric {
		ok := true
		for k, v := range want {
			if label(m, k) != v {
				ok = false
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// value is the one series of name with labels want: its gauge or counter
// value, or a histogram's count. ok is false when there is not exactly one.
func (fs families) value(name string, want map[string]string) (float64, bool) {
	ms := fs.find(name, want)
	if len(ms) != 1 {
		return 0, false
	}
	switch m := ms[0]; {
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount()), true
	}
	return 0, false
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// labelNames lists a family's label names, sorted, from its first series.
func labelNames(f *dto.MetricFamily) []string {
	if len(f.Metric) == 0 {
		return nil
	}
	var out []string
	for _, l := range f.Metric[0].Label {
		out = append(out, l.GetName())
	}
	sort.Strings(out)
	return out
}

// fakeAllocs is the allocation source below the lifecycle's Allocs seam.
type fakeAllocs struct {
	mu     sync.Mutex
	allocs []model.Alloc
	last   *model.Snapshot
}

func (f *fakeAllocs) set(as ...model.Alloc) model.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allocs = append([]model.Alloc(nil), as...)
	sort.Slice(f.allocs, func(i, j int) bool { return f.allocs[i].ID < f.allocs[j].ID })
	s := model.Snapshot{NodeID: "node", Index: 100, Allocs: f.allocs, At: time.Now()}
	f.last = &s
	return s
}

func (f *fakeAllocs) latest() *model.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *fakeAllocs) Refresh(context.Context) (model.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return model.Snapshot{NodeID: "node", Index: 100, Allocs: f.allocs, At: time.Now()}, nil
}

func (f *fakeAllocs) Lookup(_ context.Context, id string) (model.Alloc, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.allocs {
		if a.ID == id {
			return a, true, nil
		}
	}
	return model.Alloc{}, false, errors.New("unexpected lookup of " + id)
}

func (f *fakeAllocs) RunningLocally(context.Context, string) (bool, error) { return false, nil }

// alloc is an allocation of job web, group g, holding one slot of class.
func alloc(id, status, class, slot string) model.Alloc {
	return model.Alloc{
		ID: id, Namespace: "prod", JobID: "web", TaskGroup: "g", CreateIndex: 10, ModifyIndex: 10,
		ClientStatus: status, DesiredStatus: "run",
		Devices: []model.Device{{Task: "t", Vendor: "zfs", Type: "dataset", Name: class, IDs: []string{slot}}},
	}
}

// uuid makes a UUID-shaped allocation ID from a short name.
func uuid(name string) string {
	return (name + strings.Repeat("0", 8))[:8] + "-0000-0000-0000-000000000000"
}
