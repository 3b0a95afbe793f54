package transfer_test

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// countingObserver adds up what an Observer is told, by kind.
type countingObserver struct {
	mu             sync.Mutex
	sent, received map[string]int64
}

func newCountingObserver() *countingObserver {
	return &countingObserver{sent: map[string]int64{}, received: map[string]int64{}}
}

func (o *countingObserver) Sent(kind string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sent[kind] += int64(n)
}

func (o *countingObserver) Received(kind string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.received[kind] += int64(n)
}

// TestObserverCountsTheStream: the sender's Observer is told every byte
// of the stream it wrote and the receiver's every byte it read, under
// the request's kind and no other, whole and then an increment: as many
// as the received copy's Result.Bytes, and no more than the data changed
// plus the stream's own records.
func TestObserverCountsTheStream(t *testing.T) {
	cases := []struct {
		name string
		req  transfer.Request
		kind string
	}{
		{name: "a migration's pull", req: transfer.Request{Alloc: allocA, Replacement: allocB, Slot: "data-1"}, kind: transfer.ObservedMigration},
		{name: "a replica's pull", req: transfer.Request{Kind: transfer.KindReplica, Alloc: allocA, Slot: "data-1"}, kind: transfer.KindReplica},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			a := zfstest.New(zfstest.Options{MountRoot: t.TempDir()})
			b := zfstest.New(zfstest.Options{MountRoot: t.TempDir(), RandomGUIDs: true})
			for _, f := range []*zfstest.Fake{a, b} {
				must(t, f.AddPool("tank", 1<<30))
			}
			za, zb := zfs.NewClient(a), zfs.NewClient(b)
			for _, ds := range []string{"tank/data", "tank/data/a"} {
				must(t, za.Create(ctx, ds, nil))
			}
			must(t, zb.Create(ctx, "tank/in", nil))
			mp := rowOf(t, za, "tank/data/a").Mountpoint
			snap := func(name, file string, size int, base string) model.Send {
				must(t, os.WriteFile(filepath.Join(mp, file), bytes.Repeat([]byte{'x'}, size), 0o644))
				must(t, za.Snapshot(ctx, "tank/data/a@"+name, nil))
				p := model.Send{Options: zfs.SendOptions{Snapshot: "tank/data/a@" + name}, ToGUID: guidOf(t, za, "tank/data/a@"+name)}
				if base != "" {
					p.Options.From, p.FromGUID = "tank/data/a@"+base, guidOf(t, za, "tank/data/a@"+base)
				}
				return p
			}
			migrations, replicas := &specSource{}, &replicaSource{}
			sender, receiver := newCountingObserver(), newCountingObserver()
			srv, err := transfer.NewHandler(transfer.ServerConfig{Authorizer: allowAll{}, Source: migrations, Replicas: replicas,
				ZFS: za, Observer: sender})
			must(t, err)
			c, err := transfer.NewClient(transfer.ClientConfig{Locator: fixedLocator{netip.AddrPortFrom(ipA, 4680)}, ZFS: zb, Transport: inMemory{srv}, Observer: receiver})
			must(t, err)

			var total int64
			req, base := tc.req, ""
			for i, step := range []struct {
				name string
				size int
			}{{"t1", 256 << 10}, {"t2", 64 << 10}} {
				p := snap(step.name, step.name, step.size, base)
				migrations.set(p, nil)
				replicas.set(p, nil)
				res, err := c.Fetch(ctx, req, transfer.Into{Target: "tank/in/b"})
				if err != nil {
					t.Fatalf("fetch %d: %v", i+1, err)
				}
				total += res.Bytes
				if res.Bytes < int64(step.size) {
					t.Errorf("fetch %d: %d bytes received for %d changed", i+1, res.Bytes, step.size)
				}
				req.HaveGUID, base = res.GUID, step.name
			}
			want := map[string]int64{tc.kind: total}
			for who, got := range map[string]map[string]int64{"sender": sender.sent, "receiver": receiver.received} {
				if len(got) != 1 || got[tc.kind] != want[tc.kind] {
					t.Errorf("the %s's Observer was told %v, want %v (the Result's bytes)", who, got, want)
				}
			}
			if len(sender.received) != 0 || len(receiver.sent) != 0 {
				t.Errorf("told the other direction: sender %v, receiver %v", sender.received, receiver.sent)
			}
		})
	}
}

// rowOf is name as z lists it (name and its snapshots).
func rowOf(t *testing.T, z *zfs.Client, name string) zfs.Dataset {
	t.Helper()
	ds, _, _ := strings.Cut(name, "@")
	rows, err := z.List(t.Context(), ds, nil)
	must(t, err)
	for _, d := range rows {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no %s", name)
	return zfs.Dataset{}
}

// guidOf is snap's guid on z.
func guidOf(t *testing.T, z *zfs.Client, snap string) uint64 {
	t.Helper()
	g, err := strconv.ParseUint(rowOf(t, z, snap).GUID, 10, 64)
	must(t, err)
	return g
}
