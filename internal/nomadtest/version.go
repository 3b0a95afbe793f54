package nomadtest

import (
	"fmt"
	"os/exec"
	"regexp"
	"sync"

	version "github.com/hashicorp/go-version"
)

// Versions where the agent's job specification changed under the tests.
var (
	// DisconnectBlock is the group's disconnect { lost_after, reconcile }
	// (Nomad 1.8). Before it, max_client_disconnect alone, whose reconnect
	// keeps the allocation of the better node score (reconcile
	// "best_score" in 1.8's terms).
	DisconnectBlock = version.Must(version.NewVersion("1.8.0"))
)

var agentVersions sync.Map // binary path -> *version.Version

// AgentVersion is the version `bin version` prints ("Nomad v1.6.2"),
// asked once per binary.
func AgentVersion(bin string) (*version.Version, error) {
	if v, ok := agentVersions.Load(bin); ok {
		return v.(*version.Version), nil
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s version: %w", bin, err)
	}
	v, err := parseAgentVersion(out)
	if err != nil {
		return nil, fmt.Errorf("%s version: %w", bin, err)
	}
	agentVersions.Store(bin, v)
	return v, nil
}

var versionLine = regexp.MustCompile(`(?m)^Nomad v(\d+\.\d+\.\d+\S*)`)

func parseAgentVersion(out []byte) (*version.Version, error) {
	m := versionLine.FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("no \"Nomad vX.Y.Z\" line in %q", out)
	}
	return version.NewVersion(string(m[1]))
}

// GroupDisconnect is a task group's stanza for allocations on a
// disconnected node: disconnect { lost_after, reconcile } on Nomad 1.8 and
// later, max_client_disconnect before. reconcile "" is Nomad's default,
// best_score, the only choice before 1.8: another is an error that names
// the version it needs.
func GroupDisconnect(agent *version.Version, lostAfter, reconcile string) (string, error) {
	if !agent.LessThan(DisconnectBlock) {
		s := fmt.Sprintf("disconnect {\n      lost_after = %q\n", lostAfter)
		if reconcile != "" {
			s += fmt.Sprintf("      reconcile  = %q\n", reconcile)
		}
		return s + "    }", nil
	}
	if reconcile != "" && reconcile != "best_score" {
		return "", fmt.Errorf("reconcile = %q needs Nomad %s (the disconnect block); the agent is %s", reconcile, DisconnectBlock, agent)
	}
	return fmt.Sprintf("max_client_disconnect = %q", lostAfter), nil
}
