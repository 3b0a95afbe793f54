package zfs

import (
	"context"
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
