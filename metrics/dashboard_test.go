package metrics

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/examples"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// exercised scrapes the endpoint after everything it reports has
// happened at least once, on the fake zfs: slots held (with a quota and
// a refquota), a release retained by the snapshot policy, a Reserve, a
// failed blocking query and an index reset. Every family the endpoint
// can show is in it.
func exercised(t *testing.T) families {
	t.Helper()
	kept := model.Class{Name: "kept", Slots: 1, MountPath: "/kept", Properties: map[string]string{"refquota": "1G"},
		Release: model.Release{Policy: model.PolicySnapshot, Retain: time.Hour, RetainMax: 10}}
	r := newRig(t, scratch, kept)
	r.mgr.Reconcile(t.Context())
	held := alloc(uuid("f1"), model.ClientRunning, "scratch", "scratch-1")
	first := alloc(uuid("f2"), model.ClientRunning, "kept", "kept-1")
	r.deliver(held, first)
	first.ClientStatus, first.FinishedAt = model.ClientComplete, time.Now()
	r.deliver(held, first)
	second := alloc(uuid("f3"), model.ClientRunning, "kept", "kept-1")
	second.CreateIndex = 20
	r.deliver(held, first, second)
	start := time.Now()
	_, err := r.mgr.Reserve(t.Context(), []string{"scratch-1"})
	r.m.ReserveDone([]string{"scratch-1"}, time.Since(start), err)
	r.m.QueryFailed("unreachable")
	r.m.IndexReset()
	return r.scrape()
}

// TestDashboardQueriesExist: every metric the example Grafana dashboard
// queries is in the endpoint's output, and every label it groups, filters
// or names a legend by is one of those metrics' labels.
func TestDashboardQueriesExist(t *testing.T) {
	fs := exercised(t)
	for _, name := range []string{"nomad_device_zfs_slot_refquota_bytes", "nomad_device_zfs_retained_bytes", "nomad_device_zfs_reserve_duration_seconds"} {
		if fs[name] == nil {
			t.Fatalf("the exercise did not produce %s", name)
		}
	}
	var dash any
	if err := json.Unmarshal(examples.Dashboard, &dash); err != nil {
		t.Fatalf("examples/grafana-dashboard.json: %v", err)
	}
	queries := dashboardQueries(dash)
	if len(queries) < 10 {
		t.Fatalf("only %d queries found in the dashboard", len(queries))
	}
	for _, q := range queries {
		names := metricRE.FindAllString(q.expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: no metric in %q", q.where, q.expr)
		}
		// instance is the target's, added by Prometheus; exported_job is
		// the series' job as Prometheus renames it without honor_labels.
		allowed := map[string]bool{"instance": true, "exported_job": true}
		for _, n := range names {
			family, bucket := familyOf(fs, n)
			if family == "" {
				t.Errorf("%s: %s is not in the endpoint's output", q.where, n)
				continue
			}
			for _, l := range labelNames(fs[family]) {
				allowed[l] = true
			}
			if bucket {
				allowed["le"] = true
			}
		}
		for _, l := range usedLabels(q) {
			if !allowed[l] {
				t.Errorf("%s: label %q is on none of %v", q.where, l, names)
			}
		}
	}
}

var (
	metricRE  = regexp.MustCompile(`\b(nomad_device_zfs_[a-z0-9_]+|process_[a-z0-9_]+|go_[a-z0-9_]+)\b`)
	byRE      = regexp.MustCompile(`\b(?:by|on|without|ignoring)\s*\(([^)]*)\)`)
	matcherRE = regexp.MustCompile(`([a-z_]+)\s*(?:=~|!~|!=|=)\s*"`)
	legendRE  = regexp.MustCompile(`\{\{\s*([a-z_]+)\s*\}\}`)
	valuesRE  = regexp.MustCompile(`label_values\([^,]+,\s*([a-z_]+)\)`)
)

type query struct{ where, expr, legend string }

// dashboardQueries walks the dashboard for every target's expr (with its
// panel's title) and every templating query.
func dashboardQueries(v any) []query {
	var out []query
	var walk func(v any, where string)
	walk = func(v any, where string) {
		switch x := v.(type) {
		case map[string]any:
			if title, ok := x["title"].(string); ok {
				where = title
			}
			if name, ok := x["name"].(string); ok && x["type"] == "query" {
				where = "variable " + name
				if def, ok := x["definition"].(string); ok {
					out = append(out, query{where: where, expr: def})
				}
			}
			if expr, ok := x["expr"].(string); ok {
				legend, _ := x["legendFormat"].(string)
				out = append(out, query{where: where, expr: expr, legend: legend})
			}
			for _, sub := range x {
				walk(sub, where)
			}
		case []any:
			for _, sub := range x {
				walk(sub, where)
			}
		}
	}
	walk(v, "dashboard")
	return out
}

// familyOf is the output's family of a queried name: itself, or the
// histogram it is a _bucket, _sum or _count series of.
func familyOf(fs families, name string) (family string, bucket bool) {
	if fs[name] != nil {
		return name, false
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && fs[base] != nil && fs[base].GetType().String() == "HISTOGRAM" {
			return base, suffix == "_bucket"
		}
	}
	return "", false
}

// usedLabels are the labels a query groups or filters by, names in its
// legend, or asks the values of.
func usedLabels(q query) []string {
	var out []string
	for _, m := range byRE.FindAllStringSubmatch(q.expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
	}
	for _, re := range []*regexp.Regexp{matcherRE, valuesRE} {
		for _, m := range re.FindAllStringSubmatch(q.expr, -1) {
			out = append(out, m[1])
		}
	}
	for _, m := range legendRE.FindAllStringSubmatch(q.legend, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}
