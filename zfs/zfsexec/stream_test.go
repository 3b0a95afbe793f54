package zfsexec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// streamHelper is the test binary acting as a streaming zfs (see TestMain):
//
//	cat       copy stdin to stdout, like a receive piped into a send
//	emit      write $ZFS_TEST_BYTES bytes of a pattern to stdout, like a send
//	receive   read $ZFS_TEST_BYTES bytes of stdin and exit; fewer is an
//	          incomplete stream, reported as zfs receive reports it
//	hang      sleep until killed
func streamHelper(mode string) int {
	want, _ := strconv.ParseInt(os.Getenv("ZFS_TEST_BYTES"), 10, 64)
	switch mode {
	case "cat":
		if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
			return 1
		}
	case "emit":
		if _, err := io.CopyN(os.Stdout, pattern{}, want); err != nil {
			fmt.Fprintf(os.Stderr, "warning: cannot send 'tank/a@s': %v\n", err)
			return 1
		}
	case "receive":
		// zfs receive reads up to the stream's end record, then exits.
		n, _ := io.CopyN(io.Discard, os.Stdin, want)
		if n < want {
			fmt.Fprint(os.Stderr, "cannot receive new filesystem stream: checksum mismatch or incomplete stream.\n"+
				"Partially received snapshot is saved.\n")
			return 1
		}
	case "hang":
		time.Sleep(time.Hour)
	}
	return 0
}

// pattern is an endless reader of a fixed byte sequence.
type pattern struct{}

func (pattern) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i * 7)
	}
	return len(p), nil
}

// failingReader yields n bytes of pattern, then err.
type failingReader struct {
	n   int64
	err error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, r.err
	}
	if int64(len(p)) > r.n {
		p = p[:r.n]
	}
	n, _ := pattern{}.Read(p)
	r.n -= int64(n)
	return n, nil
}

// failingWriter takes n bytes, then fails.
type failingWriter struct{ n int64 }

func (w *failingWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > w.n {
		k := w.n
		w.n = 0
		return int(k), errors.New("peer went away")
	}
	w.n -= int64(len(p))
	return len(p), nil
}

// blockingBody is an input that ends only when closed, like an HTTP body
// whose trailers have not come yet.
type blockingBody struct {
	r      io.Reader
	once   sync.Once
	closed chan struct{}
}

func newBlockingBody(data []byte) *blockingBody {
	return &blockingBody{r: bytes.NewReader(data), closed: make(chan struct{})}
}

func (b *blockingBody) Read(p []byte) (int, error) {
	if n, _ := b.r.Read(p); n > 0 {
		return n, nil
	}
	<-b.closed
	return 0, errors.New("read on closed body")
}

func (b *blockingBody) Close() error { b.once.Do(func() { close(b.closed) }); return nil }

func helperRunner(t *testing.T, mode string, bytes int64) *Runner {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ZFS_TEST_STREAM", mode)
	t.Setenv("ZFS_TEST_BYTES", strconv.FormatInt(bytes, 10))
	return &Runner{Paths: map[string]string{"zfs": self}}
}

func TestStream(t *testing.T) {
	const size = 8 << 20
	want := sha256.New()
	_, _ = io.CopyN(want, pattern{}, size)
	cases := []struct {
		name     string
		mode     string
		stdin    func() io.Reader
		stdout   io.Writer
		ctx      func(t *testing.T) context.Context
		wantKind error
		wantIs   error // also in the chain (the cause)
		wantErr  string
		checkSum bool
	}{
		{name: "send streams all of stdout", mode: "emit", stdout: sha256.New(), checkSum: true},
		{name: "a pipe through both ends", mode: "cat", stdin: func() io.Reader { return io.LimitReader(pattern{}, size) },
			stdout: sha256.New(), checkSum: true},
		{name: "receive reads all of stdin", mode: "receive", stdin: func() io.Reader { return io.LimitReader(pattern{}, size) }},
		{name: "stdin failing mid-stream is an interrupted receive, zfs's words and the read error kept",
			mode: "receive", stdin: func() io.Reader { return &failingReader{n: 1 << 20, err: errors.New("connection reset")} },
			wantKind: zfs.ErrInterrupted, wantErr: "connection reset"},
		{name: "stdout failing mid-stream is an interrupted send", mode: "emit", stdout: &failingWriter{n: 1 << 20},
			wantKind: zfs.ErrInterrupted, wantErr: "peer went away"},
		{name: "cancelled mid-stream", mode: "hang", stdout: io.Discard,
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(200*time.Millisecond, cancel)
				return ctx
			},
			wantKind: zfs.ErrInterrupted, wantIs: context.Canceled},
		{name: "deadline mid-stream", mode: "hang", stdout: io.Discard,
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			},
			wantKind: zfs.ErrTimeout, wantIs: context.DeadlineExceeded},
		{name: "an input that blocks after zfs is done is closed, not waited on",
			mode: "receive", stdin: func() io.Reader { return newBlockingBody(make([]byte, size)) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := helperRunner(t, tc.mode, size)
			ctx := t.Context()
			if tc.ctx != nil {
				ctx = tc.ctx(t)
			}
			var stdin io.Reader
			if tc.stdin != nil {
				stdin = tc.stdin()
			}
			done := make(chan error, 1)
			go func() { done <- r.Stream(ctx, "zfs", []string{"receive", "-s", "tank/a"}, stdin, tc.stdout) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Stream did not return")
			}
			if tc.wantKind == nil {
				if err != nil {
					t.Fatal(err)
				}
				if tc.checkSum {
					if got := tc.stdout.(interface{ Sum([]byte) []byte }).Sum(nil); !bytes.Equal(got, want.Sum(nil)) {
						t.Fatal("the stream that came out is not the one that went in")
					}
				}
				return
			}
			var e *zfs.Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want a *zfs.Error", err)
			}
			if !errors.Is(err, tc.wantKind) {
				t.Errorf("kind %v, want %v (%v)", e.Kind, tc.wantKind, err)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("%v is not %v", err, tc.wantIs)
			}
			if tc.wantErr != "" && !strings.Contains(fmt.Sprint(e.Cause), tc.wantErr) {
				t.Errorf("cause %v does not say %q", e.Cause, tc.wantErr)
			}
		})
	}
}

// TestStreamMemoryDoesNotGrow streams 64 MiB through a zfs stand-in and
// checks what Stream allocated: one copy buffer per side and the process
// plumbing, whatever the stream's size. A Stream that buffered the data
// (a bytes.Buffer for stdout, io.ReadAll of stdin) allocates more than
// the whole stream.
func TestStreamMemoryDoesNotGrow(t *testing.T) {
	const size = 64 << 20
	r := helperRunner(t, "cat", size)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := r.Stream(t.Context(), "zfs", nil, io.LimitReader(pattern{}, size), io.Discard); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Fatalf("streaming %d MiB allocated %d KiB; it must not grow with the stream", size>>20, got>>10)
	}
}

func BenchmarkStream(b *testing.B) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	b.Setenv("ZFS_TEST_STREAM", "cat")
	r := &Runner{Paths: map[string]string{"zfs": self}}
	const size = 64 << 20
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Stream(b.Context(), "zfs", nil, io.LimitReader(pattern{}, size), io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
