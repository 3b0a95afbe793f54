package sim

import (
	"github.com/hashicorp/go-hclog"
)

// Result is one schedule's outcome.
type Result struct {
	Seed       uint64
	Events     []Event
	Violations []Violation
	Timeline   []string
}

// Failed reports whether any invariant broke.
func (r Result) Failed() bool { return len(r.Violations) > 0 }

// Options configure Play.
type Options struct {
	// Dir holds each world's files (a fresh directory below it).
	Dir string
	// Logger receives the plugin's logs; nil discards them.
	Logger hclog.Logger
}

// Play runs one schedule in a fresh world.
func Play(seed uint64, events []Event, o Options) Result {
	w, err := New(seed, o.Dir, o.Logger)
	if err != nil {
		return Result{Seed: seed, Events: events, Violations: []Violation{{Invariant: "harness", Detail: err.Error()}}}
	}
	defer w.Close()
	v := w.Run(events)
	return Result{Seed: seed, Events: events, Violations: v, Timeline: w.Timeline()}
}

// class names a violation's kind for shrinking: the same invariant.
func class(r Result) string {
	if len(r.Violations) == 0 {
		return ""
	}
	return r.Violations[0].Invariant
}

// Shrink delta-debugs a failing schedule (ddmin): it removes chunks of
// events, then single events, as long as the same invariant still breaks,
// and returns the shortest failing schedule it found. budget bounds the
// replays.
func Shrink(r Result, o Options, budget int) Result {
	o.Logger = nil
	return shrinkWith(r, budget, func(events []Event) Result { return Play(r.Seed, events, o) })
}

// shrinkWith is Shrink for any world: play replays r's seed with events.
func shrinkWith(r Result, budget int, play func(events []Event) Result) Result {
	want := class(r)
	best := r
	// Events after the one that broke cannot matter.
	if last := r.Violations[0].Event; last >= 0 && last < len(r.Events) {
		if cut := play(r.Events[:last+1]); class(cut) == want {
			best = cut
		}
	}
	n := 2
	for len(best.Events) >= 2 && budget > 0 {
		chunk := (len(best.Events) + n - 1) / n
		reduced := false
		for start := 0; start < len(best.Events) && budget > 0; start += chunk {
			end := min(start+chunk, len(best.Events))
			cand := append(append([]Event(nil), best.Events[:start]...), best.Events[end:]...)
			budget--
			if res := play(cand); class(res) == want {
				best, reduced = res, true
				n = max(n-1, 2)
				break
			}
		}
		if !reduced {
			if chunk == 1 {
				break
			}
			n = min(n*2, len(best.Events))
		}
	}
	return best
}
