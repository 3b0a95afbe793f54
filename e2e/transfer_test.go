//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/testrig"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer/transfertest"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfsexec"
)

// The transport between two plugins on real OpenZFS: two pools in the
// guest stand for two nodes, the transfer server and client run in the
// test process over TLS on loopback, with certificates made by the nomad
// binary as an operator makes them. Node A sends from 127.0.0.1, node B
// (where Nomad placed the replacement) asks from 127.0.0.2, node C from
// 127.0.0.3. Nomad's answers come from a fake (transfer/transfertest);
// the lookups themselves run against a real agent in transfer's
// TestAPINomad.

var (
	xferA = netip.MustParseAddr("127.0.0.1")
	xferB = netip.MustParseAddr("127.0.0.2")
	xferC = netip.MustParseAddr("127.0.0.3")
)

const (
	xferNodeA  = "aaaaaaaa-0000-0000-0000-000000000001"
	xferNodeB  = "bbbbbbbb-0000-0000-0000-000000000002"
	xferAllocA = "a11ca11c-0000-0000-0000-00000000000a"
	xferAllocB = "b11cb11c-0000-0000-0000-00000000000b"
)

// xferNodes is the two nodes and the transport between them.
type xferNodes struct {
	t      *testing.T
	a, b   *testPool
	pki    *transfertest.PKI
	nomadA *transfertest.Nomad // what node A's agent answers
	nomadB *transfertest.Nomad // what node B's agent answers
	source *fixedSource
	logs   *testrig.LockedBuffer
	runner *killableRunner
	srvCfg transfer.Config
	cancel context.CancelFunc
	done   chan error
}

func newXferNodes(t *testing.T, name string) *xferNodes {
	t.Helper()
	x := &xferNodes{t: t, a: newPool(t, name+"a", false), b: newPool(t, name+"b", false),
		pki: transfertest.NewPKI(t, nomadBin), nomadA: transfertest.NewNomad(), nomadB: transfertest.NewNomad(),
		source: &fixedSource{}, logs: &testrig.LockedBuffer{}, runner: &killableRunner{}}
	alloc := func(id, node, prev, desired, status string) transfer.Alloc {
		return transfer.Alloc{ID: id, NodeID: node, Namespace: "default", JobID: "pg", TaskGroup: "db",
			PreviousAllocation: prev, DesiredStatus: desired, ClientStatus: status}
	}
	for _, n := range []*transfertest.Nomad{x.nomadA, x.nomadB} {
		n.SetAlloc(alloc(xferAllocA, xferNodeA, "", "stop", "running"))
		n.SetAlloc(alloc(xferAllocB, xferNodeB, xferAllocA, "run", "pending"))
		n.SetNode(transfer.Node{ID: xferNodeB, Name: "b", Addresses: []netip.Addr{xferB}})
	}
	run(t, "zfs", "create", x.b.Parent+"/in")
	x.srvCfg = x.pki.Config(t, xferA.String()+":0")
	x.start()
	return x
}

// start runs node A's transfer server (again after stop, on the same port).
func (x *xferNodes) start() {
	x.t.Helper()
	srv, err := transfer.NewServer(transfer.ServerConfig{
		Config: x.srvCfg,
		Authorizer: &transfer.NomadAuthorizer{Nomad: x.nomadA,
			Self: func(context.Context) (string, error) { return xferNodeA, nil }},
		Source: x.source,
		ZFS:    zfs.NewClient(x.runner),
		Logger: hclog.New(&hclog.LoggerOptions{Output: x.logs, Level: hclog.Debug}),
	})
	if err != nil {
		x.t.Fatal(err)
	}
	ln, err := srv.Listen()
	if err != nil {
		x.t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	x.srvCfg.Address = netip.AddrPortFrom(xferA, uint16(port)).String()
	for _, n := range []*transfertest.Nomad{x.nomadA, x.nomadB} {
		n.SetNode(transfer.Node{ID: xferNodeA, Name: "a", Addresses: []netip.Addr{xferA}, TransferPort: port})
	}
	ctx, cancel := context.WithCancel(context.Background())
	x.cancel, x.done = cancel, make(chan error, 1)
	go func() { x.done <- srv.Serve(ctx, ln) }()
	x.t.Cleanup(x.stop)
}

// stop kills node A's server: connections closed, zfs send killed.
func (x *xferNodes) stop() {
	x.cancel()
	select {
	case err := <-x.done:
		if err != nil {
			x.t.Errorf("transfer server: %v", err)
		}
		x.done <- nil
	case <-time.After(time.Minute):
		x.t.Error("the transfer server did not stop")
	}
}

// client is the transfer client of the node at address from.
func (x *xferNodes) client(from netip.Addr) *transfer.Client {
	x.t.Helper()
	c, err := transfer.NewClient(transfer.ClientConfig{Config: x.pki.Config(x.t, from.String()+":0"),
		Locator: transfer.NomadLocator{Nomad: x.nomadB}, ZFS: zc,
		Logger: hclog.New(&hclog.LoggerOptions{Output: x.logs, Level: hclog.Debug, Name: "receiver"})})
	if err != nil {
		x.t.Fatal(err)
	}
	return c
}

// snapshot fills ds with size bytes of random data in a new file and
// snapshots it as ds@name; it returns the snapshot's guid.
func (x *xferNodes) snapshot(ds, name, file string, size int64) uint64 {
	x.t.Helper()
	f, err := os.Create(filepath.Join("/"+ds, file))
	if err != nil {
		x.t.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		x.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		x.t.Fatal(err)
	}
	run(x.t, "zfs", "snapshot", ds+"@"+name)
	return guidOf(x.t, ds+"@"+name)
}

func guidOf(t testing.TB, name string) uint64 {
	t.Helper()
	g, err := strconv.ParseUint(strings.TrimSpace(run(t, "zfs", "get", "-H", "-p", "-o", "value", "guid", name)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// checksums are the sha256 of every file below dir, by relative path.
func checksums(t testing.TB, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sums[rel] = hex.EncodeToString(h.Sum(nil))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// sameFiles mounts the received target read-only for a look and
// compares its files with the sending dataset's, which has not changed
// since the snapshot sent (the tests write only before they snapshot).
// Read-only, because reading a read-write mount updates atimes: the copy
// would then be "modified since its most recent snapshot", and the next
// incremental refused (zfs.ErrDestinationModified), as the first run of
// this test found.
func sameFiles(t testing.TB, src, target string) {
	t.Helper()
	want := checksums(t, "/"+src)
	run(t, "zfs", "mount", "-o", "ro", target)
	defer run(t, "zfs", "unmount", target)
	got := checksums(t, "/"+target)
	if len(want) == 0 || fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(want)) {
		t.Fatalf("received files differ:\n got %v\nwant %v", sorted(got), sorted(want))
	}
}

func sorted(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v[:12])
	}
	sort.Strings(out)
	return out
}

var xferReq = transfer.Request{Alloc: xferAllocA, Replacement: xferAllocB, Slot: "pg-1"}

// into is the target below node B's pool, with the ownership mark.
func (x *xferNodes) into(name string) transfer.Into {
	target := x.b.Parent + "/in/" + name
	return transfer.Into{Target: target, Props: map[string]string{"canmount": "noauto", propOwner: target}}
}

// TestTransferFullIncrementalResume: a full send, an incremental from a
// bookmark, and one cut by killing the sending side mid-stream, resumed
// from the receiver's token and completed; the files compared by checksum
// each time.
func TestTransferFullIncrementalResume(t *testing.T) {
	t.Parallel()
	x := newXferNodes(t, "xfr")
	src := x.a.Parent + "/a"
	run(t, "zfs", "create", src)
	b := x.client(xferB)
	ctx := t.Context()
	into := x.into("b")

	g1 := x.snapshot(src, "t1", "first", 8<<20)
	x.source.set(model.Send{Options: zfs.SendOptions{Snapshot: src + "@t1", Compressed: true, LargeBlocks: true, Embedded: true}, ToGUID: g1})
	res, err := b.Fetch(ctx, xferReq, into)
	if err != nil {
		t.Fatalf("full: %v", err)
	}
	if res.GUID != g1 || res.Snapshot != into.Target+"@t1" {
		t.Fatalf("full: %+v", res)
	}
	sameFiles(t, src, into.Target)
	if got := run(t, "zfs", "get", "-H", "-o", "value", "canmount,mounted,"+propOwner, into.Target); got != "noauto\nno\n"+into.Target+"\n" {
		t.Fatalf("received properties %q", got)
	}

	// The sender keeps a bookmark of t1 and drops the snapshot: the
	// incremental's base on its side is the bookmark.
	run(t, "zfs", "bookmark", src+"@t1", src+"#t1")
	run(t, "zfs", "destroy", src+"@t1")
	g2 := x.snapshot(src, "t2", "second", 4<<20)
	x.source.set(model.Send{Options: zfs.SendOptions{Snapshot: src + "@t2", From: src + "#t1", Compressed: true}, ToGUID: g2, FromGUID: g1})
	req := xferReq
	req.HaveGUID = g1
	if res, err = b.Fetch(ctx, req, into); err != nil || res.FromGUID != g1 || res.GUID != g2 {
		t.Fatalf("incremental: %+v, %v", res, err)
	}
	sameFiles(t, src, into.Target)

	// Killed mid-stream: 3 MiB of a 24 MiB increment, then the server dies.
	g3 := x.snapshot(src, "t3", "third", 24<<20)
	x.source.set(model.Send{Options: zfs.SendOptions{Snapshot: src + "@t3", From: src + "@t2", Compressed: true}, ToGUID: g3, FromGUID: g2})
	req.HaveGUID = g2
	x.runner.killAfter(3<<20, x.cancel)
	_, err = b.Fetch(ctx, req, into)
	if !errors.Is(err, zfs.ErrInterrupted) {
		t.Fatalf("cut mid-stream: %v, want zfs.ErrInterrupted", err)
	}
	x.stop()
	token, err := zc.ResumeToken(ctx, into.Target)
	if err != nil || token == "" {
		t.Fatalf("no resume token on %s after the cut: %q %v", into.Target, token, err)
	}
	tok, err := zc.DecodeResumeToken(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Bytes == 0 || tok.Bytes >= 24<<20 || tok.ToGUID != g3 || tok.FromGUID != g2 {
		t.Fatalf("token %+v: want part of t3 from t2", tok)
	}
	t.Logf("cut after %d bytes; the token resumes at %d (object %d, offset %d), %d bytes to go",
		3<<20, tok.Bytes, tok.Object, tok.Offset, tok.Size)
	x.start()
	req.ResumeToken = token
	start := time.Now()
	if res, err = b.Fetch(ctx, req, into); err != nil || !res.Resumed || res.GUID != g3 {
		t.Fatalf("resumed: %+v, %v", res, err)
	}
	t.Logf("resumed: %d bytes in %s", res.Bytes, time.Since(start).Round(time.Millisecond))
	if int64(res.Bytes) >= 24<<20 {
		t.Errorf("the resumed send sent %d bytes: it started over", res.Bytes)
	}
	sameFiles(t, src, into.Target)
	if tok, _ := zc.ResumeToken(ctx, into.Target); tok != "" {
		t.Fatalf("a completed receive left a token: %q", tok)
	}
}

// TestTransferEncryptedRaw: an encrypted dataset goes raw, interrupted and
// resumed; the copy arrives locked, and opens only with the key the
// operator provides on the receiving node.
func TestTransferEncryptedRaw(t *testing.T) {
	t.Parallel()
	x := newXferNodes(t, "xfe")
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("correct horse battery staple\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := x.a.Parent + "/enc"
	run(t, "zfs", "create", "-o", "encryption=on", "-o", "keyformat=passphrase", "-o", "keylocation=file://"+keyFile, src)
	g1 := x.snapshot(src, "t1", "secret", 12<<20)
	b := x.client(xferB)
	ctx := t.Context()
	into := x.into("enc")

	// Without -w, the server refuses: it would go out decrypted.
	x.source.set(model.Send{Options: zfs.SendOptions{Snapshot: src + "@t1"}, ToGUID: g1, Encrypted: true})
	if _, err := b.Fetch(ctx, xferReq, into); err == nil || !strings.Contains(err.Error(), "would go out decrypted") {
		t.Fatalf("a non-raw send of an encrypted dataset: %v", err)
	}

	x.source.set(model.Send{Options: zfs.SendOptions{Snapshot: src + "@t1", Raw: true}, ToGUID: g1, Encrypted: true})
	x.runner.killAfter(2<<20, x.cancel)
	if _, err := b.Fetch(ctx, xferReq, into); !errors.Is(err, zfs.ErrInterrupted) {
		t.Fatalf("cut mid-stream: %v", err)
	}
	x.stop()
	token, err := zc.ResumeToken(ctx, into.Target)
	if err != nil || token == "" {
		t.Fatalf("no token: %q %v", token, err)
	}
	if tok, err := zc.DecodeResumeToken(ctx, token); err != nil || !tok.RawOK {
		t.Fatalf("the raw receive's token: %+v %v", tok, err)
	}
	x.start()
	req := xferReq
	req.ResumeToken = token
	if _, err := b.Fetch(ctx, req, into); err != nil {
		t.Fatalf("resumed raw: %v", err)
	}
	props := run(t, "zfs", "get", "-H", "-o", "value", "encryption,keystatus,encryptionroot", into.Target)
	if props != "aes-256-gcm\nunavailable\n"+into.Target+"\n" {
		t.Fatalf("the copy: encryption, keystatus, encryptionroot = %q; want it encrypted, locked, its own root", props)
	}
	if _, err := runErr("zfs", "mount", into.Target); err == nil {
		t.Fatal("the locked copy mounted without its key")
	}
	// The operator's part: the same key on the receiving node.
	run(t, "zfs", "load-key", "-L", "file://"+keyFile, into.Target)
	sameFiles(t, src, into.Target)
}

// TestTransferForgedTokens: a receiver that forges a resume token, from a
// genuine one, gets nothing. Real zfs takes each forgery (its decode shows
// what it would send); the sender's check refuses it.
func TestTransferForgedTokens(t *testing.T) {
	t.Parallel()
	x := newXferNodes(t, "xff")
	ctx := t.Context()
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("correct horse battery staple\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A's data (encrypted), and another dataset on node A that is nobody's
	// to ask for.
	src, secret := x.a.Parent+"/a", x.a.Parent+"/secret"
	run(t, "zfs", "create", "-o", "encryption=on", "-o", "keyformat=passphrase", "-o", "keylocation=file://"+keyFile, src)
	run(t, "zfs", "create", secret)
	g1 := x.snapshot(src, "t1", "data", 4<<20)
	gs := x.snapshot(secret, "t1", "payroll", 1<<20)
	b := x.client(xferB)
	into := x.into("a")

	x.source.set(model.Send{Options: zfs.SendOptions{Snapshot: src + "@t1", Raw: true}, ToGUID: g1, Encrypted: true})
	x.runner.killAfter(1<<20, x.cancel)
	if _, err := b.Fetch(ctx, xferReq, into); !errors.Is(err, zfs.ErrInterrupted) {
		t.Fatalf("cut: %v", err)
	}
	x.stop()
	x.start()
	genuine, err := zc.ResumeToken(ctx, into.Target)
	if err != nil || genuine == "" {
		t.Fatalf("no genuine token: %q %v", genuine, err)
	}
	other := func(change func(*parsedToken)) string {
		p, err := parseToken(genuine)
		if err != nil {
			t.Fatal(err)
		}
		change(p)
		return p.encode()
	}
	cases := []struct {
		name    string
		token   string
		decodes func(zfs.ResumeToken) bool // what real zfs reads in the forgery
		wantLog string
	}{
		{name: "another dataset's snapshot",
			token: other(func(p *parsedToken) {
				p.set(stringPair("toname", secret+"@t1"))
				p.set(uint64Pair("toguid", gs))
				p.set(uint64Pair("bytes", 0))
				p.set(uint64Pair("object", 0))
				p.set(uint64Pair("offset", 0))
				p.drop("rawok")
			}),
			decodes: func(tok zfs.ResumeToken) bool { return tok.ToName == secret+"@t1" && tok.ToGUID == gs },
			wantLog: secret + `@t1`}, // only the refusal names it
		{name: "the right snapshot without rawok: zfs would send it decrypted",
			token:   other(func(p *parsedToken) { p.drop("rawok") }),
			decodes: func(tok zfs.ResumeToken) bool { return tok.ToName == src+"@t1" && !tok.RawOK },
			wantLog: "rawok is false, the transfer's is true"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := zc.DecodeResumeToken(ctx, tc.token)
			if err != nil {
				t.Fatalf("real zfs does not take the forgery: %v", err)
			}
			if !tc.decodes(tok) {
				t.Fatalf("real zfs reads the forgery as %+v", tok)
			}
			req := xferReq
			req.ResumeToken = tc.token
			_, err = b.Fetch(ctx, req, into)
			if !errors.Is(err, transfer.ErrResumeRefused) {
				t.Fatalf("got %v, want ErrResumeRefused", err)
			}
			waitLogged(t, x.logs, tc.wantLog)
		})
	}
	// The genuine token still resumes.
	req := xferReq
	req.ResumeToken = genuine
	if _, err := b.Fetch(ctx, req, into); err != nil {
		t.Fatalf("the genuine token: %v", err)
	}
	if out := run(t, "zfs", "list", "-H", "-o", "name", "-t", "snapshot", "-r", x.b.Parent); strings.Contains(out, "payroll") || strings.Contains(out, "secret") {
		t.Fatalf("node B has the secret dataset: %s", out)
	}
}

// TestTransferWrongNode: a node that is not where Nomad placed the
// replacement is refused, the refusal logged, and nothing sent.
func TestTransferWrongNode(t *testing.T) {
	t.Parallel()
	x := newXferNodes(t, "xfw")
	src := x.a.Parent + "/a"
	run(t, "zfs", "create", src)
	g1 := x.snapshot(src, "t1", "data", 1<<20)
	x.source.set(model.Send{Options: zfs.SendOptions{Snapshot: src + "@t1"}, ToGUID: g1})
	_, err := x.client(xferC).Fetch(t.Context(), xferReq, x.into("c"))
	if !errors.Is(err, transfer.ErrRefused) {
		t.Fatalf("node C: %v, want ErrRefused", err)
	}
	waitLogged(t, x.logs, "refused a transfer request")
	waitLogged(t, x.logs, "comes from 127.0.0.3, which is not an address of node "+xferNodeB)
	if x.source.asked() != 0 {
		t.Fatal("the refused request reached the source")
	}
	if _, err := runErr("zfs", "list", x.into("c").Target); err == nil {
		t.Fatal("node C received something")
	}
	// Node B, asking the same, gets it.
	if _, err := x.client(xferB).Fetch(t.Context(), xferReq, x.into("b")); err != nil {
		t.Fatal(err)
	}
}

// fixedSource is the test's transfer.Source: the send it is given.
type fixedSource struct {
	mu    sync.Mutex
	spec  model.Send
	calls int
}

func (s *fixedSource) set(p model.Send) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spec = p
}

func (s *fixedSource) asked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *fixedSource) Send(context.Context, model.SendRequest) (model.Send, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return s.spec, nil
}

// killableRunner is the sending node's zfs: the real one, whose next
// stream can be made to kill the sender after n bytes.
type killableRunner struct {
	zfsexec.Runner
	mu   sync.Mutex
	n    int64
	kill func()
	// replicate adds -R to every zfs send: a sender that sends more than
	// it was asked for.
	replicate bool
}

func (k *killableRunner) killAfter(n int64, kill func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.n, k.kill = n, kill
}

func (k *killableRunner) Stream(ctx context.Context, cmd string, args []string, stdin io.Reader, stdout io.Writer) error {
	k.mu.Lock()
	n, kill := k.n, k.kill
	k.n = 0
	if k.replicate && len(args) > 0 && args[0] == "send" {
		args = append([]string{"send", "-R"}, args[1:]...)
	}
	k.mu.Unlock()
	if n > 0 && stdout != nil {
		stdout = &killingWriter{w: stdout, left: n, kill: kill}
	}
	return k.Runner.Stream(ctx, cmd, args, stdin, stdout)
}

type killingWriter struct {
	w    io.Writer
	left int64
	kill func()
}

func (k *killingWriter) Write(p []byte) (int, error) {
	if int64(len(p)) >= k.left {
		n, _ := k.w.Write(p[:k.left])
		k.left = 0
		k.kill()
		return n, errors.New("the sending plugin was killed")
	}
	k.left -= int64(len(p))
	return k.w.Write(p)
}

// waitLogged waits for the server's log to say want: it logs a refusal
// after answering it.
func waitLogged(t testing.TB, logs *testrig.LockedBuffer, want string) {
	t.Helper()
	waitFor(t, 30*time.Second, "the log to say "+want, func() (bool, string) {
		return strings.Contains(logs.String(), want), logs.String()
	})
}

// TestTransferHostileShapes: a sending node whose stream is not one
// filesystem (a volume; a replication stream with a dataset below), taken
// with the receiving class's properties as hooks takes it. The copy never
// passes as one filesystem: zfs refuses a volume's stream when the class
// sets a property only a filesystem has (ErrWrongType); otherwise the copy
// arrives, model.CopyNotOneFilesystem refuses it on the real listing, and a
// volume, the plugin's by its receive's mark, is dropped by
// model.PlanDropCopy.
func TestTransferHostileShapes(t *testing.T) {
	t.Parallel()
	volume := func(x *xferNodes, src string) uint64 {
		run(t, "zfs", "create", "-V", "8M", src)
		run(t, "zfs", "snapshot", src+"@migrate-1")
		return guidOf(t, src+"@migrate-1")
	}
	cases := []struct {
		name  string
		props map[string]string // the receiving class's
		// make creates the sent dataset src and returns the snapshot's guid.
		make func(x *xferNodes, src string) uint64
		// replicate sends with -R (a sender that sends more than asked).
		replicate bool
		wantErr   error
		wantWhy   string
		wantDrop  bool
	}{
		{name: "a volume, the class setting a quota", props: map[string]string{"quota": "64M", "compression": "lz4"},
			make: volume, wantErr: zfs.ErrWrongType},
		{name: "a volume, the class setting only what volumes have too", props: map[string]string{"compression": "lz4"},
			make: volume, wantWhy: "a volume (zvol), not a filesystem", wantDrop: true},
		{name: "a replication stream with a dataset below", props: map[string]string{"quota": "64M"}, replicate: true,
			make: func(x *xferNodes, src string) uint64 {
				run(t, "zfs", "create", src)
				run(t, "zfs", "create", src+"/evil")
				run(t, "zfs", "snapshot", "-r", src+"@migrate-1")
				return guidOf(t, src+"@migrate-1")
			}, wantWhy: "1 dataset(s) below the copy"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := newXferNodes(t, fmt.Sprintf("xfh%d", i))
			src := x.a.Parent + "/shape"
			g := tc.make(x, src)
			x.runner.replicate = tc.replicate
			x.source.set(model.Send{Options: zfs.SendOptions{Snapshot: src + "@migrate-1"}, ToGUID: g})
			target := x.b.Parent + "/in/parked-shape"
			now := time.Now()
			props := model.ReceiveProps(model.Class{Name: "pg", Properties: tc.props}, target, xferAllocA, now, now.Add(time.Hour))
			ctx := t.Context()
			_, err := x.client(xferB).Fetch(ctx, xferReq, transfer.Into{Target: target, Props: props, Exclude: model.ReceiveExclude(props)})
			listing := func() string {
				return run(t, "zfs", "list", "-H", "-r", "-t", "all", "-o", "name,type", x.b.Parent+"/in")
			}
			t.Logf("fetch: %v; node B has:\n%s", err, listing())
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("fetch: %v, want %v", err, tc.wantErr)
				}
				if l := listing(); strings.Contains(l, target) {
					t.Fatalf("zfs refused the stream but left %s:\n%s", target, l)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rows, err := zc.ListAll(ctx, target, model.UserProps)
			if err != nil {
				t.Fatal(err)
			}
			why, dropped := model.CopyNotOneFilesystem(target, rows)
			if !strings.Contains(why, tc.wantWhy) {
				t.Fatalf("CopyNotOneFilesystem = %q, want %q; rows %+v", why, tc.wantWhy, rows)
			}
			if dropped != tc.wantDrop {
				t.Fatalf("the pull drops the copy: %v, want %v (model.DecidePullMove: refuseShape)", dropped, tc.wantDrop)
			}
			if !tc.wantDrop {
				return // left for the operator, with what is below it
			}
			drop := model.PlanDropCopy(target, rows)
			if len(drop.Ops) == 0 {
				t.Fatalf("the volume is not seen as the plugin's: rows %+v", rows)
			}
			for _, op := range drop.Ops {
				if err := zc.Exec(ctx, op.Command); err != nil && !slices.ContainsFunc(op.Done, func(e error) bool { return errors.Is(err, e) }) {
					t.Fatalf("%s: %v", op.Command, err)
				}
			}
			if l := listing(); strings.Contains(l, target) {
				t.Fatalf("after the drop, node B has:\n%s", l)
			}
		})
	}
}
