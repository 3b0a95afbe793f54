package allocwatch

import (
	"context"
	"fmt"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
)

// discoverLoop finds the node ID, retrying with backoff until it succeeds
// or ctx ends. The agent starts its HTTP API after its plugins, and a fresh
// client registers its node a few seconds after that.
func (w *Watcher) discoverLoop(ctx context.Context, health *health) (string, error) {
	for attempt := 0; ; {
		id, err := w.discover(ctx)
		if err == nil {
			health.ok()
			return id, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		attempt++
		health.failed(err, attempt)
		if err := w.sleep(ctx, w.backoff(attempt)); err != nil {
			return "", err
		}
	}
}

// discover makes one attempt: the node ID from Config.NodeID,
// Config.ClientIDFile or /v1/agent/self, then GET /v1/node/<id> to confirm
// the node is registered. The node allocations endpoint answers 200 with
// an empty list for an unknown node ID, which would read as "every
// allocation is gone"; this check keeps a wrong or early ID from doing so.
// The confirmed ID is kept.
func (w *Watcher) discover(ctx context.Context) (string, error) {
	w.mu.Lock()
	known := w.nodeID
	w.mu.Unlock()
	if known != "" {
		return known, nil
	}

	var id, from string
	switch {
	case w.cfg.NodeID != "":
		id, from = w.cfg.NodeID, "config"
	case w.cfg.ClientIDFile != "":
		var err error
		if id, err = readClientIDFile(w.cfg.ClientIDFile); err != nil {
			return "", fmt.Errorf("%w: %w", errClientIDFile, err)
		}
		from = w.cfg.ClientIDFile
	default:
		self, err := w.src.AgentSelf(ctx)
		if err != nil {
			return "", err
		}
		id, from = self.Stats["client"]["node_id"], "/v1/agent/self"
		if !nomadapi.IsUUID(id) {
			return "", fmt.Errorf("%w: /v1/agent/self stats.client.node_id = %q; is the agent a client?", errNoClientNode, id)
		}
	}
	if _, err := w.src.Node(ctx, id); err != nil {
		return "", err
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.nodeID == "" {
		w.nodeID = id
		w.logger.Info("watching node", "node_id", id, "from", from)
	}
	return w.nodeID, nil
}
