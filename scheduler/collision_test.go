package scheduler

import (
	"errors"
	"testing"

	"github.com/hashicorp/nomad/nomad/structs"
)

// TestNomadGivesTwoTasksOneInstanceUnderPreemption pins a bug of Nomad
// 1.6.2 (and of 1.11.3, where the simulation found it): with preemption enabled, when the second
// task of a group asking the same device finds no free instance, the
// binpack iterator retries with a device allocator built from the node's
// proposed allocations only (rank.go, devAllocatorEvict), which forgets the
// instance it just gave the first task, and offers it again. Cluster
// refuses such a plan with ErrDeviceCollision instead of applying it.
func TestNomadGivesTwoTasksOneInstanceUnderPreemption(t *testing.T) {
	// Which instance the retry offers is map order: try until it shows.
	collisions := 0
	for try := 0; try < 40 && collisions == 0; try++ {
		c := newCluster(t, slots("scratch", 2), true)
		low := register(t, c, job("low", 1, 20, Ask{Class: "scratch", Count: 1}))
		if len(low.Placed) != 1 {
			t.Fatalf("low not placed: %+v", low)
		}
		j := job("pair", 1, 50)
		j.Groups[0].Tasks = []Task{
			{Name: "main", Version: "1", Devices: []Ask{{Class: "scratch", Count: 1}}},
			{Name: "side", Version: "1", Devices: []Ask{{Class: "scratch", Count: 1}}},
		}
		ev, err := c.Register(j)
		switch {
		case errors.Is(err, ErrDeviceCollision):
			collisions++
			t.Logf("try %d: %v", try, err)
		case err != nil:
			t.Fatal(err)
		default:
			// Nomad preempted low and gave each task its own instance.
			got := ids(ev.Placed)
			if len(got) != 2 || got[0] == got[1] {
				t.Fatalf("two tasks got %v", got)
			}
			if a := c.Alloc(low.Placed[0].AllocID); a.DesiredStatus != structs.AllocDesiredStatusEvict {
				t.Fatalf("placed %v without preempting low", got)
			}
		}
	}
	if collisions == 0 {
		t.Fatal("Nomad never reused an instance in 40 tries: fixed upstream? Then drop this pin and the note in docs/lifecycle.md")
	}
}
