package plugin

import (
	"runtime/debug"
	"testing"

	hclog "github.com/hashicorp/go-hclog"
)

// TestLimitMemory: the process that manages slots gets a soft memory
// limit scaled to them, unless GOMEMLIMIT decides or the plugin is hosted
// by a test.
func TestLimitMemory(t *testing.T) {
	if MemoryLimit(10000) <= MemoryLimit(1000) || MemoryLimit(10) < 8<<20 {
		t.Fatalf("limits 10: %d, 1000: %d, 10,000: %d", MemoryLimit(10), MemoryLimit(1000), MemoryLimit(10000))
	}
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before); LimitMemory = false })
	cases := []struct {
		name      string
		on        bool
		env       string
		wantLimit bool
	}{
		{name: "hosted by a test", on: false},
		{name: "the plugin binary", on: true, wantLimit: true},
		{name: "GOMEMLIMIT set", on: true, env: "64MiB"},
		{name: "GOMEMLIMIT off", on: true, env: "off"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(before)
			LimitMemory = tc.on
			t.Setenv("GOMEMLIMIT", tc.env)
			applied := limitMemory(10000, hclog.NewNullLogger())
			got := debug.SetMemoryLimit(before)
			if applied != tc.wantLimit {
				t.Errorf("applied %v, want %v", applied, tc.wantLimit)
			}
			want := before
			if tc.wantLimit {
				want = MemoryLimit(10000)
			}
			if got != want {
				t.Errorf("limit %d, want %d", got, want)
			}
		})
	}
}
