package transfer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer/transfertest"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// The addresses of the nodes, all loopback: node A sends from 127.0.0.1,
// node B (where Nomad placed the replacement) asks from 127.0.0.2, node C
// (anybody else) from 127.0.0.3.
var (
	ipA = netip.MustParseAddr("127.0.0.1")
	ipB = netip.MustParseAddr("127.0.0.2")
	ipC = netip.MustParseAddr("127.0.0.3")
)

// syncBuffer is a log destination read while the server writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// specSource is the test's Source: the send it is told, or its error.
type specSource struct {
	mu    sync.Mutex
	spec  model.Send
	err   error
	block chan struct{} // if set, Send waits for it
	asked []model.SendRequest
}

func (s *specSource) set(p model.Send, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spec, s.err = p, err
}

func (s *specSource) Send(ctx context.Context, req model.SendRequest) (model.Send, error) {
	s.mu.Lock()
	s.asked = append(s.asked, req)
	block := s.block
	s.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return model.Send{}, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spec, s.err
}

// cutStreamer is node A's zfs, which can be made to die after writing n
// bytes of a stream: it then calls kill (the sending plugin dies).
type cutStreamer struct {
	*zfstest.Fake
	mu   sync.Mutex
	n    int64 // 0: never
	kill func()
}

func (c *cutStreamer) cutAfter(n int64, kill func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n, c.kill = n, kill
}

func (c *cutStreamer) Stream(ctx context.Context, cmd string, args []string, stdin io.Reader, stdout io.Writer) error {
	c.mu.Lock()
	n, kill := c.n, c.kill
	c.n = 0
	c.mu.Unlock()
	if n > 0 && stdout != nil {
		stdout = &dyingWriter{w: stdout, left: n, die: kill}
	}
	return c.Fake.Stream(ctx, cmd, args, stdin, stdout)
}

type dyingWriter struct {
	w    io.Writer
	left int64
	die  func()
}

func (d *dyingWriter) Write(p []byte) (int, error) {
	if int64(len(p)) >= d.left {
		n, _ := d.w.Write(p[:d.left])
		d.left = 0
		d.die()
		return n, errors.New("killed")
	}
	d.left -= int64(len(p))
	return d.w.Write(p)
}

// harness is two nodes: A holds tank/data/a (allocation A's data) and
// runs a transfer server; B receives below tank/in. Nomad (a fake) says
// B replaces A on node B.
type harness struct {
	t   *testing.T
	pki *transfertest.PKI
	// nomad is node A's Nomad API, peers node B's: each asks its own.
	nomad, peers *transfertest.Nomad
	a, b         *zfstest.Fake
	aZFS         *cutStreamer
	source       *specSource
	logs         *syncBuffer
	srvCfg       transfer.Config
	// bodyTimeout, when set, is the server's BodyTimeout.
	bodyTimeout time.Duration
	// requireIdentity is the server's require_node_identity.
	requireIdentity bool
	cancel          context.CancelFunc
	done            chan error
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, pki: transfertest.NewPKI(t, nomadtest.Binary(t)), nomad: transfertest.NewNomad(),
		peers: transfertest.NewNomad(), source: &specSource{}, logs: &syncBuffer{}}
	h.a = zfstest.New(zfstest.Options{MountRoot: t.TempDir()})
	h.b = zfstest.New(zfstest.Options{MountRoot: t.TempDir(), RandomGUIDs: true})
	for _, f := range []*zfstest.Fake{h.a, h.b} {
		if err := f.AddPool("tank", 1<<30); err != nil {
			t.Fatal(err)
		}
	}
	h.aZFS = &cutStreamer{Fake: h.a}
	h.zfs(h.a, "create", "tank/data")
	h.zfs(h.a, "create", "tank/data/a")
	h.zfs(h.b, "create", "tank/in")
	a, b, _ := world()
	a.NodeID, b.NodeID = nodeA, nodeB
	for _, n := range []*transfertest.Nomad{h.nomad, h.peers} {
		n.SetAlloc(a)
		n.SetAlloc(b)
		n.SetNode(transfer.Node{ID: nodeB, Name: "b", Addresses: []netip.Addr{ipB}})
	}
	h.srvCfg = h.pki.Config(t, ipA.String()+":0")
	h.start()
	return h
}

// start runs node A's server; a restart listens on the same port.
func (h *harness) start() {
	h.t.Helper()
	srv, err := transfer.NewServer(transfer.ServerConfig{
		Config: h.srvCfg,
		Authorizer: &transfer.NomadAuthorizer{Nomad: h.nomad,
			Self:                func(context.Context) (string, error) { return nodeA, nil },
			RequireNodeIdentity: h.requireIdentity, Region: h.srvCfg.Region},
		Source:      h.source,
		ZFS:         zfs.NewClient(h.aZFS),
		Logger:      hclog.New(&hclog.LoggerOptions{Output: h.logs, Level: hclog.Debug}),
		BodyTimeout: h.bodyTimeout,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	ln, err := srv.Listen()
	if err != nil {
		h.t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	h.srvCfg.Address = netip.AddrPortFrom(ipA, uint16(port)).String()
	for _, n := range []*transfertest.Nomad{h.nomad, h.peers} {
		n.SetNode(transfer.Node{ID: nodeA, Name: "a", Addresses: []netip.Addr{ipA}, TransferPort: port})
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- srv.Serve(ctx, ln) }()
	h.t.Cleanup(h.stop)
}

// stop kills node A's server, as a plugin that dies.
func (h *harness) stop() {
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("server: %v", err)
		}
		h.done <- nil
	case <-time.After(10 * time.Second):
		h.t.Error("the server did not stop")
	}
}

// client is node `from`'s client (its requests come from that address).
func (h *harness) client(from netip.Addr, certArgs ...string) *transfer.Client {
	h.t.Helper()
	cfg := h.pki.Config(h.t, from.String()+":0", certArgs...)
	c, err := transfer.NewClient(transfer.ClientConfig{Config: cfg, Locator: transfer.NomadLocator{Nomad: h.peers}, ZFS: zfs.NewClient(h.b)})
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func (h *harness) zfs(f *zfstest.Fake, args ...string) string {
	h.t.Helper()
	out, err := f.Run(context.Background(), "zfs", args...)
	if err != nil {
		h.t.Fatal(err)
	}
	return string(out)
}

// snapshot writes file on A's data and snapshots it: the send of it.
func (h *harness) snapshot(name, file string, size int, from string) model.Send {
	h.t.Helper()
	dir := filepath.Join(h.aRoot(), "tank/data/a")
	if err := os.WriteFile(filepath.Join(dir, file), bytes.Repeat([]byte(file[:1]), size), 0o644); err != nil {
		h.t.Fatal(err)
	}
	h.zfs(h.a, "snapshot", "tank/data/a@"+name)
	p := model.Send{Options: zfs.SendOptions{Snapshot: "tank/data/a@" + name}, ToGUID: h.guid(h.a, "tank/data/a@"+name)}
	if from != "" {
		p.Options.From, p.FromGUID = "tank/data/a@"+from, h.guid(h.a, "tank/data/a@"+from)
	}
	return p
}

func (h *harness) aRoot() string {
	out := h.zfs(h.a, "get", "-H", "-o", "value", "mountpoint", "tank")
	return strings.TrimSuffix(strings.TrimSpace(out), "/tank")
}

func (h *harness) guid(f *zfstest.Fake, name string) uint64 {
	h.t.Helper()
	var g uint64
	for _, c := range strings.TrimSpace(h.zfs(f, "get", "-H", "-p", "-o", "value", "guid", name)) {
		g = g*10 + uint64(c-'0')
	}
	return g
}

// same checks that B's copy (mounted for the look) has A's files.
func (h *harness) same(target string) {
	h.t.Helper()
	h.zfs(h.b, "mount", target)
	defer h.zfs(h.b, "unmount", target)
	mp := strings.TrimSpace(h.zfs(h.b, "get", "-H", "-o", "value", "mountpoint", target))
	src := filepath.Join(h.aRoot(), "tank/data/a")
	entries, err := os.ReadDir(src)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, e := range entries {
		want, _ := os.ReadFile(filepath.Join(src, e.Name()))
		got, err := os.ReadFile(filepath.Join(mp, e.Name()))
		if err != nil || !bytes.Equal(got, want) {
			h.t.Fatalf("%s on B: %d bytes, %v; A has %d", e.Name(), len(got), err, len(want))
		}
	}
}

var reqAB = transfer.Request{Alloc: allocA, Replacement: allocB, Slot: "data-1"}

var into = transfer.Into{Target: "tank/in/b", Props: map[string]string{"canmount": "noauto", "nomad-device-zfs:owner": "tank/in/b"}}

// TestTransfer is a transfer's life between two nodes: a full copy, an
// incremental, a sending plugin killed mid-stream and the transfer
// resumed from the receiver's token, then the requests it must refuse.
func TestTransfer(t *testing.T) {
	h := newHarness(t)
	b := h.client(ipB)
	ctx := t.Context()

	p1 := h.snapshot("t1", "first", 64<<10, "")
	h.source.set(p1, nil)
	res, err := b.Fetch(ctx, reqAB, into)
	if err != nil {
		t.Fatalf("full: %v", err)
	}
	if res.Snapshot != "tank/in/b@t1" || res.GUID != p1.ToGUID || res.Bytes == 0 || res.Resumed {
		t.Fatalf("full: %+v", res)
	}
	h.same("tank/in/b")
	if got := h.zfs(h.b, "get", "-H", "-o", "value", "nomad-device-zfs:owner,canmount,mounted", "tank/in/b"); got != "tank/in/b\nnoauto\nno\n" {
		t.Fatalf("received properties %q", got)
	}

	p2 := h.snapshot("t2", "second", 32<<10, "t1")
	h.source.set(p2, nil)
	req := reqAB
	req.HaveGUID = res.GUID
	if res, err = b.Fetch(ctx, req, into); err != nil || res.FromGUID != p1.ToGUID {
		t.Fatalf("incremental: %+v, %v", res, err)
	}
	h.same("tank/in/b")
	if asked := h.source.asked[len(h.source.asked)-1]; asked.HaveGUID != p1.ToGUID {
		t.Fatalf("the source was asked %+v", asked)
	}

	// The sending plugin dies mid-stream.
	p3 := h.snapshot("t3", "third", 1<<20, "t2")
	h.source.set(p3, nil)
	req.HaveGUID = p2.ToGUID
	h.aZFS.cutAfter(300<<10, h.cancel)
	_, err = b.Fetch(ctx, req, into)
	if !errors.Is(err, zfs.ErrInterrupted) {
		t.Fatalf("a stream cut mid-way: %v, want zfs.ErrInterrupted", err)
	}
	h.stop()
	token, err := zfs.NewClient(h.b).ResumeToken(ctx, "tank/in/b")
	if err != nil || token == "" {
		t.Fatalf("no resume token after the cut: %q, %v", token, err)
	}
	// It restarts; the receiver resumes with its token.
	h.start()
	req.ResumeToken = token
	if res, err = b.Fetch(ctx, req, into); err != nil || !res.Resumed || res.GUID != p3.ToGUID {
		t.Fatalf("resumed: %+v, %v", res, err)
	}
	h.same("tank/in/b")
	if !strings.Contains(h.logs.String(), "resumed=true") {
		t.Errorf("the server did not log the resumed send:\n%s", h.logs)
	}

	// The source says the requester holds the last of it: nothing comes.
	h.source.set(model.Send{Complete: true}, nil)
	req.ResumeToken, req.HaveGUID = "", p3.ToGUID
	if res, err = b.Fetch(ctx, req, into); err != nil || !res.Complete || res.Bytes != 0 {
		t.Fatalf("complete: %+v, %v", res, err)
	}
	h.same("tank/in/b")
}

// TestTransferRefusals: what the sender refuses, and that it says so in
// its log. Each row starts from a fresh pair of nodes with t1 planned.
func TestTransferRefusals(t *testing.T) {
	cases := []struct {
		name    string
		from    netip.Addr
		setup   func(h *harness, req *transfer.Request)
		wantErr error
		wantLog string
	}{
		{name: "another node asks", from: ipC, wantErr: transfer.ErrRefused,
			wantLog: "refused a transfer request: alloc_id=" + allocA},
		{name: "B does not replace A", from: ipB, wantErr: transfer.ErrRefused, wantLog: "does not replace",
			setup: func(h *harness, req *transfer.Request) {
				_, b, _ := world()
				b.PreviousAllocation = allocC
				h.nomad.SetAlloc(b)
			}},
		{name: "a forged token naming another dataset", from: ipB, wantErr: transfer.ErrResumeRefused,
			wantLog: "refused a resume token that does not resume this transfer",
			setup: func(h *harness, req *transfer.Request) {
				h.zfs(h.a, "create", "tank/secret")
				h.zfs(h.a, "snapshot", "tank/secret@s")
				req.ResumeToken = zfstest.EncodeResumeToken(zfs.ResumeToken{ToName: "tank/secret@s", ToGUID: h.guid(h.a, "tank/secret@s")})
			}},
		{name: "a forged token dropping rawok", from: ipB, wantErr: transfer.ErrResumeRefused,
			wantLog: "rawok is false",
			setup: func(h *harness, req *transfer.Request) {
				p := h.source.spec
				p.Options.Raw, p.Encrypted = true, true
				h.source.set(p, nil)
				req.ResumeToken = zfstest.EncodeResumeToken(zfs.ResumeToken{ToName: p.Options.Snapshot, ToGUID: p.ToGUID, Bytes: 10})
			}},
		{name: "a token zfs cannot read", from: ipB, wantErr: transfer.ErrResumeRefused, wantLog: "cannot resume from the token",
			setup: func(h *harness, req *transfer.Request) { req.ResumeToken = "1-0-2-abcd" }},
		{name: "a token the source could not decode", from: ipB, wantErr: transfer.ErrResumeRefused, wantLog: "cannot resume from the token",
			setup: func(h *harness, req *transfer.Request) {
				req.ResumeToken = "1-0-2-abcd"
				h.source.set(model.Send{}, fmt.Errorf("%w: decoding the resume token: exit status 255", model.ErrResumeRefused))
			}},
		{name: "no data here", from: ipB, wantErr: transfer.ErrNoData, wantLog: "nothing to send",
			setup: func(h *harness, req *transfer.Request) { h.source.set(model.Send{}, transfer.ErrNoData) }},
		{name: "an encrypted dataset planned without raw", from: ipB, wantLog: "would go out decrypted",
			setup: func(h *harness, req *transfer.Request) {
				p := h.source.spec
				p.Encrypted = true
				h.source.set(p, nil)
			}},
		{name: "Nomad does not answer", from: ipB, wantErr: transfer.ErrPeerBusy, wantLog: "cannot decide",
			setup: func(h *harness, req *transfer.Request) { h.nomad.SetErr(errors.New("connection refused")) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.source.set(h.snapshot("t1", "first", 4<<10, ""), nil)
			req := reqAB
			if tc.setup != nil {
				tc.setup(h, &req)
			}
			_, err := h.client(tc.from).Fetch(t.Context(), req, into)
			if err == nil {
				t.Fatal("the request was served")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
			waitLog(t, h.logs, tc.wantLog)
			if r := h.zfs(h.b, "list", "-H", "-o", "name", "-r", "tank/in"); r != "tank/in\n" {
				t.Fatalf("something was received: %q", r)
			}
		})
	}
}

// waitLog waits for the server's log to say want (it logs after
// answering).
func waitLog(t *testing.T, logs *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the server's log does not say %q:\n%s", want, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTransferBusy: a sender at its limit answers busy, not later.
func TestTransferBusy(t *testing.T) {
	h := newHarness(t)
	h.source.set(h.snapshot("t1", "first", 4<<10, ""), nil)
	h.source.block = make(chan struct{})
	b := h.client(ipB)
	first := make(chan error, 1)
	for i := 0; i < transfer.DefaultMaxSends; i++ {
		go func() {
			_, err := b.Fetch(t.Context(), reqAB, transfer.Into{Target: "tank/in/x" + string(rune('a'+i))})
			first <- err
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.source.mu.Lock()
		n := len(h.source.asked)
		h.source.mu.Unlock()
		if n == transfer.DefaultMaxSends {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requests reached the source", n, transfer.DefaultMaxSends)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := b.Fetch(t.Context(), reqAB, transfer.Into{Target: "tank/in/busy"}); !errors.Is(err, transfer.ErrPeerBusy) {
		t.Fatalf("got %v, want ErrPeerBusy", err)
	}
	close(h.source.block)
	for i := 0; i < transfer.DefaultMaxSends; i++ {
		select {
		case err := <-first:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a blocked transfer did not finish")
		}
	}
}
