// Package zfsexec runs the real zfs and zpool executables: the process
// side of the zfs package's Runner seam. It is apart from package zfs so
// that what only reads zfs's types and rules (the slot model) links no
// process code.
package zfsexec

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os/exec"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Runner runs the real zfs and zpool executables.
type Runner struct {
	// Logger receives one debug line per command; nil means no logging.
	Logger hclog.Logger
	// Timeout bounds every command that has no earlier deadline in its
	// context. Zero means zfs.DefaultTimeout.
	Timeout time.Duration
	// Paths overrides the executable for a command name, e.g.
	// {"zfs": "/usr/sbin/zfs"}. Unset names are looked up on PATH.
	Paths map[string]string
}

var _ zfs.Runner = (*Runner)(nil)

// Run runs cmd with args, stdout and stderr kept apart. A command whose
// ctx is marked zfs.Background runs at the lowest CPU priority (nice 19).
func (r *Runner) Run(ctx context.Context, cmd string, args ...string) ([]byte, error) {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = zfs.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	path := cmd
	if p, ok := r.Paths[cmd]; ok && p != "" {
		path = p
	}
	c := exec.CommandContext(ctx, path, args...)
	// A zfs process stuck in the kernel may ignore SIGKILL; don't wait on its
	// pipes forever.
	c.WaitDelay = 5 * time.Second
	c.Env = append(c.Environ(), "LC_ALL=C") // stderr is classified by its English text
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr

	start := time.Now()
	err := c.Start()
	if err == nil {
		if zfs.IsBackground(ctx) {
			// After the start, so that it never keeps the command from
			// running: a few milliseconds at the normal priority at most.
			if perr := lower(c.Process.Pid); perr != nil && r.Logger != nil {
				r.Logger.Debug("cannot lower a background command's priority", "cmd", cmd, "error", perr)
			}
		}
		err = c.Wait()
	}
	if r.Logger != nil {
		r.Logger.Trace("ran", "cmd", cmd, "args", args, "duration", time.Since(start), "error", err)
	}
	if err == nil {
		return stdout.Bytes(), nil
	}

	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		e := zfs.NewError(cmd, args, stderr.String(), -1)
		e.Kind, e.Cause = zfs.ErrTimeout, ctx.Err()
		return nil, e
	case errors.As(err, &exitErr):
		e := zfs.NewError(cmd, args, stderr.String(), exitErr.ExitCode())
		e.Cause = err
		return nil, e
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
		return nil, &zfs.Error{Cmd: cmd, Args: args, ExitCode: -1, Kind: zfs.ErrNotFound, Cause: err}
	default:
		return nil, &zfs.Error{Cmd: cmd, Args: args, ExitCode: -1, Cause: err}
	}
}
