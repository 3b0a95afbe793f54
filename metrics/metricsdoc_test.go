package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var tableRow = regexp.MustCompile("^\\| `(nomad_device_zfs_[a-z0-9_]+)` \\| ([a-z]+) \\| ([^|]+) \\| (.+) \\|$")

// metricsDoc is the metrics page; its table lies between the
// metrics-table markers.
const metricsDoc = "../docs/metrics.md"

// TestMetricsDocTable holds the metrics table of docs/metrics.md to the
// endpoint's output: every family there is documented with its type and
// labels, and nothing documented is missing.
func TestMetricsDocTable(t *testing.T) {
	src, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(src), "<!-- begin metrics-table -->")
	table, _, ok2 := strings.Cut(table, "<!-- end metrics-table -->")
	if !ok || !ok2 {
		t.Fatalf("%s has no metrics-table markers", metricsDoc)
	}
	type row struct{ typ, labels string }
	doc := map[string]row{}
	for _, line := range strings.Split(table, "\n") {
		if m := tableRow.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			labels := strings.ReplaceAll(strings.ReplaceAll(m[3], "`", ""), " ", "")
			if labels == "none" {
				labels = ""
			}
			parts := strings.Split(labels, ",")
			slices.Sort(parts)
			doc[m[1]] = row{m[2], strings.Trim(strings.Join(parts, ","), ",")}
		}
	}
	got := map[string]row{}
	for name, f := range exercised(t) {
		if strings.HasPrefix(name, "nomad_device_zfs_") {
			got[name] = row{strings.ToLower(f.GetType().String()), strings.Join(labelNames(f), ",")}
		}
	}
	for name, g := range got {
		d, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("%s does not document %s (%s, labels %s)", metricsDoc, name, g.typ, g.labels)
		case d != g:
			t.Errorf("%s: %s says %s with labels %q; the endpoint serves %s with %q", name, metricsDoc, d.typ, d.labels, g.typ, g.labels)
		}
	}
	for name := range doc {
		if _, ok := got[name]; !ok {
			t.Errorf("%s documents %s, which the endpoint does not serve", metricsDoc, name)
		}
	}
}
