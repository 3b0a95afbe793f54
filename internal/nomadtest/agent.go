package nomadtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

const (
	// stopGrace is how long Stop waits after SIGINT before killing, on an
	// idle machine (stretched by Config.Slowness).
	stopGrace = 30 * time.Second
	// pollInterval paces every wait in this package.
	pollInterval = 250 * time.Millisecond
	// cleanupTail is how many agent log lines a failed test prints at cleanup.
	cleanupTail = 200
	// startAttempts bounds retries after losing a race for a free port.
	startAttempts = 3
)

// errPortInUse marks a start that failed because another process took one of
// the ports between freePorts and the agent binding it.
var errPortInUse = errors.New("address already in use")

// Agent is one running (or stopped) Nomad agent, server and client in one
// process. Its methods are safe for concurrent use.
type Agent struct {
	cfg        Config
	configPath string
	logPath    string

	mu     sync.Mutex
	ports  ports
	proc   *process
	client *api.Client
	token  string
	nodeID string
	// runStart is the log file's size when the current run was launched.
	runStart int64
	// notes are remarks from start-up for the test log.
	notes []string
	// frozen: stopped with SIGSTOP (Freeze) and not resumed.
	frozen bool
}

// Start starts an agent and waits, up to cfg.StartTimeout, until its HTTP API
// answers, it is the raft leader, ACLs are bootstrapped (cfg.ACL) and its
// node is registered and "ready". It registers t.Cleanup to stop the agent
// (SIGINT, then kill), kill what it left running under its data dir, unmount
// what it mounted there, and print the log tail if the test failed.
//
// A start usually takes about 2 s. A node registers as "initializing" and
// turns "ready" at its first heartbeat, which Nomad staggers by up to 10 s,
// so some starts take up to 12 s; see keyringRace for another delay.
func Start(t testing.TB, cfg Config) *Agent {
	t.Helper()
	a, err := start(t, cfg)
	if err != nil {
		a.fatalf(t, "starting agent: %v", err)
	}
	return a
}

// start is Start without failing the test, so that StartCluster can start
// agents in goroutines (t.Fatal must be called from the test's own). It
// returns the agent even with an error, for its log path.
func start(t testing.TB, cfg Config) (*Agent, error) {
	cfg = cfg.withDefaults(t)
	dir := t.TempDir() // config file and log, apart from Nomad's data_dir
	a := &Agent{
		cfg:        cfg,
		configPath: filepath.Join(dir, "agent.hcl"),
		logPath:    filepath.Join(dir, "agent.log"),
	}
	t.Cleanup(func() { a.cleanup(t) })

	fresh := isEmptyDir(cfg.DataDir)
	choose := freePorts
	if cfg.choosePorts != nil {
		choose = cfg.choosePorts
	}
	for attempt := 1; ; attempt++ {
		p, err := choose()
		if err != nil {
			return a, err
		}
		a.mu.Lock()
		a.ports, a.client = p, nil
		a.mu.Unlock()

		began := time.Now()
		err = a.start(0)
		a.logNotes(t)
		if err == nil {
			what := "node " + a.NodeID()
			if cfg.ServerOnly {
				what = "server only"
			}
			t.Logf("nomadtest: agent %s ready in %s (%s, log %s)",
				a.Address(), time.Since(began).Round(100*time.Millisecond), what, a.logPath)
			return a, nil
		}
		if !errors.Is(err, errPortInUse) || !fresh || attempt == startAttempts {
			return a, err
		}
		// Another process won the race for a port. The failed run may have
		// written raft state naming the old rpc port, so start over clean.
		t.Logf("nomadtest: attempt %d: %v; retrying with new ports", attempt, err)
		_ = a.stop()
		if err := emptyDir(cfg.DataDir); err != nil {
			return a, fmt.Errorf("resetting data dir: %w", err)
		}
	}
}

// Restart stops the agent and starts it again with the same config, ports
// and data dir, so raft state, the node ID and client state (allocs to
// restore) are kept. It waits until the node has re-registered and is ready.
func (a *Agent) Restart(t testing.TB) {
	t.Helper()
	var minIndex uint64
	if a.running() && !a.cfg.ServerOnly {
		node, _, err := a.Client().Nodes().Info(a.NodeID(), nil)
		if err != nil {
			a.fatalf(t, "reading node before restart: %v", err)
		}
		minIndex = node.ModifyIndex
	}
	a.Stop(t)
	began := time.Now()
	err := a.start(minIndex)
	a.logNotes(t)
	if err != nil {
		a.fatalf(t, "restarting agent: %v", err)
	}
	t.Logf("nomadtest: agent %s restarted in %s", a.Address(), time.Since(began).Round(100*time.Millisecond))
}

// PID is the running agent's process ID, 0 when it is not running.
func (a *Agent) PID() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.proc == nil || a.proc.cmd.Process == nil {
		return 0
	}
	select {
	case <-a.proc.done:
		return 0
	default:
		return a.proc.cmd.Process.Pid
	}
}

// PluginConfig is the plugin's config block the agent runs with.
func (a *Agent) PluginConfig() string { return a.cfg.PluginConfig }

// RestartWithPluginConfig is Restart with the plugin's config block
// replaced, as an operator's edit and agent restart applies it.
func (a *Agent) RestartWithPluginConfig(t testing.TB, pluginConfig string) {
	t.Helper()
	a.cfg.PluginConfig = pluginConfig
	a.Restart(t)
}

// Stop interrupts the agent and waits for it to exit, killing it after 30s.
// Allocations keep running (a non-dev agent leaves them for restore), as do
// their mounts, until Restart or the test's cleanup. Stopping a stopped agent
// does nothing.
func (a *Agent) Stop(t testing.TB) {
	t.Helper()
	if err := a.stop(); err != nil {
		t.Logf("nomadtest: %v", err)
	}
}

// Client returns an API client for the agent, carrying the management token
// when ACLs are enabled.
func (a *Agent) Client() *api.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.client == nil {
		a.client = a.newClientLocked(a.token)
	}
	return a.client
}

// ClientWithToken returns an API client for the agent that sends token.
func (a *Agent) ClientWithToken(token string) *api.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.newClientLocked(token)
}

func (a *Agent) newClientLocked(token string) *api.Client {
	cfg := &api.Config{Address: a.addressLocked(), SecretID: token}
	if t := a.cfg.TLS; t != nil {
		cfg.TLSConfig = &api.TLSConfig{CACert: t.CAFile, ClientCert: t.CertFile, ClientKey: t.KeyFile}
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		// NewClient fails only on bad TLS settings: a test's own mistake.
		panic(fmt.Sprintf("nomadtest: api.NewClient: %v", err))
	}
	return c
}

// Address is the agent's HTTP address, e.g. "http://127.0.0.1:40123", or
// https with TLS.
func (a *Agent) Address() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addressLocked()
}

func (a *Agent) addressLocked() string {
	return fmt.Sprintf("%s://127.0.0.1:%d", a.cfg.scheme(), a.ports.HTTP)
}

// RPCAddr is the agent's RPC address, e.g. "127.0.0.1:40124": what a
// client-only agent's Config.Servers names.
func (a *Agent) RPCAddr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fmt.Sprintf("127.0.0.1:%d", a.ports.RPC)
}

// NodeID is the ID of the agent's client node.
func (a *Agent) NodeID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nodeID
}

// ManagementToken is the bootstrap token's secret, or "" without ACLs.
func (a *Agent) ManagementToken() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.token
}

// DataDir is the agent's data_dir.
func (a *Agent) DataDir() string { return a.cfg.DataDir }

// ConfigFile is the path of the generated agent config.
func (a *Agent) ConfigFile() string { return a.configPath }

// start writes the config, launches the agent and waits until it is ready
// and its node's ModifyIndex exceeds minIndex (a restart re-registers).
func (a *Agent) start(minIndex uint64) error {
	a.mu.Lock()
	p := a.ports
	a.mu.Unlock()
	if err := os.WriteFile(a.configPath, []byte(renderConfig(a.cfg, p)), 0o644); err != nil {
		return err
	}
	if err := a.launch(); err != nil {
		return err
	}
	return a.waitReady(minIndex)
}

func isEmptyDir(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) == 0
}

func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
