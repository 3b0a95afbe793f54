package allocwatch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
)

const (
	// DefaultMinInterval is the least time between two queries of Run. It
	// only merges bursts: a change that lands within it waits for the rest
	// of it. 200 ms is the Nomad client's own batching of allocation
	// updates to the servers (client.allocSyncIntv), so a node's answer
	// cannot usefully change faster, and it still bounds Run to five
	// queries a second under any churn. It was 1 s, most of the latency
	// between a batch task's end and its release: such a task's updates
	// (running, then complete) come within a second of each other.
	DefaultMinInterval = 200 * time.Millisecond
	// DefaultWaitTime bounds one blocking query (Nomad caps it at 5m,
	// MaxBlockingRPCQueryTime, and adds up to 1/16 of jitter). It also
	// bounds how long a deletion can go unseen: Nomad answers the node's
	// query with the highest ModifyIndex of the allocations left, so when
	// the newest one is purged or collected (`nomad system gc` right after
	// a stop the watcher had not heard yet) the index goes down and the
	// blocked query is not answered until its wait runs out; the slot its
	// holder had stays held until then (the simulation's seed 6003880).
	// One minute costs an idle node one answer a minute.
	DefaultWaitTime = time.Minute
	// ResyncEvery is the longest Run goes without delivering a snapshot
	// while the API answers, so consumers can apply time-based rules.
	ResyncEvery = 5 * time.Minute
)

// Config says how to reach this node's Nomad agent and which node to
// watch. The connection (nomadapi.Config) falls back to the NOMAD_*
// environment; its Address must be the agent of this node: RunningLocally
// asks its client.
type Config struct {
	nomadapi.Config
	// NodeID, if set, skips discovery. Otherwise the ID is read from
	// ClientIDFile if set (the client's "<data_dir>/client/client-id"),
	// else from the agent's /v1/agent/self (stats.client.node_id, which
	// needs agent:read).
	NodeID       string
	ClientIDFile string
	// MinInterval is the least time between two queries of Run (default
	// 200ms). WaitTime bounds each blocking query (default 1m).
	MinInterval, WaitTime time.Duration
}

// Validate checks the fields that can be checked without the network: the
// connection's (nomadapi.Config.Validate), then the watcher's. Each error
// names the field and its value. The files must be readable now, except
// ClientIDFile: the client writes it only after the agent has loaded its
// plugins, so a missing one is fine.
func (c Config) Validate() error {
	errs := []error{c.Config.Validate()}
	if c.NodeID != "" && !nomadapi.IsUUID(c.NodeID) {
		errs = append(errs, fmt.Errorf("NodeID %q is not a UUID", c.NodeID))
	}
	if c.ClientIDFile != "" {
		if err := nomadapi.CheckFile(c.ClientIDFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("ClientIDFile: %w", err))
		}
	}
	if c.MinInterval < 0 {
		errs = append(errs, fmt.Errorf("MinInterval %s is negative", c.MinInterval))
	}
	if c.WaitTime < 0 {
		errs = append(errs, fmt.Errorf("WaitTime %s is negative", c.WaitTime))
	}
	return errors.Join(errs...)
}

// withDefaults fills the durations.
func (c Config) withDefaults() Config {
	if c.MinInterval == 0 {
		c.MinInterval = DefaultMinInterval
	}
	if c.WaitTime == 0 {
		c.WaitTime = DefaultWaitTime
	}
	return c
}

// readClientIDFile reads the node ID the Nomad client wrote.
func readClientIDFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if !nomadapi.IsUUID(id) {
		return "", fmt.Errorf("%s holds %q, not a node ID", path, id)
	}
	return id, nil
}
