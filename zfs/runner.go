package zfs

import (
	"context"
	"io"
	"time"
)

// Runner runs one zfs or zpool command and returns its standard output. A
// failure is an *Error. It is the package's only seam to the outside world:
// zfsexec.Runner runs the real binaries, zfstest.Fake emulates them.
type Runner interface {
	Run(ctx context.Context, cmd string, args ...string) ([]byte, error)
}

// DefaultTimeout bounds a zfs command. A pool under heavy I/O can take tens of
// seconds for a destroy; a hung one (suspended pool, D-state) must not hang the
// plugin forever.
const DefaultTimeout = 2 * time.Minute

// Streamer runs one zfs command whose standard input or output is a
// stream of any size: zfs send writes one to stdout, zfs receive reads one
// from stdin. It holds no more of the stream in memory than a copy buffer.
// A failure is an *Error, classified like Run's; a stream cut on either
// side is ErrInterrupted unless zfs said something more precise. Runners
// that can stream implement it beside Run (zfsexec.Runner, zfstest.Fake),
// and Client finds it there.
type Streamer interface {
	Stream(ctx context.Context, cmd string, args []string, stdin io.Reader, stdout io.Writer) error
}
