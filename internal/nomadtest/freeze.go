package nomadtest

import (
	"fmt"
	"syscall"
	"testing"
)

// Freeze stops the agent process with SIGSTOP, and only it: its plugins,
// task executors, log collectors and tasks are processes of their own and
// run on. For the servers the node then falls silent, as one cut off by
// the network does: once its heartbeat TTL and the server's
// HeartbeatGrace have passed, the node is disconnected (its allocations of
// a group with a disconnect block go unknown, the others lost) or down.
// Its HTTP API does not answer meanwhile: a request to it waits, as one to
// an agent across a partition does, until Thaw or the caller's timeout.
//
// What keeps running can still be held up by the frozen agent: a plugin
// that writes more to its stderr than the pipe to the agent holds (64 KiB)
// blocks in that write until Thaw.
func (a *Agent) Freeze(t testing.TB) {
	t.Helper()
	if err := a.signal(syscall.SIGSTOP); err != nil {
		a.fatalf(t, "freezing the agent: %v", err)
	}
	a.mu.Lock()
	a.frozen = true
	a.mu.Unlock()
}

// Thaw resumes a frozen agent (SIGCONT). It goes on where it stopped: its
// next heartbeat reconnects the node, and it sends the servers what its
// allocations did meanwhile.
func (a *Agent) Thaw(t testing.TB) {
	t.Helper()
	if err := a.signal(syscall.SIGCONT); err != nil {
		a.fatalf(t, "thawing the agent: %v", err)
	}
	a.mu.Lock()
	a.frozen = false
	a.mu.Unlock()
}

// Frozen reports whether the agent is frozen (Freeze without Thaw).
func (a *Agent) Frozen() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.frozen
}

// signal sends sig to the agent process alone (not its process group,
// which holds its plugins and executors).
func (a *Agent) signal(sig syscall.Signal) error {
	pid := a.PID()
	if pid == 0 {
		return fmt.Errorf("agent not running")
	}
	return syscall.Kill(pid, sig)
}
