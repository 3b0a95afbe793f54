package cli

import (
	"bytes"
	"testing"
	"time"
)

func TestSize(t *testing.T) {
	cases := []struct {
		name string
		in   uint64
		want string
	}{
		{"bytes", 512, "512B"},
		{"zero", 0, "0B"},
		{"exact KiB", 24 << 10, "24K"},
		{"fraction KiB", 25088, "24.5K"},
		{"two digits", 10*1024*1024 + 200*1024, "10.2M"},
		{"three digits", 150 << 30, "150G"},
		{"exact GiB", 1 << 30, "1G"},
		{"small fraction", 3 * (1 << 30) / 2, "1.50G"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := size(tc.in); got != tc.want {
				t.Fatalf("size(%d) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestRelativeTimes(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	cases := []struct {
		name string
		got  string
		want string
	}{
		{"now", ago(now, now), "just now"},
		{"seconds", ago(now.Add(-45*time.Second), now), "45s ago"},
		{"minutes and seconds", ago(now.Add(-190*time.Second), now), "3m10s ago"},
		{"whole minutes", ago(now.Add(-3*time.Minute), now), "3m ago"},
		{"hours and minutes", ago(now.Add(-125*time.Minute), now), "2h5m ago"},
		{"days and hours", ago(now.Add(-76*time.Hour), now), "3d4h ago"},
		{"zero time", ago(time.Time{}, now), ""},
		{"expires later", until(now.Add(71*time.Hour+59*time.Minute), now), "in 2d23h"},
		{"expired", until(now.Add(-time.Hour), now), "expired 1h ago"},
		{"never expires", until(time.Time{}, now), "never"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("%q, want %q", tc.got, tc.want)
			}
		})
	}
}

func TestTableAligns(t *testing.T) {
	var b bytes.Buffer
	table(&b, []string{"ID", "State", "Job"}, [][]string{{"scratch-1", "held", "web"}, {"scratch-10", "ready", ""}})
	want := "ID          State  Job\nscratch-1   held   web\nscratch-10  ready  -\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
