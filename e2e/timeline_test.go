//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// timeline records what the agents of a test cluster showed, as it
// happened: each node's allocations as its own agent answers the query the
// plugin's watcher makes (GET /v1/node/<id>/allocations, blocking, through
// that node's agent), and the nodes and allocations as the server has
// them. One line per change, with the answer's X-Nomad-Index: the record
// docs/lifecycle.md holds the simulation's model of a partition against.
type timeline struct {
	t0     time.Time
	jobs   map[string]bool
	nodes  map[string]string // node ID -> node1, node2...
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	lines []string
}

// timelineWait is the blocking queries' wait.
const timelineWait = 30 * time.Second

// startTimeline starts recording the allocations of jobs on c until the
// test ends; at cleanup the record goes to the test log and, with
// NDZ_E2E_LOG_DIR, to <test>.timeline.
func startTimeline(t *testing.T, c *testCluster, jobs ...string) *timeline {
	ctx, cancel := context.WithCancel(context.Background())
	tl := &timeline{t0: time.Now(), jobs: map[string]bool{}, nodes: map[string]string{}, cancel: cancel}
	for _, j := range jobs {
		tl.jobs[j] = true
	}
	for i, n := range c.Nodes {
		tl.nodes[n.NodeID()] = fmt.Sprintf("node%d", i+1)
	}
	for _, n := range c.Nodes {
		tl.run(func() { tl.watchNode(ctx, n.Agent) })
	}
	tl.run(func() { tl.watchServerNodes(ctx, c.Server) })
	tl.run(func() { tl.watchServerAllocs(ctx, c.Server) })
	t.Cleanup(func() {
		tl.stop()
		text := tl.String()
		t.Logf("what the agents showed (seconds since the start; the view; the answer's index):\n%s", text)
		if dir := os.Getenv("NDZ_E2E_LOG_DIR"); dir != "" {
			name := strings.ReplaceAll(t.Name(), "/", "_") + ".timeline"
			_ = os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644)
		}
	})
	return tl
}

func (tl *timeline) run(fn func()) {
	tl.wg.Add(1)
	go func() { defer tl.wg.Done(); fn() }()
}

func (tl *timeline) stop() {
	tl.cancel()
	tl.wg.Wait()
}

// mark records what the test did.
func (tl *timeline) mark(format string, a ...any) {
	tl.add("---", 0, fmt.Sprintf(format, a...))
}

func (tl *timeline) add(view string, index uint64, what string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	at := time.Since(tl.t0).Seconds()
	if index == 0 {
		tl.lines = append(tl.lines, fmt.Sprintf("%7.1f  %-12s %s", at, view, what))
		return
	}
	tl.lines = append(tl.lines, fmt.Sprintf("%7.1f  %-12s @%-5d %s", at, view, index, what))
}

// String is the record, one line per change.
func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return strings.Join(tl.lines, "\n")
}

// label names an allocation: its job, short ID and node.
func (tl *timeline) label(job, id, nodeID string) string {
	return fmt.Sprintf("%s %s on %s", job, id[:8], tl.nodes[nodeID])
}

// watchNode follows the node's allocations through its own agent, as the
// plugin's watcher does: while the agent is frozen the query waits, and
// the answer after the thaw is what the watcher resumes with.
func (tl *timeline) watchNode(ctx context.Context, a *nomadtest.Agent) {
	view := tl.nodes[a.NodeID()] + "'s agent"
	seen := map[string]string{}
	var index uint64
	lastErr := ""
	for ctx.Err() == nil {
		began := time.Now()
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: timelineWait}).WithContext(ctx)
		allocs, meta, err := a.Client().Nodes().Allocations(a.NodeID(), q)
		took := time.Since(began)
		if err != nil {
			if ctx.Err() == nil && err.Error() != lastErr {
				tl.add(view, 0, "error: "+err.Error())
			}
			lastErr = err.Error()
			sleepCtx(ctx, time.Second)
			continue
		}
		lastErr = ""
		if took > timelineWait+15*time.Second {
			tl.add(view, meta.LastIndex, fmt.Sprintf("(this answer took %s: the agent did not answer meanwhile)", took.Round(time.Second)))
		}
		if meta.LastIndex < index {
			tl.add(view, meta.LastIndex, fmt.Sprintf("index went back from %d", index))
		}
		index = meta.LastIndex
		present := map[string]bool{}
		for _, al := range allocs {
			if !tl.jobs[al.JobID] {
				continue
			}
			present[al.ID] = true
			st := fmt.Sprintf("%s/%s", al.ClientStatus, al.DesiredStatus)
			if seen[al.ID] != st {
				tl.add(view, index, fmt.Sprintf("%s: %s (modify %d)", tl.label(al.JobID, al.ID, al.NodeID), transition(seen[al.ID], st), al.ModifyIndex))
				seen[al.ID] = st
			}
		}
		for id := range seen {
			if !present[id] {
				tl.add(view, index, fmt.Sprintf("%s: no longer listed", id[:8]))
				delete(seen, id)
			}
		}
	}
}

// watchServerNodes follows the nodes' statuses on the server.
func (tl *timeline) watchServerNodes(ctx context.Context, server *nomadtest.Agent) {
	seen := map[string]string{}
	var index uint64
	for ctx.Err() == nil {
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: timelineWait}).WithContext(ctx)
		nodes, meta, err := server.Client().Nodes().List(q)
		if err != nil {
			sleepCtx(ctx, time.Second)
			continue
		}
		index = meta.LastIndex
		sort.Slice(nodes, func(i, j int) bool { return tl.nodes[nodes[i].ID] < tl.nodes[nodes[j].ID] })
		for _, n := range nodes {
			if seen[n.ID] != n.Status {
				tl.add("server", index, fmt.Sprintf("%s: %s", tl.nodes[n.ID], transition(seen[n.ID], n.Status)))
				seen[n.ID] = n.Status
			}
		}
	}
}

// watchServerAllocs follows the jobs' allocations on the server, which
// answers while a node's agent is frozen.
func (tl *timeline) watchServerAllocs(ctx context.Context, server *nomadtest.Agent) {
	seen := map[string]string{}
	var index uint64
	for ctx.Err() == nil {
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: timelineWait}).WithContext(ctx)
		allocs, meta, err := server.Client().Allocations().List(q)
		if err != nil {
			sleepCtx(ctx, time.Second)
			continue
		}
		index = meta.LastIndex
		sort.Slice(allocs, func(i, j int) bool { return allocs[i].CreateIndex < allocs[j].CreateIndex })
		for _, al := range allocs {
			if !tl.jobs[al.JobID] {
				continue
			}
			st := fmt.Sprintf("%s/%s", al.ClientStatus, al.DesiredStatus)
			if seen[al.ID] != st {
				tl.add("server", index, fmt.Sprintf("%s: %s (modify %d)", tl.label(al.JobID, al.ID, al.NodeID), transition(seen[al.ID], st), al.ModifyIndex))
				seen[al.ID] = st
			}
		}
	}
}

// transition renders a change of status: "new pending/run" or "a -> b".
func transition(from, to string) string {
	if from == "" {
		return "new " + to
	}
	return from + " -> " + to
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
