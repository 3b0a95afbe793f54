package scheduler

import (
	"testing"
	"time"

	"github.com/hashicorp/nomad/nomad/structs"
)

// TestStopAfterClientDisconnectNamesNoPredecessor is what Nomad 1.6.2's
// own scheduler does with an allocation lost with its node when its group
// sets stop_after_client_disconnect (docs/node-loss.md): it marks it lost
// and stopped and places nothing until WaitClientStop (the loss, plus the
// setting, plus the longest kill_timeout) has passed, when the follow-up
// evaluation it created runs; that places the replacement as a missing
// instance of the group, under the lost one's name, naming no predecessor
// (model.LostPredecessor pairs the two). Any other evaluation of the job
// once the lost one is stopped (another node's event, an update) places it
// so too, at once: the servers' placement bounds nothing.
func TestStopAfterClientDisconnectNamesNoPredecessor(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before evaluates the job again right after the loss.
		before bool
	}{
		{name: "at WaitClientStop"},
		{name: "any evaluation after the loss places it at once", before: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n2 := slots("pg", 1)
			n2.ID, n2.Name = "00000000-0000-4000-8000-0000000000c2", "n2"
			c := newCluster(t, slots("pg", 1), false)
			if err := c.UpsertNode(n2); err != nil {
				t.Fatal(err)
			}
			j := job("web", 1, 50, Ask{Class: "pg", Count: 1})
			j.Groups[0].StopAfter = 30 * time.Second
			j.Groups[0].Tasks[0].KillTimeout = 10 * time.Second
			placed := register(t, c, j).Placed[0]
			setStatus(t, c, placed.AllocID, structs.AllocClientStatusRunning)
			evs, err := c.SetNodeStatus(placed.NodeID, structs.NodeStatusDown)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if len(ev.Placed) > 0 {
					t.Fatalf("placed %v at the loss", ev.Placed)
				}
			}
			if a := c.Alloc(placed.AllocID); a.ClientStatus != structs.AllocClientStatusLost || a.DesiredStatus != structs.AllocDesiredStatusStop {
				t.Fatalf("A is %s/%s, want lost/stop", a.ClientStatus, a.DesiredStatus)
			}
			if !tc.before {
				// The follow-up evaluation the first one created, at its
				// WaitUntil.
				if err := c.LostSince(placed.AllocID, 40*time.Second+time.Millisecond); err != nil {
					t.Fatal(err)
				}
			}
			ev, err := c.Evaluate("default", "web", structs.EvalTriggerNodeUpdate)
			if err != nil || len(ev.Placed) != 1 {
				t.Fatalf("placed %v, %v; want the replacement", ev.Placed, err)
			}
			a, b := c.Alloc(placed.AllocID), c.Alloc(ev.Placed[0].AllocID)
			if b.PreviousAllocation != "" || a.NextAllocation != "" || b.Name != a.Name || b.NodeID == a.NodeID {
				t.Errorf("B on %s named %q replaces %q, A's next %q; want A's name %q, no link, another node",
					b.NodeID, b.Name, b.PreviousAllocation, a.NextAllocation, a.Name)
			}
		})
	}
}
