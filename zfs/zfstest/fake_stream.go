package zfstest

import (
	"context"
	"errors"
	"io"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

var _ zfs.Streamer = (*Fake)(nil)

// Stream implements zfs.Streamer: zfs send writes the fake's stream to
// stdout, zfs receive reads one from stdin; any other command runs as with
// Run. Unlike zfsexec.Runner the fake holds a whole stream in memory (its
// streams are its tests' small files): it reads stdin to its end, or to
// the first failed read or ctx's end, which cuts the stream there, as a
// closed pipe cuts a real receive's; then it runs the command under the
// fake's lock and writes its output in chunks, stopping at a failed write
// or ctx's end. A blocked read of stdin is the caller's to unblock (an
// HTTP body is, when its request's context ends). Failures are
// classified as zfsexec.Runner's are: a cut stream with nothing more
// precise from zfs is zfs.ErrInterrupted.
func (f *Fake) Stream(ctx context.Context, cmd string, args []string, stdin io.Reader, stdout io.Writer) error {
	var input []byte
	var readErr error
	if stdin != nil {
		input, readErr = readAll(ctxReader{ctx: ctx, r: stdin})
	}
	res := f.exec(ctx, cmd, args, input, stdin != nil)
	if res.Err != nil {
		return &zfs.Error{Cmd: cmd, Args: args, ExitCode: -1, Cause: res.Err}
	}
	var writeErr error
	if stdout != nil && res.ExitCode == 0 {
		writeErr = writeChunks(ctx, stdout, []byte(res.Stdout))
	}
	var cuts []error
	if readErr != nil && res.ExitCode != 0 {
		cuts = append(cuts, readErr)
	}
	if writeErr != nil {
		cuts = append(cuts, writeErr)
	}
	if res.ExitCode == 0 && len(cuts) == 0 {
		return nil
	}
	code := res.ExitCode
	if res.ExitCode == 0 {
		code = -1 // a send whose reader went away dies of SIGPIPE
	}
	e := zfs.NewError(cmd, args, res.Stderr, code)
	e.Cause = errors.Join(cuts...)
	switch {
	case e.Kind != nil:
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		e.Kind = zfs.ErrTimeout
	case len(cuts) > 0:
		e.Kind = zfs.ErrInterrupted
	}
	return e
}

// ctxReader ends a read at ctx's end, between reads.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// writeChunks writes b in pieces, checking ctx between them, as a pipe
// to a slow reader would.
func writeChunks(ctx context.Context, w io.Writer, b []byte) error {
	const chunk = 256 << 10
	for len(b) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(chunk, len(b))
		if _, err := w.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
