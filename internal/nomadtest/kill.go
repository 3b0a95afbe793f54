package nomadtest

import "testing"

// Kill ends the node as its death would: SIGKILL to the agent, then to
// every process it ran (its plugins, task executors, log collectors and
// tasks: reapUnder), none of them given a shutdown. The data dir (client
// state) is left as it was: Restart brings the node back as one that
// boots again and restores its allocations.
func (a *Agent) Kill(t testing.TB) {
	t.Helper()
	a.mu.Lock()
	p := a.proc
	a.proc = nil
	a.frozen = false
	a.mu.Unlock()
	if p == nil {
		a.fatalf(t, "killing the agent: it is not running")
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	for _, msg := range reapUnder(a.cfg.DataDir) {
		t.Logf("nomadtest: node killed: %s", msg)
	}
}
