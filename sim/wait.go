package sim

import (
	"context"
	"time"
)

// A Reserve waits in simulated time, bounded by reserve_timeout, and the
// node goes on meanwhile.

// sleep is the Manager's pause between Reserve retries: simulated time
// passes, and the node goes on meanwhile (tasks finish stopping; the
// client may pull and start other allocations, and the plugin's loop may
// settle what the watcher brings: nodeGoesOn). A context whose deadline
// (simulated) has passed ends the wait, as its timer would.
func (w *World) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if w.plugin != nil && w.plugin.run.dead {
		// The process is gone: nothing of it waits any more.
		w.stop(w.plugin)
		return context.Canceled
	}
	w.advance(d)
	if n := len(w.reserving); n > 0 && w.now.After(w.reserving[n-1].Add(reserveTO+reserveSlack)) {
		// plugin.Reserve bounds every Reserve by reserve_timeout.
		w.violate("liveness", "a Reserve is still waiting %s after it began: reserve_timeout (%s) does not end it", w.now.Sub(w.reserving[n-1]), reserveTO)
		return context.DeadlineExceeded
	}
	if dl, ok := ctx.Deadline(); ok && !w.now.Before(dl) {
		return context.DeadlineExceeded
	}
	w.nodeGoesOn()
	if w.blocked != nil {
		return context.Canceled // end this Reserve: what it blocks can then go on
	}
	return ctx.Err()
}

// nodeGoesOn is what the rest of the node does while a Reserve waits, as
// a real node does: the client makes another allocation's next step
// (pulls it, starts it, which is another Reserve, stops it, reports it),
// or the watcher brings news and the plugin's loop settles it (its steps
// skip the slots a Reserve holds). Not within itself, and never a step of
// an allocation being started, or a start on a slot a waiting Reserve
// holds (that Reserve would wait for the lock).
func (w *World) nodeGoesOn() {
	if w.goingOn || w.plugin == nil {
		return
	}
	w.goingOn = true
	from, outer := w.now, len(w.reserving)
	defer func() {
		w.goingOn = false
		// What the node did meanwhile ran while the waiting Reserves
		// waited, not after them: their reserve_timeout counts without it
		// (each returns at its next pause, its deadline passed).
		for i := range outer {
			w.reserving[i] = w.reserving[i].Add(w.now.Sub(from))
		}
	}()
	switch w.rng.IntN(3) {
	case 0:
		var ok []move
		for _, m := range w.moves() {
			a, _ := w.localGet(m.id)
			if w.starting[m.id] || a != nil && a.phase == pulled && w.holdsLocked(a) {
				continue
			}
			ok = append(ok, m)
		}
		if len(ok) > 0 {
			m := ok[w.rng.IntN(len(ok))]
			w.logf("  meanwhile, the client steps %s", m.id[len(m.id)-4:])
			w.meanwhile("the client's step of "+m.id[len(m.id)-4:], m.fn)
		}
	case 1:
		w.meanwhile("the watcher's news", w.watch)
	}
}

// blockedAfter is how long, in real time, what the node does while a
// Reserve waits may take before it counts as blocked by that Reserve: it
// takes milliseconds (its own waits are simulated).
const blockedAfter = 20 * time.Second

// meanwhile runs fn, something the node does while a Reserve waits, on a
// goroutine of its own, as the node would, while the waiting Reserve's
// goroutine waits for it: one runs at a time. If fn does not return, it is
// blocked by the waiting Reserve (a lock it holds across its wait), which
// on a real node would hold up every other task's start, and the plugin's
// loop, for up to reserve_timeout: a violation. fn is then joined once the
// Reserve has returned (reserve).
func (w *World) meanwhile(what string, fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(blockedAfter):
		w.violate("liveness", "%s, while a Reserve waited, did not go on: it waits for that Reserve", what)
		w.blocked = done
	}
}

// holdsLocked reports whether a names a slot a waiting Reserve holds.
func (w *World) holdsLocked(a *localAlloc) bool {
	for _, id := range a.deviceIDs() {
		if w.locked[id] > 0 {
			return true
		}
	}
	return false
}

// reserveSlack is how far past reserve_timeout a Reserve may still sleep:
// its last pause may end after the deadline.
const reserveSlack = 2 * time.Second

// simContext is a context that ends when simulated time reaches now plus
// timeout (sleep is the only place a Manager waits).
func (w *World) simContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.Background(), w.now.Add(timeout))
}
