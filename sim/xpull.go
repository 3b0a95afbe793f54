package sim

import (
	"context"
	"time"
)

// A node's pulls (hooks/migrate.go: one goroutine per copy, asking the
// other node for increments until it holds the final one) run on
// goroutines of their own, in lock step with the world: each starts when
// the world hands it its first turn, and gives the turn back when it
// pauses (the Manager's sleep) or ends. Only one goroutine runs at a time,
// so a seed replays exactly.

// xpull is one pull's goroutine.
type xpull struct {
	p     *xplugin
	start chan struct{} // closed at its first turn
	parks chan *xpark
	done  chan struct{}
	begun bool
	// at is where it pauses; nil before its first turn and once it ended.
	at *xpark
}

// xpark is one pause of a pull.
type xpark struct {
	until time.Time
	wake  chan struct{}
	// early is closed when the pause's context ends before until (the
	// pull stopped, or its pause between increments cut short by a
	// Reserve that waits for a copy: hooks' kick): the pull is due at
	// once, and still waits for its turn.
	early chan struct{}
}

// cut reports whether the pause's context ended early.
func (pk *xpark) cut() bool {
	select {
	case <-pk.early:
		return true
	default:
		return false
	}
}

// maxPullTurns bounds the turns one pull takes at a time: a pull that
// never pauses is a bug.
const maxPullTurns = 50

// spawn is the Manager's way to start a pull (hooks.Simulation.Spawn).
func (p *xplugin) spawn(fn func()) {
	x := &xpull{p: p, start: make(chan struct{}), parks: make(chan *xpark), done: make(chan struct{})}
	p.pulls = append(p.pulls, x)
	go func() {
		defer close(x.done)
		<-x.start
		fn()
	}()
}

// ended reports whether the pull's goroutine has returned.
func (x *xpull) ended() bool {
	select {
	case <-x.done:
		return true
	default:
		return false
	}
}

// due reports whether the pull has something to do now.
func (x *xpull) due(now time.Time) bool {
	return !x.ended() && (!x.begun || x.at != nil && (!now.Before(x.at.until) || x.at.cut()))
}

// takeTurn hands the pull the turn and takes it back once it pauses or
// ends. A pull that does neither waits for a lock held across a wait: the
// world cannot go on.
func (w *XWorld) takeTurn(x *xpull) {
	w.turn = x
	defer func() { w.turn = nil }()
	if !x.begun {
		x.begun = true
		close(x.start)
	} else {
		close(x.at.wake)
	}
	select {
	case x.at = <-x.parks:
	case <-x.done:
		x.at = nil
	case <-time.After(blockedAfter):
		w.violate("liveness", "a pull of %s neither pauses nor ends: it waits for something the world holds", x.p.n.name)
		w.broken = true
	}
}

// park is a pull's pause, on its goroutine: it hands the turn back and
// waits for the next, or for its end.
//
// A pause whose context ends early still waits for the world's turn
// (due at once): the pull runs only in its turn, whether it then ends
// (stopped) or goes on (a pause cut short).
func (x *xpull) park(ctx context.Context, until time.Time) error {
	pk := &xpark{until: until, wake: make(chan struct{}), early: make(chan struct{})}
	select {
	case x.parks <- pk:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-pk.wake:
	case <-ctx.Done():
		close(pk.early)
		<-pk.wake
	}
	return ctx.Err()
}

// runPulls gives every due pull of both nodes its turns, in the order they
// started.
func (w *XWorld) runPulls() {
	for _, n := range w.nodes {
		n.runPulls()
	}
}

func (n *xnode) runPulls() {
	p := n.p
	if p == nil {
		return
	}
	for i := 0; i < len(p.pulls) && !n.w.broken; i++ {
		x := p.pulls[i]
		for turns := 0; x.due(n.w.now) && !n.w.broken; turns++ {
			if turns == maxPullTurns {
				n.w.violate("liveness", "a pull of %s took %d turns without time passing", n.name, maxPullTurns)
				n.w.broken = true
				return
			}
			n.w.takeTurn(x)
			if p.run.dead || n.p != p {
				return
			}
		}
	}
	n.runLoop()
	if n.p != p {
		return
	}
	live := p.pulls[:0]
	for _, x := range p.pulls {
		if !x.ended() {
			live = append(live, x)
		}
	}
	p.pulls = live
}

// livePulls counts the pulls that have not ended.
func (n *xnode) livePulls() int {
	if n.p == nil {
		return 0
	}
	c := 0
	for _, x := range n.p.pulls {
		if !x.ended() {
			c++
		}
	}
	return c
}

// drainPulls lets every pull of a stopped plugin end: its context is
// cancelled, so each returns at once (those not begun, at their first
// turn).
func (p *xplugin) drainPulls() {
	all := p.pulls
	if p.loop != nil {
		all = append(all, p.loop)
	}
	for _, x := range all {
		switch {
		case !x.begun:
			x.begun = true
			close(x.start)
		case x.at != nil:
			close(x.at.wake) // its context is cancelled: it ends
			x.at = nil
		}
		select {
		case <-x.done:
		case <-time.After(blockedAfter):
			p.n.w.violate("harness", "a pull of a stopped plugin on %s does not end", p.n.name)
			p.n.w.broken = true
			return
		}
	}
	p.pulls, p.loop = nil, nil
}

// sleep is the Manager's pause. In a pull's turn it parks the pull. On
// the world's goroutine (a Reserve's wait), simulated time passes and both
// nodes go on meanwhile: kills finish, passes run (as the watcher's news
// and the Reserve's Trigger make the plugin's loop run), pulls take their
// turns.
func (w *XWorld) sleep(p *xplugin, ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.run.dead {
		return context.Canceled
	}
	if x := w.turn; x != nil {
		return x.park(ctx, w.now.Add(d))
	}
	w.advance(d)
	if w.reserving != nil && w.now.After(w.reserveStart.Add(reserveTO+xMigrateTimeout+reserveSlack)) {
		w.violate("liveness", "a Reserve on %s is still waiting %s after it began", w.reserving.name, w.now.Sub(w.reserveStart))
		return context.DeadlineExceeded
	}
	if dl, ok := ctx.Deadline(); ok && !w.now.Before(dl) {
		return context.DeadlineExceeded
	}
	if w.reserving != nil {
		w.meanwhile()
	}
	if w.blocked != nil || p.run.dead {
		return context.Canceled
	}
	return ctx.Err()
}

// meanwhile is what both nodes do while a Reserve waits: the plugins'
// loops pass every few seconds (the Reserve's own node's on a goroutine,
// since its slots' locks are the Reserve's: a pass that waits for them is
// a liveness violation), the clients report, and the pulls go on.
func (w *XWorld) meanwhile() {
	for _, n := range w.nodes {
		if n.p == nil || n.p.run.dead || w.now.Sub(n.lastPass) < 5*time.Second {
			continue
		}
		if n != w.reserving {
			n.pass(false)
			continue
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			n.pass(false)
		}()
		select {
		case <-done:
		case <-time.After(blockedAfter):
			w.violate("liveness", "a pass on %s, while a Reserve there waited, did not go on: it waits for that Reserve", n.name)
			w.blocked = done
			return
		}
	}
	for _, n := range w.nodes {
		n.goOn()
	}
	w.runPulls()
}
