package metrics

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Commands wraps next so that every zfs and zpool command it runs is
// counted and timed, by pool, subcommand and result. With m nil it is next.
func (m *Metrics) Commands(next zfs.Runner) zfs.Runner {
	if m == nil {
		return next
	}
	return &countingRunner{next: next, m: m}
}

// countingRunner counts and times what next runs. It streams too (zfs
// send and receive, zfs.Streamer) when next does: the zfs package finds a
// Streamer by its method, so a wrapper without one would leave the
// transfer between nodes unable to send or receive anything whenever the
// endpoint is on.
type countingRunner struct {
	next zfs.Runner
	m    *Metrics
}

var _ zfs.Streamer = (*countingRunner)(nil)

func (r *countingRunner) Run(ctx context.Context, cmd string, args ...string) ([]byte, error) {
	start := time.Now()
	out, err := r.next.Run(ctx, cmd, args...)
	r.observe(start, cmd, args, err)
	return out, err
}

// Stream runs a streamed command through next's Streamer, counted and
// timed as Run's; when next cannot stream it fails as the zfs package
// does without a Streamer (zfs.ErrCannotStream).
func (r *countingRunner) Stream(ctx context.Context, cmd string, args []string, stdin io.Reader, stdout io.Writer) error {
	s, ok := r.next.(zfs.Streamer)
	if !ok {
		return fmt.Errorf("%s %s: %w (%T)", cmd, strings.Join(args[:min(len(args), 1)], ""), zfs.ErrCannotStream, r.next)
	}
	start := time.Now()
	err := s.Stream(ctx, cmd, args, stdin, stdout)
	r.observe(start, cmd, args, err)
	return err
}

func (r *countingRunner) observe(start time.Time, cmd string, args []string, err error) {
	r.m.commands.WithLabelValues(r.m.poolOfArgs(args), commandLabel(cmd), subcommandLabel(cmd, args), errResult(err)).
		Observe(time.Since(start).Seconds())
}

// poolOfArgs is the pool a command works on: its last operand's (every
// argv the zfs package builds ends with a dataset, snapshot or pool name),
// when that is a configured pool, else "" (zfs version).
func (m *Metrics) poolOfArgs(args []string) string {
	if len(args) < 2 {
		return ""
	}
	last := args[len(args)-1]
	if strings.HasPrefix(last, "-") {
		return ""
	}
	p := zfs.PoolOf(last)
	for _, parent := range m.cfg.Parents() {
		if zfs.PoolOf(parent) == p {
			return p
		}
	}
	return ""
}

func commandLabel(cmd string) string {
	switch cmd {
	case "zfs", "zpool":
		return cmd
	}
	return "other"
}

// subcommands are the subcommand label's values: what the zfs package
// runs. Anything else counts as "other", so the label stays bounded.
var subcommands = map[string]map[string]bool{
	"zfs": {"list": true, "get": true, "create": true, "clone": true, "destroy": true, "snapshot": true,
		"rollback": true, "rename": true, "set": true, "inherit": true, "hold": true, "release": true,
		"holds": true, "mount": true, "unmount": true, "version": true, "bookmark": true, "send": true, "receive": true},
	"zpool": {"list": true, "status": true, "get": true},
}

func subcommandLabel(cmd string, args []string) string {
	if len(args) > 0 && subcommands[cmd][args[0]] {
		return args[0]
	}
	return "other"
}
