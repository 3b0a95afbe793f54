package sim

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Kind is one kind of event.
type Kind int

// The events. Each is applied by World.apply; its Arg picks the target
// (an allocation, a job, a slot) among those the state offers, so a
// schedule with events removed (shrinking) still replays.
const (
	// Plugin and watcher: what the plugin's goroutines do.
	Reconcile   Kind = iota // a periodic scan: a whole Reconcile pass, or its scan now and its pass at the next Reconcile
	Watch                   // the watcher delivers a fresh snapshot (GET /v1/node/<id>/allocations)
	Fingerprint             // the plugin's view reaches the servers as the node's devices

	// The local Nomad client.
	ClientStep // one allocation makes one step: pulled, started (Reserve), stopping, stopped
	TaskExit   // a running allocation's main task exits (batch: complete; service: failed, or restarted in place)
	Tick       // time passes; slow kills finish

	// The servers and their users.
	Submit         // a new job
	UpdateDestruct // a job's task config changes: its allocations are replaced
	UpdateInPlace  // a job's kill timeout changes: updated in place
	StopJob        // nomad job stop; a third with -purge: the servers forget its stopping allocations while their tasks run
	GC             // the servers garbage-collect terminal allocations
	Disconnect     // the node misses its heartbeats: unknown or lost
	Reconnect      // the node is back
	Reevaluate     // blocked evaluations run again (capacity changed)

	// Faults.
	PluginKill    // the plugin dies within its next few zfs commands
	AgentRestart  // the agent restarts: plugin relaunched, API down a while, allocations restored
	ZFSFail       // the next matching zfs command fails
	ZFSTimeout    // the next matching zfs command times out (having run or not)
	Busy          // a slot's dataset is busy (a process left behind) for a while
	APIDown       // the API is unreachable for a while
	APIForbid     // the token loses read-job in namespace "team" for a while
	APIIndexReset // the API's index goes backwards or restarts low (the header only)
	ClientAPIFail // the local client's allocation endpoint fails on its own, the agent up
	Stranger      // someone makes a dataset or snapshot below a slot, retained or parked data
	StrangerGone  // the operator removes one
	ClusterBackup // the operator saves the servers' state (nomad operator snapshot save)
	ClusterReset  // the servers' state starts over: rebuilt, or restored from the saved snapshot

	// The operator.
	EditConfig // slots raised or lowered, a class added or removed, policy changed; the plugin restarts
	CLIRelease // nomad-device-zfs-ctl release <slot>: read now, mark releasing at a later event
	CLIGC      // nomad-device-zfs-ctl gc: prune retained data that is due

	numKinds
)

var kindNames = [...]string{"reconcile", "watch", "fingerprint", "client-step", "task-exit", "tick",
	"submit", "update-destructive", "update-in-place", "stop-job", "gc", "disconnect", "reconnect",
	"reevaluate", "plugin-kill", "agent-restart", "zfs-fail", "zfs-timeout", "busy", "api-down",
	"api-forbid", "api-index-reset", "client-api-fail", "stranger", "stranger-gone", "cluster-backup", "cluster-reset",
	"edit-config", "cli-release", "cli-gc"}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// weights make ordinary events common and faults rare, as on a node.
var weights = [numKinds]int{
	Reconcile: 14, Watch: 14, Fingerprint: 8, ClientStep: 30, TaskExit: 4, Tick: 6,
	Submit: 6, UpdateDestruct: 4, UpdateInPlace: 2, StopJob: 3, GC: 3, Disconnect: 1, Reconnect: 2,
	Reevaluate: 3, PluginKill: 2, AgentRestart: 1, ZFSFail: 3, ZFSTimeout: 2, Busy: 1, APIDown: 2,
	APIForbid: 1, APIIndexReset: 1, ClientAPIFail: 1, Stranger: 2, StrangerGone: 1, ClusterBackup: 1, ClusterReset: 1,
	EditConfig: 1, CLIRelease: 2, CLIGC: 1,
}

// Event is one step of a schedule.
type Event struct {
	Kind Kind
	// Arg seeds every choice the event makes.
	Arg uint64
	// Dt is the simulated time that passes before it.
	Dt time.Duration
	// Index is its position in the generated schedule (kept by Shrink).
	Index int
}

func (e Event) String() string { return fmt.Sprintf("[%d] +%s %s", e.Index, e.Dt, e.Kind) }

// Generate draws n events from seed, with the kinds in disabled left out.
func Generate(seed uint64, n int, disabled map[Kind]bool) []Event {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	total := 0
	for k, w := range weights {
		if !disabled[Kind(k)] {
			total += w
		}
	}
	out := make([]Event, 0, n)
	for len(out) < n {
		r := rng.IntN(total)
		k := Kind(0)
		for ; k < numKinds; k++ {
			if disabled[k] {
				continue
			}
			if r < weights[k] {
				break
			}
			r -= weights[k]
		}
		out = append(out, Event{Kind: k, Arg: rng.Uint64(), Dt: time.Duration(rng.IntN(8000)) * time.Millisecond, Index: len(out)})
	}
	return out
}

// Keep returns the events whose Index is listed, in order: a shrunk
// schedule, replayed from its seed.
func Keep(events []Event, indexes []int) []Event {
	want := map[int]bool{}
	for _, i := range indexes {
		want[i] = true
	}
	var out []Event
	for _, e := range events {
		if want[e.Index] {
			out = append(out, e)
		}
	}
	return out
}
