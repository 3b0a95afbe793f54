package nomadtest

import (
	"fmt"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// waitReady polls until readyStep reports done, the agent exits, or
// StartTimeout (stretched by Config.Slowness) passes.
func (a *Agent) waitReady(minIndex uint64) error {
	deadline := NewDeadline(a.cfg.StartTimeout, a.cfg.Slowness)
	status := "waiting for the HTTP API"
	relaunched := false
	for {
		if err := a.exitError(); err != nil {
			// The whole run's log: after "address already in use" the
			// agent flushes tens of buffered lines before it exits.
			if strings.Contains(a.runLog(), errPortInUse.Error()) {
				err = fmt.Errorf("%w: %v", errPortInUse, err)
			}
			return fmt.Errorf("agent exited (%w) while %s", err, status)
		}
		st, err := a.readyStep(minIndex)
		if err != nil {
			return err
		}
		if st.done {
			return nil
		}
		status = st.status
		if st.unregistered && !relaunched && strings.Contains(a.runLog(), keyringRace) {
			// See keyringRace. The keyring is on disk now, so a second run
			// registers at once: about 3 s instead of 15–30 s.
			relaunched = true
			a.note("the client's first registration hit the keyring race; relaunching the agent")
			if err := a.stop(); err != nil {
				return err
			}
			if err := a.launch(); err != nil {
				return err
			}
			continue
		}
		if deadline.Passed() {
			return fmt.Errorf("agent not ready after %s: still %s", deadline, status)
		}
		a.sleep(pollInterval)
	}
}

// keyringRace is logged when a fresh agent's client sends Node.Register in
// the moment between the server winning its first election and creating its
// keyring. The client then waits registerRetryIntv, 15 s plus up to 15 s of
// stagger, before trying again (dev mode would retry after 1 s), and nothing
// from outside can hurry it. Measured on a 2-core machine running several
// agents at once: between one fresh start in ten and one in two.
const keyringRace = "keyring has not been initialized yet"

// readyState is one pass's verdict on the start-up conditions.
type readyState struct {
	done         bool
	status       string // the first unmet condition
	unregistered bool   // the API answers but the node is not registered
}

// readyStep makes one pass over the start-up conditions. It returns an
// error only when waiting cannot help.
func (a *Agent) readyStep(minIndex uint64) (readyState, error) {
	c := a.Client()
	leader, err := c.Status().Leader()
	if err != nil {
		return readyState{status: "waiting for the HTTP API: " + err.Error()}, nil
	}
	if leader == "" {
		return readyState{status: "waiting for a raft leader"}, nil
	}
	if a.cfg.ACL && a.ManagementToken() == "" {
		tok, _, err := c.ACLTokens().Bootstrap(nil)
		if err != nil {
			if strings.Contains(err.Error(), "bootstrap already done") {
				return readyState{}, fmt.Errorf("ACLs of data dir %s were bootstrapped before; the management token is unknown: %w", a.cfg.DataDir, err)
			}
			return readyState{status: "bootstrapping ACLs: " + err.Error()}, nil
		}
		a.mu.Lock()
		a.token, a.client = tok.SecretID, nil
		a.mu.Unlock()
		c = a.Client()
	}
	if a.cfg.ServerOnly {
		return readyState{done: true}, nil
	}
	nodes, _, err := c.Nodes().List(nil)
	if err != nil {
		return readyState{status: "listing nodes: " + err.Error()}, nil
	}
	a.mu.Lock()
	name := nodeName(a.ports)
	a.mu.Unlock()
	for _, n := range nodes {
		if n.Name != name {
			continue
		}
		switch {
		case n.ModifyIndex <= minIndex:
			return readyState{status: fmt.Sprintf("waiting for node %s to re-register (status %q)", n.ID, n.Status)}, nil
		case n.Status != api.NodeStatusReady:
			return readyState{status: fmt.Sprintf("waiting for node %s: status %q", n.ID, n.Status)}, nil
		}
		a.mu.Lock()
		a.nodeID = n.ID
		a.mu.Unlock()
		return readyState{done: true}, nil
	}
	return readyState{status: fmt.Sprintf("waiting for node %s to register", name), unregistered: true}, nil
}
