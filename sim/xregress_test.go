package sim

import (
	"strings"
	"testing"
)

// TestTwoNodeRegressions replays shrunk schedules of the two-node world
// that broke an invariant before a fix; each fails without its fix.
func TestTwoNodeRegressions(t *testing.T) {
	tests := []struct {
		name string
		seed uint64
		keep []int
	}{
		{
			// A claim of a copy from another node renamed it onto the slot,
			// then dropped the transfer's snapshots; the plugin died
			// between the two, and @migrate-final stayed on the held slot
			// for good (X4), where a later migration of that data would
			// have taken it for its own final snapshot. The snapshots now
			// go first, while the copy is still parked (model.PlanClaim).
			name: "a crash inside a claim leaves the copy's snapshots on the slot",
			seed: 30,
			keep: []int{10, 11, 17, 18, 19, 20, 21, 22, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := PlayX(tc.seed, Keep(GenerateX(tc.seed, 80), tc.keep), Options{Dir: t.TempDir()})
			if r.Failed() {
				t.Fatalf("%s\n%s", r.Violations[0], strings.Join(r.Timeline, "\n"))
			}
		})
	}
}
