package nomadtest

import (
	"fmt"
	"time"
)

// Deadline is a wait's time limit on a machine whose speed changes: the
// timeout stretches by the largest slowness seen during the wait. A busy
// host (a second VM on the same cores, a CPU hog) makes everything the
// tests wait for slower by the same factor, so a fixed limit that holds on
// an idle machine would fail there: a job measured at 7 s idle took over
// 2 minutes beside a second e2e run.
type Deadline struct {
	start   time.Time
	timeout time.Duration
	slow    func() float64
	worst   float64
}

// NewDeadline starts a wait of timeout as measured on an idle machine.
// slowness reports how many times slower than that the machine runs now
// (nil, or values below 1, count as 1).
func NewDeadline(timeout time.Duration, slowness func() float64) *Deadline {
	d := &Deadline{start: time.Now(), timeout: timeout, slow: slowness, worst: 1}
	d.Passed()
	return d
}

// Passed reports whether the stretched timeout has passed; it samples the
// slowness, so call it once per poll.
func (d *Deadline) Passed() bool {
	if d.slow != nil {
		if s := d.slow(); s > d.worst {
			d.worst = s
		}
	}
	return time.Since(d.start) > d.limit()
}

func (d *Deadline) limit() time.Duration { return time.Duration(float64(d.timeout) * d.worst) }

// String says how long the wait was allowed, for failure messages.
func (d *Deadline) String() string {
	if d.worst <= 1 {
		return d.timeout.String()
	}
	return fmt.Sprintf("%s (%s, stretched x%.1f: the machine ran up to that much slower)",
		d.limit().Round(time.Second), d.timeout, d.worst)
}

// poll calls check every pollInterval until it reports done, the agent
// exits, or timeout (stretched by Config.Slowness) passes. It returns nil
// when done, else an error naming the last state check described.
func (a *Agent) poll(timeout time.Duration, check func() (done bool, state string)) error {
	deadline := NewDeadline(timeout, a.cfg.Slowness)
	state := "not checked yet"
	for {
		if err := a.exitError(); err != nil {
			return fmt.Errorf("agent not running (%v); last state: %s", err, state)
		}
		done, s := check()
		if done {
			return nil
		}
		state = s
		if deadline.Passed() {
			return fmt.Errorf("timed out after %s; last state: %s", deadline, state)
		}
		a.sleep(pollInterval)
	}
}
