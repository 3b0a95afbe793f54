package zfsexec

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

var _ zfs.Streamer = (*Runner)(nil)

// streamBuffer is the size of each copy buffer between a zfs process and
// the caller's reader or writer: the whole of what a Stream holds of the
// data. zfs send writes in records of up to 128 KiB (more with -L); a
// buffer of a few records keeps the pipe full without holding more.
const streamBuffer = 256 << 10

// streamPipe is the capacity Stream asks for each of a zfs process's
// pipes (Linux's default is 64 KiB; 1 MiB is what /proc/sys/fs/pipe-max-size
// allows by default). With 64 KiB, a read of zfs send's stdout returned
// at most 64 KiB however large the buffer, and each read went to the
// transfer's HTTP/2 stream as a frame of its own: four frames, four
// hand-offs between the handler and the connection, and four short TLS
// records for the frame headers per buffer. With 1 MiB the reads fill the
// buffer, and zfs can write on while a buffer is on its way
// (docs/performance.md). It is kernel memory, fixed per pipe.
const streamPipe = 1 << 20

// rawConner is a pipe end os/exec gives (an *os.File, or its wrapper).
type rawConner interface {
	SyscallConn() (syscall.RawConn, error)
}

// maxStderr bounds what is kept of a streaming command's stderr: zfs says
// what went wrong in a few lines, and a stream's stderr must not grow
// with the stream.
const maxStderr = 64 << 10

// Stream runs cmd with stdin copied into its standard input (nil: none)
// and its standard output copied into stdout (nil: discarded), stderr
// captured apart and classified like Run's. Memory does not grow with the
// stream: each side is copied through one fixed buffer.
//
// Runner.Timeout does not apply: a stream takes as long as its data, so
// only ctx bounds it; cancelling ctx kills the process. Stream returns once
// the process has exited and its output is copied. A stdin still being
// read then (the process stopped reading early) is closed if it is an
// io.Closer, which is how an HTTP body is unblocked; otherwise its copy is
// left to end on its own, after at most the WaitDelay Stream waits for it.
//
// A failure is an *Error. When the process failed, its Kind is what its
// stderr says; a stream cut on either side (stdin failed to read, stdout
// failed to write, ctx cancelled) with no more precise word from zfs is
// ErrInterrupted, the read or write error in Cause. A process that
// succeeded but whose output could not all be written is ErrInterrupted
// too: the stream did not arrive.
func (r *Runner) Stream(ctx context.Context, cmd string, args []string, stdin io.Reader, stdout io.Writer) error {
	path := cmd
	if p, ok := r.Paths[cmd]; ok && p != "" {
		path = p
	}
	c := exec.CommandContext(ctx, path, args...)
	c.WaitDelay = waitDelay
	c.Env = append(c.Environ(), "LC_ALL=C")
	stderr := &capped{max: maxStderr}
	c.Stderr = stderr

	var inPipe io.WriteCloser
	var outPipe io.ReadCloser
	var err error
	if stdin != nil {
		if inPipe, err = c.StdinPipe(); err != nil {
			return &zfs.Error{Cmd: cmd, Args: args, ExitCode: -1, Cause: err}
		}
	}
	if stdout != nil {
		if outPipe, err = c.StdoutPipe(); err != nil {
			return &zfs.Error{Cmd: cmd, Args: args, ExitCode: -1, Cause: err}
		}
	}
	for _, p := range []any{inPipe, outPipe} {
		if f, ok := p.(rawConner); ok {
			if err := widen(f); err != nil && r.Logger != nil {
				// The stream still flows, in smaller pieces.
				r.Logger.Debug("cannot widen a zfs pipe", "cmd", cmd, "error", err)
			}
		}
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		kind := error(nil)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			kind = zfs.ErrNotFound
		}
		return &zfs.Error{Cmd: cmd, Args: args, ExitCode: -1, Kind: kind, Cause: err}
	}

	// stdin goes in on a goroutine of its own; stdout comes out on this one.
	// The input copy ends when stdin is read to its end, fails, or the
	// process stops reading (its pipe is closed once Wait has returned).
	inDone := make(chan copyResult, 1)
	if stdin != nil {
		go func() {
			res := copyStream(inPipe, stdin)
			inPipe.Close()
			inDone <- res
		}()
	} else {
		inDone <- copyResult{}
	}
	var out copyResult
	if stdout != nil {
		out = copyStream(stdout, outPipe)
		if out.writeErr != nil {
			// Nobody takes the rest: drain it so zfs is not blocked on a
			// full pipe while it is being killed, and stop it.
			_ = c.Process.Kill()
			_, _ = io.Copy(io.Discard, outPipe)
		}
	}
	waitErr := c.Wait()
	in := finishInput(stdin, inDone)
	if r.Logger != nil {
		r.Logger.Trace("streamed", "cmd", cmd, "args", args, "duration", time.Since(start), "in_bytes", in.n,
			"out_bytes", out.n, "error", waitErr)
	}
	return streamError(ctx, cmd, args, stderr.String(), waitErr, in, out)
}

// waitDelay is how long Stream waits, once zfs has exited, for its pipes
// and for an input copy stuck in a read.
const waitDelay = 5 * time.Second

// finishInput waits for the input copy to end, closing stdin to unblock a
// read the process no longer needs, for at most waitDelay. A copy still
// stuck then is reported as a failed read.
func finishInput(stdin io.Reader, done <-chan copyResult) copyResult {
	select {
	case res := <-done:
		return res
	default:
	}
	if c, ok := stdin.(io.Closer); ok {
		_ = c.Close()
	}
	t := time.NewTimer(waitDelay)
	defer t.Stop()
	select {
	case res := <-done:
		return res
	case <-t.C:
		return copyResult{readErr: errors.New("reading the input stream did not end after the process exited")}
	}
}

// copyResult is one side's copy: bytes moved, and which end failed.
type copyResult struct {
	n                 int64
	readErr, writeErr error
}

// copyStream copies src into dst through one buffer, telling a failed
// read from a failed write.
func copyStream(dst io.Writer, src io.Reader) copyResult {
	buf := make([]byte, streamBuffer)
	var res copyResult
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			w, werr := dst.Write(buf[:n])
			res.n += int64(w)
			if werr == nil && w < n {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				res.writeErr = werr
				return res
			}
		}
		if rerr == io.EOF {
			return res
		}
		if rerr != nil {
			res.readErr = rerr
			return res
		}
	}
}

// streamError makes the result of a stream into nil or an *Error.
func streamError(ctx context.Context, cmd string, args []string, stderr string, waitErr error, in, out copyResult) error {
	// What cut the stream on our side: stdin unreadable, stdout
	// unwritable, or the context. A write into zfs's stdin that failed
	// because zfs had exited is zfs's own story, told by its exit; so is a
	// read of stdin that failed after zfs had read all it wanted and
	// exited well (finishInput closes stdin then).
	var cuts []error
	if in.readErr != nil && waitErr != nil {
		cuts = append(cuts, in.readErr)
	}
	if out.writeErr != nil {
		cuts = append(cuts, out.writeErr)
	}
	if out.readErr != nil {
		cuts = append(cuts, out.readErr)
	}
	if ctx.Err() != nil {
		cuts = append(cuts, ctx.Err())
	}
	if waitErr == nil && len(cuts) == 0 {
		return nil
	}
	var exitErr *exec.ExitError
	code := -1
	if errors.As(waitErr, &exitErr) {
		code = exitErr.ExitCode()
	}
	e := zfs.NewError(cmd, args, stderr, code)
	e.Cause = errors.Join(append([]error{waitErr}, cuts...)...)
	switch {
	case e.Kind != nil:
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		e.Kind = zfs.ErrTimeout
	case len(cuts) > 0:
		e.Kind = zfs.ErrInterrupted
	}
	return e
}

// capped keeps the first max bytes written to it; writes never fail, so
// a chatty process is never blocked or killed by its stderr.
type capped struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}
