package zfstest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfsexec"
)

// sendScenario replays the start of capture-send.sh: tank/xfer/src with
// files, snapshots s1, s2, s3 and bookmark b1 of s1.
func sendScenario(t *testing.T) *Fake {
	t.Helper()
	f := newFake(t)
	mustRun(t, f, "zfs", "set", "mountpoint=/tank", "tank")
	mustRun(t, f, "zfs", "create", "tank/xfer")
	mustRun(t, f, "zfs", "create", "tank/xfer/src")
	src := filepath.Join(root(f), "tank/xfer/src")
	writeFile(t, filepath.Join(src, "a"), strings.Repeat("a", 8<<10))
	mustRun(t, f, "zfs", "snapshot", "tank/xfer/src@s1")
	mustRun(t, f, "zfs", "bookmark", "tank/xfer/src@s1", "tank/xfer/src#b1")
	writeFile(t, filepath.Join(src, "b"), strings.Repeat("b", 2<<10))
	mustRun(t, f, "zfs", "snapshot", "tank/xfer/src@s2")
	writeFile(t, filepath.Join(src, "c"), strings.Repeat("c", 1<<10))
	mustRun(t, f, "zfs", "snapshot", "tank/xfer/src@s3")
	return f
}

// send runs zfs send args on f and returns the stream.
func send(t *testing.T, f *Fake, args ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := f.Stream(t.Context(), "zfs", append([]string{"send"}, args...), nil, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// receive pipes stream into zfs receive args on f: the Result as a
// command, for comparison with a capture.
func receive(f *Fake, stream []byte, args ...string) Result {
	return f.exec(context.Background(), "zfs", append([]string{"receive"}, args...), stream, false)
}

// tokenRE is what differs between a real token and the fake's.
var tokenRE = regexp.MustCompile(`zfs send -t 1-[0-9a-f-]+`)

// TestCaptureSendErrors replays capture-send.sh's errors on the fake: the
// same messages and exit codes as OpenZFS 2.1.11.
func TestCaptureSendErrors(t *testing.T) {
	f := sendScenario(t)
	s1 := send(t, f, "tank/xfer/src@s1")
	if r := receive(f, s1, "-s", "-u", "-o", "canmount=noauto", "-o", "nomad-device-zfs:owner=demo", "tank/xfer/dst"); r.ExitCode != 0 {
		t.Fatalf("receive: %s", r.Stderr)
	}
	if r := receive(f, send(t, f, "-i", "tank/xfer/src#b1", "tank/xfer/src@s2"), "-s", "-u", "tank/xfer/dst"); r.ExitCode != 0 {
		t.Fatalf("incremental receive: %s", r.Stderr)
	}
	i23 := send(t, f, "-i", "tank/xfer/src@s2", "tank/xfer/src@s3")
	i12 := send(t, f, "-i", "tank/xfer/src@s1", "tank/xfer/src@s2")
	tests := []struct {
		name  string
		setup func()
		run   func() Result
	}{
		{name: "bookmark-exists", run: func() Result { return try(f, "zfs", "bookmark", "tank/xfer/src@s1", "tank/xfer/src#b1") }},
		{name: "err-recv-exists", run: func() Result { return receive(f, s1, "-s", "-u", "tank/xfer/dst") }},
		{name: "err-recv-incr-mismatch", run: func() Result { return receive(f, i23, "-s", "-u", "tank/xfer/other-not-there") }},
		{name: "recv-base-only", run: func() Result { return receive(f, s1, "-s", "-u", "tank/xfer/dst2") }},
		{name: "err-recv-incr-mismatch2", run: func() Result { return receive(f, i23, "-s", "-u", "tank/xfer/dst2") }},
		{name: "err-recv-snap-exists", run: func() Result { return receive(f, i12, "-s", "-u", "tank/xfer/dst") }},
		{name: "err-recv-modified", setup: func() {
			mustRun(t, f, "zfs", "mount", "tank/xfer/dst2")
			writeFile(t, filepath.Join(root(f), "tank/xfer/dst2/modified"), "x\n")
			mustRun(t, f, "zfs", "unmount", "tank/xfer/dst2")
		}, run: func() Result { return receive(f, i12, "-s", "-u", "tank/xfer/dst2") }},
		{name: "err-recv-no-parent", run: func() Result { return receive(f, s1, "-s", "-u", "tank/xfer/missing/child") }},
		{name: "err-recv-garbage", run: func() Result { return receive(f, bytes.Repeat([]byte{0xa5}, 4096), "-s", "-u", "tank/xfer/garbage") }},
		{name: "err-recv-empty", run: func() Result { return receive(f, nil, "-s", "-u", "tank/xfer/empty") }},
		{name: "err-send-no-snap", run: func() Result { return try(f, "zfs", "send", "tank/xfer/src@nope") }},
		{name: "err-send-no-fs", run: func() Result { return try(f, "zfs", "send", "tank/xfer/nope@s1") }},
		{name: "err-send-bad-from", run: func() Result { return try(f, "zfs", "send", "-i", "@s3", "tank/xfer/src@s1") }},
		{name: "err-send-from-missing", run: func() Result { return try(f, "zfs", "send", "-i", "@nope", "tank/xfer/src@s2") }},
		{name: "err-send-I-bookmark", run: func() Result { return try(f, "zfs", "send", "-I", "tank/xfer/src#b1", "tank/xfer/src@s3") }},
		{name: "err-recv-interrupted", run: func() Result {
			return receive(f, s1[:len(s1)/2], "-s", "-u", "-o", "canmount=noauto", "-o", "nomad-device-zfs:owner=demo", "tank/xfer/part")
		}},
		{name: "get-partial-props", run: func() Result {
			return try(f, "zfs", "get", "-H", "-p", "-o", "name,property,value,source", "canmount,nomad-device-zfs:owner", "tank/xfer/part")
		}},
		{name: "err-recv-partial-exists", run: func() Result { return receive(f, s1, "-s", "-u", "tank/xfer/part") }},
		{name: "err-recv-abort-missing", run: func() Result { return try(f, "zfs", "receive", "-A", "tank/xfer/nope") }},
		{name: "err-send-token-corrupt", run: func() Result { return try(f, "zfs", "send", "-t", "1-0123456789-40-789c") }},
		{name: "err-send-token-garbage", run: func() Result { return try(f, "zfs", "send", "-nvP", "-t", "not-a-token") }},
		{name: "list-bookmarks", run: func() Result {
			return try(f, "zfs", "list", "-H", "-p", "-r", "-t", "bookmark", "-o", "name,guid,createtxg", "tank/xfer")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
			}
			want := readCapture(t, tc.name)
			r := tc.run()
			got, wantErr := tokenRE.ReplaceAllString(r.Stderr, "zfs send -t TOKEN"), tokenRE.ReplaceAllString(want.stderr, "zfs send -t TOKEN")
			gotOut, wantOut := r.Stdout, want.stdout
			if tc.name == "get-partial-props" {
				wantOut = strings.Join(lines(wantOut)[:2], "\n") + "\n" // the capture also asks for "inconsistent"
			}
			if tc.name == "list-bookmarks" {
				gotOut, wantOut = shapeColumns(gotOut, 1, 2), shapeColumns(wantOut, 1, 2)
			}
			if r.ExitCode != want.rc || got != wantErr || gotOut != wantOut {
				t.Errorf("rc=%d stdout %q stderr:\n%s\nwant rc=%d stdout %q stderr:\n%s", r.ExitCode, gotOut, got, want.rc, wantOut, wantErr)
			}
		})
	}
}

// shapeColumns replaces the given tab-separated columns by their shape.
func shapeColumns(out string, cols ...int) string {
	var b strings.Builder
	for _, l := range lines(out) {
		f := strings.Split(l, "\t")
		for _, c := range cols {
			if c < len(f) {
				f[c] = shape(f[c])
			}
		}
		b.WriteString(strings.Join(f, "\t") + "\n")
	}
	return b.String()
}

// TestTransferThroughClients moves data between two fakes (two nodes)
// through zfs.Client, as a transfer does: a full send, an incremental
// from a bookmark, an interruption resumed with the receiver's token, a
// forged token decoded for what it names.
func TestTransferThroughClients(t *testing.T) {
	ctx := t.Context()
	a, b := sendScenario(t), newFake(t)
	mustRun(t, b, "zfs", "create", "tank/in")
	ca, cb := zfs.NewClient(a), zfs.NewClient(b)
	pipe := func(o zfs.SendOptions, ro zfs.ReceiveOptions, cut int) error {
		var stream bytes.Buffer
		if err := ca.Send(ctx, o, &stream); err != nil {
			t.Fatal(err)
		}
		r := io.Reader(&stream)
		if cut > 0 {
			r = io.MultiReader(io.LimitReader(&stream, int64(cut)), errReader{errors.New("connection reset by peer")})
		}
		return cb.Receive(ctx, ro, r)
	}
	into := zfs.ReceiveOptions{Target: "tank/in/x", Resumable: true, NoMount: true,
		Props: map[string]string{"canmount": "noauto", "nomad-device-zfs:owner": "tank/in/x"}}

	// Full, cut halfway: the partial state and its token.
	err := pipe(zfs.SendOptions{Snapshot: "tank/xfer/src@s1"}, into, 6<<10)
	if !errors.Is(err, zfs.ErrInterrupted) || !strings.Contains(err.Error(), "incomplete stream") {
		t.Fatalf("cut receive: %v", err)
	}
	token, err := cb.ResumeToken(ctx, "tank/in/x")
	if err != nil || token == "" {
		t.Fatalf("token %q, %v", token, err)
	}
	// The sender decodes it and checks it against what it meant to send.
	tok, err := ca.DecodeResumeToken(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	s1 := guidOf(t, a, "tank/xfer/src@s1")
	want := zfs.ExpectFor(zfs.SendOptions{Snapshot: "tank/xfer/src@s1"}, s1, 0, false)
	if err := zfs.CheckResumeToken(tok, want); err != nil {
		t.Fatalf("the genuine token was refused: %v", err)
	}
	if tok.Bytes == 0 || tok.Size == 0 {
		t.Fatalf("token %+v: no progress or estimate", tok)
	}
	// Resumed, it completes with the sent snapshot's guid and files.
	var rest bytes.Buffer
	if err := ca.SendResume(ctx, token, false, &rest); err != nil {
		t.Fatal(err)
	}
	if err := cb.Receive(ctx, into, &rest); err != nil {
		t.Fatalf("resumed receive: %v", err)
	}
	if g := guidOf(t, b, "tank/in/x@s1"); g != s1 {
		t.Fatalf("received snapshot guid %d, sent %d", g, s1)
	}
	if tok, _ := cb.ResumeToken(ctx, "tank/in/x"); tok != "" {
		t.Fatalf("a complete receive left token %q", tok)
	}
	mustRun(t, b, "zfs", "mount", "tank/in/x")
	if got := readFile(t, filepath.Join(root(b), "tank/in/x/a")); got != strings.Repeat("a", 8<<10) {
		t.Fatal("the received file differs")
	}
	if out := mustRun(t, b, "zfs", "get", "-H", "-o", "value", "canmount,nomad-device-zfs:owner", "tank/in/x"); out != "noauto\ntank/in/x\n" {
		t.Fatalf("received properties %q", out)
	}
	mustRun(t, b, "zfs", "unmount", "tank/in/x")

	// Incremental from the bookmark: the newest files arrive.
	if err := pipe(zfs.SendOptions{Snapshot: "tank/xfer/src@s3", From: "tank/xfer/src#b1"}, into, 0); err != nil {
		t.Fatalf("incremental: %v", err)
	}
	mustRun(t, b, "zfs", "mount", "tank/in/x")
	if got := readFile(t, filepath.Join(root(b), "tank/in/x/c")); got != strings.Repeat("c", 1<<10) {
		t.Fatal("the incremental's file differs")
	}

	// A forged token decodes to what it names, and the check refuses it.
	forged := EncodeResumeToken(zfs.ResumeToken{ToName: "tank/xfer/src@s3", ToGUID: guidOf(t, a, "tank/xfer/src@s3"), Bytes: 1})
	ftok, err := ca.DecodeResumeToken(ctx, forged)
	if err != nil {
		t.Fatal(err)
	}
	if err := zfs.CheckResumeToken(ftok, want); !errors.Is(err, zfs.ErrResumeTokenRefused) {
		t.Fatalf("a forged token passed: %v", err)
	}
	// Aborting leaves nothing to resume; aborting again is success.
	if err := pipe(zfs.SendOptions{Snapshot: "tank/xfer/src@s1"}, zfs.ReceiveOptions{Target: "tank/in/y", Resumable: true, NoMount: true}, 100); !errors.Is(err, zfs.ErrInterrupted) {
		t.Fatal(err)
	}
	for range 2 {
		if err := cb.ReceiveAbort(ctx, "tank/in/y"); err != nil {
			t.Fatal(err)
		}
	}
	if r := try(b, "zfs", "list", "tank/in/y"); r.ExitCode == 0 {
		t.Fatal("an aborted full receive left its dataset")
	}
}

// TestStreamCutByContext: a receive whose context ends mid-stream keeps
// what came, like a killed zfs receive -s.
func TestStreamCutByContext(t *testing.T) {
	a, b := sendScenario(t), newFake(t)
	stream := send(t, a, "tank/xfer/src@s1")
	ctx, cancel := context.WithCancel(t.Context())
	r := &cancelAfter{r: bytes.NewReader(stream), n: 4 << 10, cancel: cancel}
	err := b.Stream(ctx, "zfs", []string{"receive", "-s", "-u", "tank/x"}, r, nil)
	if !errors.Is(err, zfs.ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if tok, _ := zfs.NewClient(b).ResumeToken(t.Context(), "tank/x"); tok == "" {
		t.Fatal("no resume token after a cut receive")
	}
}

func TestStreamWriterFails(t *testing.T) {
	a := sendScenario(t)
	err := a.Stream(t.Context(), "zfs", []string{"send", "tank/xfer/src@s1"}, nil, &failAfter{n: 100})
	if !errors.Is(err, zfs.ErrInterrupted) {
		t.Fatalf("got %v, want ErrInterrupted", err)
	}
}

func guidOf(t *testing.T, f *Fake, name string) uint64 {
	t.Helper()
	ds, err := zfs.NewClient(f).List(t.Context(), zfs.Parent(name), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Name == name {
			var g uint64
			for _, c := range d.GUID {
				g = g*10 + uint64(c-'0')
			}
			return g
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

type cancelAfter struct {
	r      io.Reader
	n      int
	cancel func()
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	if c.n <= 0 {
		c.cancel()
		return 0, context.Canceled
	}
	if len(p) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= n
	return n, err
}

type failAfter struct{ n int }

func (w *failAfter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		return w.n, errors.New("broken pipe")
	}
	w.n -= len(p)
	return len(p), nil
}

// TestExecRunnerStreams: the executables send and receive through
// zfsexec.Runner.Stream, the production streamer, as child processes.
func TestExecRunnerStreams(t *testing.T) {
	f := sendScenario(t)
	e := InstallExecutables(t, f)
	t.Setenv(StateEnv, e.StateFile)
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	c := zfs.NewClient(&zfsexec.Runner{Paths: e.Paths})
	var stream bytes.Buffer
	if err := c.Send(t.Context(), zfs.SendOptions{Snapshot: "tank/xfer/src@s2"}, &stream); err != nil {
		t.Fatal(err)
	}
	half := io.LimitReader(bytes.NewReader(stream.Bytes()), int64(stream.Len()/2))
	if err := c.Receive(t.Context(), zfs.ReceiveOptions{Target: "tank/xfer/copy", Resumable: true, NoMount: true}, half); !errors.Is(err, zfs.ErrInterrupted) {
		t.Fatalf("half a stream: %v", err)
	}
	token, err := c.ResumeToken(t.Context(), "tank/xfer/copy")
	if err != nil || token == "" {
		t.Fatalf("token %q, %v", token, err)
	}
	stream.Reset()
	if err := c.SendResume(t.Context(), token, false, &stream); err != nil {
		t.Fatal(err)
	}
	if err := c.Receive(t.Context(), zfs.ReceiveOptions{Target: "tank/xfer/copy", Resumable: true, NoMount: true}, &stream); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, f, "zfs", "list", "-H", "-o", "name", "-t", "snapshot", "tank/xfer/copy"); out != "tank/xfer/copy@s2\n" {
		t.Fatalf("snapshots %q", out)
	}
}
