package scheduler

import (
	"slices"
	"testing"

	"github.com/hashicorp/nomad/nomad/structs"
)

// TestExplain checks each reason against what Nomad's scheduler does with
// the same ask: Explain says it fits exactly when a placement succeeds.
func TestExplain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		node   Node
		hold   int // instances taken first by a running job
		ask    Ask
		reason Reason
		free   []string
	}{
		{name: "fits", node: slots("pg", 2), ask: Ask{Class: "pg", Count: 1}, free: []string{"pg-1", "pg-2"}},
		{name: "no such class", node: slots("pg", 2), ask: Ask{Class: "scratch", Count: 1}, reason: NoClass},
		{name: "more than the class has", node: slots("pg", 2), ask: Ask{Class: "pg", Count: 3}, reason: NoClass},
		{name: "constraint attribute", node: slots("pg", 2),
			ask: Ask{Class: "pg", Count: 1, Constraints: [][3]string{{"pool", "=", "other"}}}, reason: Constraint},
		{name: "unhealthy", node: slots("pg", 2, 1, 2), ask: Ask{Class: "pg", Count: 1}, reason: Unhealthy},
		{name: "all held", node: slots("pg", 2), hold: 2, ask: Ask{Class: "pg", Count: 1}, reason: AllHeld},
		{name: "one left", node: slots("pg", 2), hold: 1, ask: Ask{Class: "pg", Count: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, tc.node, false)
			for i := 0; i < tc.hold; i++ {
				ev := register(t, c, job("holder"+string(rune('a'+i)), 1, 50, Ask{Class: "pg", Count: 1}))
				setStatus(t, c, ev.Placed[0].AllocID, structs.AllocClientStatusRunning)
			}
			got, err := c.Explain(nodeID, tc.ask)
			if err != nil {
				t.Fatal(err)
			}
			if got.Reason != tc.reason || tc.free != nil && !slices.Equal(got.Free, tc.free) {
				t.Fatalf("got %+v, want %q free %v", got, tc.reason, tc.free)
			}
			if tc.reason == Unhealthy && got.Unhealthy["pg-1"] != "releasing" {
				t.Fatalf("unhealthy descriptions %v", got.Unhealthy)
			}
			// Nomad agrees: it places exactly when Explain says it fits.
			ev := register(t, c, job("probe", 1, 50, tc.ask))
			if placed := len(ev.Placed) == 1; placed != (got.Reason == Fits) {
				t.Fatalf("Explain says %q, Nomad placed %v (%s)", got.Reason, placed, reasons(ev))
			}
		})
	}
}
