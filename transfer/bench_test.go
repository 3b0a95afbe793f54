package transfer_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer/transfertest"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfsexec"
)

// streamZFS stands for zfs on either node, with the data cost taken out:
// its send is a process that writes size bytes of a pattern to its
// stdout, its receive a process that reads its stdin to the end (this
// test binary, TestMain), both run by the real zfsexec.Runner, so the
// bytes go through the pipes and the copies of a real transfer; its
// listing shows the received snapshot. What is left to measure is the
// transport: TLS, HTTP/2, the copies and the pipes.
type streamZFS struct {
	size   int64
	guid   uint64
	snap   string
	runner *zfsexec.Runner
}

func newStreamZFS(b *testing.B, size int64) *streamZFS {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	b.Setenv(streamEnv, "1")
	return &streamZFS{size: size, guid: 42, snap: "s", runner: &zfsexec.Runner{Paths: map[string]string{"zfs": self}}}
}

func (s *streamZFS) Run(_ context.Context, cmd string, args ...string) ([]byte, error) {
	if len(args) > 0 && args[0] == "list" {
		target := args[len(args)-1]
		row := func(name, typ string) string {
			// listColumns: name type used available referenced mountpoint
			// mounted quota refquota reservation compression compressratio
			// recordsize encryption origin guid
			return strings.Join([]string{name, typ, "0", "0", "0", "-", "no", "0", "0", "0", "off", "1.00", "0", "off", "-",
				fmt.Sprint(s.guid)}, "\t") + "\n"
		}
		return []byte(row(target, "filesystem") + row(target+"@"+s.snap, "snapshot")), nil
	}
	return nil, zfs.NewError(cmd, args, "not emulated", 1)
}

func (s *streamZFS) Stream(ctx context.Context, cmd string, args []string, stdin io.Reader, stdout io.Writer) error {
	if args[0] == "send" {
		return s.runner.Stream(ctx, cmd, []string{"send", strconv.FormatInt(s.size, 10)}, stdin, stdout)
	}
	return s.runner.Stream(ctx, cmd, []string{"receive"}, stdin, stdout)
}

// streamEnv makes this test binary the zfs of streamZFS: "send N" writes
// N bytes of a pattern in writes of 128 KiB (zfs send writes a record at a
// time), "receive" reads its stdin to the end.
const streamEnv = "TRANSFER_TEST_STREAM"

func TestMain(m *testing.M) {
	if os.Getenv(streamEnv) != "" {
		os.Exit(streamHelper(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func streamHelper(args []string) int {
	var err error
	switch {
	case len(args) == 2 && args[0] == "send":
		var n int64
		if n, err = strconv.ParseInt(args[1], 10, 64); err == nil {
			_, err = io.CopyBuffer(struct{ io.Writer }{os.Stdout}, io.LimitReader(pattern{}, n), make([]byte, 128<<10))
		}
	case len(args) == 1 && args[0] == "receive":
		_, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{os.Stdin}, make([]byte, 128<<10))
	default:
		err = fmt.Errorf("not emulated: %q", args)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type pattern struct{}

func (pattern) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i)
	}
	return len(p), nil
}

// BenchmarkTransport streams through a real server and client over TLS
// on loopback. Run with -benchmem: the bytes allocated per operation
// stay the same from 64 MiB to 512 MiB, as memory must not grow with a
// dataset's size.
func BenchmarkTransport(b *testing.B) {
	pki := transfertest.NewPKI(b, nomadtest.Binary(b))
	for _, size := range []int64{64 << 20, 512 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			zfsA := newStreamZFS(b, size)
			nomad := transfertest.NewNomad()
			nomad.SetAlloc(transfer.Alloc{ID: allocA, NodeID: nodeA, Namespace: "default", JobID: "j", TaskGroup: "g",
				DesiredStatus: "stop", ClientStatus: "running"})
			nomad.SetAlloc(transfer.Alloc{ID: allocB, NodeID: nodeB, Namespace: "default", JobID: "j", TaskGroup: "g",
				PreviousAllocation: allocA, DesiredStatus: "run", ClientStatus: "pending"})
			nomad.SetNode(transfer.Node{ID: nodeB, Addresses: []netip.Addr{ipB}})
			src := &specSource{}
			src.set(model.Send{Options: zfs.SendOptions{Snapshot: "tank/a@s"}, ToGUID: 42}, nil)
			srv, err := transfer.NewServer(transfer.ServerConfig{Config: pki.Config(b, ipA.String()+":0"), Source: src,
				Authorizer: &transfer.NomadAuthorizer{Nomad: nomad, Self: func(context.Context) (string, error) { return nodeA, nil }},
				ZFS:        zfs.NewClient(zfsA)})
			if err != nil {
				b.Fatal(err)
			}
			ln, err := srv.Listen()
			if err != nil {
				b.Fatal(err)
			}
			nomad.SetNode(transfer.Node{ID: nodeA, Addresses: []netip.Addr{ipA}, TransferPort: ln.Addr().(*net.TCPAddr).Port})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ctx, ln) }()
			defer func() { cancel(); <-done }()
			c, err := transfer.NewClient(transfer.ClientConfig{Config: pki.Config(b, ipB.String()+":0"),
				Locator: transfer.NomadLocator{Nomad: nomad}, ZFS: zfs.NewClient(newStreamZFS(b, 0))})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				if _, err := c.Fetch(b.Context(), reqAB, transfer.Into{Target: "tank/in/b"}); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapSys)/(1<<20), "heap-sys-MiB")
		})
	}
}
