package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// table prints rows under a header, columns aligned two spaces apart like
// the nomad CLI's. An empty cell prints as "-".
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			if c == "" {
				c = "-"
			}
			cells[i] = c
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
}

// keyValues prints `key = value` lines aligned on the `=`, like the
// header of `nomad node status <id>`.
func keyValues(w io.Writer, kv [][2]string) {
	width := 0
	for _, p := range kv {
		width = max(width, len(p[0]))
	}
	for _, p := range kv {
		fmt.Fprintf(w, "%-*s = %s\n", width, p[0], p[1])
	}
}

// printJSON writes v indented, for -json.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ago says how long before now t was: "45s ago", "3m10s ago", "2h5m ago",
// "3d4h ago". A zero t is "".
func ago(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	if d < time.Second {
		return "just now"
	}
	return span(d) + " ago"
}

// until says when t comes: "in 71h59m" style, or "expired 3m ago".
func until(t, now time.Time) string {
	switch {
	case t.IsZero():
		return "never"
	case !now.Before(t):
		return "expired " + ago(t, now)
	}
	return "in " + span(t.Sub(now))
}

// span renders a duration with its two largest units.
func span(d time.Duration) string {
	d = d.Round(time.Second)
	days := int(d / (24 * time.Hour))
	h := int(d/time.Hour) % 24
	m := int(d/time.Minute) % 60
	s := int(d/time.Second) % 60
	switch {
	case days > 0 && h > 0:
		return fmt.Sprintf("%dd%dh", days, h)
	case days > 0:
		return fmt.Sprintf("%dd", days)
	case h > 0 && m > 0:
		return fmt.Sprintf("%dh%dm", h, m)
	case h > 0:
		return fmt.Sprintf("%dh", h)
	case m > 0 && s > 0:
		return fmt.Sprintf("%dm%ds", m, s)
	case m > 0:
		return fmt.Sprintf("%dm", m)
	}
	return fmt.Sprintf("%ds", s)
}

// size prints bytes the way `zfs list` does: "512B", "24K", "1.50G",
// "10.2M", "100G".
func size(b uint64) string {
	const units = "KMGTPE"
	if b < 1024 {
		return strconv.FormatUint(b, 10) + "B"
	}
	v, u := float64(b), -1
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	suffix := string(units[u])
	if v == float64(uint64(v)) {
		return strconv.FormatUint(uint64(v), 10) + suffix
	}
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f%s", v, suffix)
	case v < 100:
		return fmt.Sprintf("%.1f%s", v, suffix)
	}
	return fmt.Sprintf("%.0f%s", v, suffix)
}

// quota prints a quota, "none" when unset.
func quota(b uint64) string {
	if b == 0 {
		return "none"
	}
	return size(b)
}
