// Command xfernode is one end of a transfer, as a plugin process would be,
// for the transfer benchmark (bench/transfer.sh, docs/performance.md): the
// sending node's server, the receiving node's fetch, or the local pipe they
// are measured against. Each end is its own process, so each one's peak
// memory (its maximum resident set) is its own. Nomad's answers are fixed
// (transfertest.Nomad): A on node A, replaced by B on node B, which asks
// from the address given.
//
// usage:
//
//	xfernode pipe  SNAPSHOT TARGET                     zfs send | zfs receive, a kernel pipe
//	xfernode serve SNAPSHOT LISTEN FROM-ADDR TLS-DIR   serve one send of SNAPSHOT, then exit
//	xfernode fetch PEER SOURCE-ADDR TARGET TLS-DIR     fetch it into TARGET
//
// TLS-DIR holds ca.pem, cert.pem and key.pem (nomad tls ... made them).
// Each prints one line: "xfer <mode> bytes=N seconds=S maxrss_kib=K".
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer/transfertest"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfsexec"
)

const (
	nodeA  = "aaaaaaaa-0000-0000-0000-000000000001"
	nodeB  = "bbbbbbbb-0000-0000-0000-000000000002"
	allocA = "a11ca11c-0000-0000-0000-00000000000a"
	allocB = "b11cb11c-0000-0000-0000-00000000000b"
)

// sendOptions are the stream's format for both the pipe and the transfer.
func sendOptions(snap string) zfs.SendOptions {
	return zfs.SendOptions{Snapshot: snap, Compressed: true, LargeBlocks: true, Embedded: true}
}

func main() {
	var err error
	switch {
	case len(os.Args) == 4 && os.Args[1] == "pipe":
		err = pipe(os.Args[2], os.Args[3])
	case len(os.Args) == 6 && os.Args[1] == "serve":
		err = serve(os.Args[2], os.Args[3], os.Args[4], os.Args[5])
	case len(os.Args) == 6 && os.Args[1] == "fetch":
		err = fetch(os.Args[2], os.Args[3], os.Args[4], os.Args[5])
	default:
		fmt.Fprintln(os.Stderr, "usage: xfernode pipe SNAPSHOT TARGET | serve SNAPSHOT LISTEN FROM-ADDR TLS-DIR | fetch PEER SOURCE-ADDR TARGET TLS-DIR")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "xfernode:", err)
		os.Exit(1)
	}
}

// pipe runs zfs send into zfs receive through a kernel pipe, no process
// of ours in between: what the transfer is measured against.
func pipe(snap, target string) error {
	sargs, err := zfs.SendArgs(sendOptions(snap))
	if err != nil {
		return err
	}
	rargs, err := zfs.ReceiveArgs(zfs.ReceiveOptions{Target: target, Resumable: true, NoMount: true})
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	send, recv := exec.Command("zfs", sargs...), exec.Command("zfs", rargs...)
	send.Stdout, send.Stderr = w, os.Stderr
	recv.Stdin, recv.Stderr = r, os.Stderr
	start := time.Now()
	if err := recv.Start(); err != nil {
		return err
	}
	if err := send.Start(); err != nil {
		return err
	}
	r.Close()
	w.Close()
	errS, errR := send.Wait(), recv.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errS, errR); err != nil {
		return err
	}
	report("pipe", -1, elapsed)
	return nil
}

func tlsConfig(dir, listen string) transfer.Config {
	return transfer.Config{Address: listen, CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "cert.pem"),
		KeyFile: filepath.Join(dir, "key.pem"), Region: "global"}
}

// fixedNomad is what both nodes' agents would answer.
func fixedNomad(from netip.Addr, peer netip.AddrPort) *transfertest.Nomad {
	n := transfertest.NewNomad()
	n.SetAlloc(transfer.Alloc{ID: allocA, NodeID: nodeA, Namespace: "default", JobID: "j", TaskGroup: "g",
		DesiredStatus: "stop", ClientStatus: "running"})
	n.SetAlloc(transfer.Alloc{ID: allocB, NodeID: nodeB, Namespace: "default", JobID: "j", TaskGroup: "g",
		PreviousAllocation: allocA, DesiredStatus: "run", ClientStatus: "pending"})
	n.SetNode(transfer.Node{ID: nodeB, Addresses: []netip.Addr{from}})
	if peer.IsValid() {
		n.SetNode(transfer.Node{ID: nodeA, Addresses: []netip.Addr{peer.Addr()}, TransferPort: int(peer.Port())})
	}
	return n
}

// oneSend is the benchmark's Source: the one snapshot, whoever asks.
type oneSend struct {
	spec model.Send
}

func (o *oneSend) Send(context.Context, model.SendRequest) (model.Send, error) {
	return o.spec, nil
}

// serve answers one request and exits once its stream is sent.
func serve(snap, listen, from, dir string) error {
	zc := zfs.NewClient(&zfsexec.Runner{})
	out, err := exec.Command("zfs", "get", "-H", "-p", "-o", "value", "guid", snap).Output()
	if err != nil {
		return fmt.Errorf("guid of %s: %w", snap, err)
	}
	guid, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return err
	}
	fromAddr, err := netip.ParseAddr(from)
	if err != nil {
		return err
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "xfernode", Output: os.Stderr, Level: hclog.Info})
	src := &oneSend{spec: model.Send{Options: sendOptions(snap), ToGUID: guid}}
	srv, err := transfer.NewServer(transfer.ServerConfig{Config: tlsConfig(dir, listen),
		Authorizer: &transfer.NomadAuthorizer{Nomad: fixedNomad(fromAddr, netip.AddrPort{}),
			Self: func(context.Context) (string, error) { return nodeA, nil }},
		Source: src, ZFS: zc, Logger: logger})
	if err != nil {
		return err
	}
	ln, err := srv.Listen()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counted := newCountingListener(ln)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, counted) }()
	fmt.Println("xfer serve listening", ln.Addr())
	// The sender is done when the receiver has disconnected after its
	// stream: wait for the connection to close.
	select {
	case <-counted.closed():
	case err := <-errc:
		return err
	}
	cancel()
	<-errc
	report("serve", -1, 0)
	return nil
}

// fetch asks the server for the stream and receives it.
func fetch(peer, source, target, dir string) error {
	peerAddr, err := netip.ParseAddrPort(peer)
	if err != nil {
		return err
	}
	src, err := netip.ParseAddr(source)
	if err != nil {
		return err
	}
	c, err := transfer.NewClient(transfer.ClientConfig{Config: tlsConfig(dir, netip.AddrPortFrom(src, 0).String()),
		Locator: transfer.NomadLocator{Nomad: fixedNomad(src, peerAddr)}, ZFS: zfs.NewClient(&zfsexec.Runner{})})
	if err != nil {
		return err
	}
	start := time.Now()
	res, err := c.Fetch(context.Background(), transfer.Request{Alloc: allocA, Replacement: allocB, Slot: "pg-1"}, transfer.Into{Target: target})
	if err != nil {
		return err
	}
	report("fetch", res.Bytes, time.Since(start))
	return nil
}

// report prints the line bench/transfer.sh collects.
func report(mode string, bytes int64, d time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("xfer %s bytes=%d seconds=%.3f maxrss_kib=%d\n", mode, bytes, d.Seconds(), ru.Maxrss)
}

// countingListener tells when its first accepted connection closes.
type countingListener struct {
	net.Listener
	done     chan struct{}
	accepted sync.Once
}

func newCountingListener(ln net.Listener) *countingListener {
	return &countingListener{Listener: ln, done: make(chan struct{})}
}

func (l *countingListener) closed() <-chan struct{} { return l.done }

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	first := false
	l.accepted.Do(func() { first = true })
	if !first {
		return c, nil
	}
	return &notifyConn{Conn: c, done: l.done}, nil
}

type notifyConn struct {
	net.Conn
	done chan struct{}
	once sync.Once
}

func (c *notifyConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.done) })
	return err
}
