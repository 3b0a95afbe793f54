package nomadtest

import (
	"fmt"
	"time"
)

// poll calls check every pollInterval until it reports done, the agent
// exits, or timeout passes. It returns nil when done, else an error naming
// the last state check described.
func (a *Agent) poll(timeout time.Duration, check func() (done bool, state string)) error {
	deadline := time.Now().Add(timeout)
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
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s; last state: %s", timeout, state)
		}
		a.sleep(pollInterval)
	}
}
