package transfer_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// allowAll is an Authorizer that allows every request: these tests are
// about what the receiver does with what comes.
type allowAll struct{}

func (allowAll) Authorize(context.Context, transfer.Request, transfer.Peer) error { return nil }

// fixedLocator says every allocation's data is at one address.
type fixedLocator struct{ at netip.AddrPort }

func (l fixedLocator) Locate(context.Context, string) (netip.AddrPort, error) { return l.at, nil }

// inMemory is a Transport that hands each request to a Server's
// ServeHTTP, as from node B's address, and returns what it answered.
type inMemory struct{ srv *transfer.Server }

func (m inMemory) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.RemoteAddr = netip.AddrPortFrom(ipB, 40000).String()
	rec := httptest.NewRecorder()
	m.srv.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// TestFetchVerifiesTheGUID: a received copy is verified by the guid the
// sender named, not by its snapshot's name. A sender whose headers name
// another guid than the stream's snapshot has (a lie, or another
// dataset's snapshot under the planned name) gets ErrNotVerified, though
// a snapshot of that name is on the target.
func TestFetchVerifiesTheGUID(t *testing.T) {
	cases := []struct {
		name string
		// spec changes the send of tank/data/a@t1 the sender answers with.
		spec    func(p *model.Send)
		wantErr error
	}{
		{name: "the guid the stream has", spec: func(*model.Send) {}},
		{name: "another guid under the same name", spec: func(p *model.Send) { p.ToGUID ^= 0x5a5a }, wantErr: transfer.ErrNotVerified},
		{name: "another dataset's snapshot of the same name", wantErr: transfer.ErrNotVerified,
			spec: func(p *model.Send) { p.Options.Snapshot = "tank/data/other@t1" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			a := zfstest.New(zfstest.Options{MountRoot: t.TempDir()})
			b := zfstest.New(zfstest.Options{MountRoot: t.TempDir(), RandomGUIDs: true})
			for _, f := range []*zfstest.Fake{a, b} {
				if err := f.AddPool("tank", 1<<30); err != nil {
					t.Fatal(err)
				}
			}
			za, zb := zfs.NewClient(a), zfs.NewClient(b)
			for _, ds := range []string{"tank/data", "tank/data/a", "tank/data/other"} {
				if err := za.Create(ctx, ds, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := zb.Create(ctx, "tank/in", nil); err != nil {
				t.Fatal(err)
			}
			guids := map[string]uint64{}
			for _, snap := range []string{"tank/data/a@t1", "tank/data/other@t1"} {
				if err := za.Snapshot(ctx, snap, nil); err != nil {
					t.Fatal(err)
				}
				ds, _, _ := strings.Cut(snap, "@")
				sets, err := za.List(ctx, ds, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range sets {
					if d.Name == snap {
						guids[snap], _ = strconv.ParseUint(d.GUID, 10, 64)
					}
				}
			}
			spec := model.Send{Options: zfs.SendOptions{Snapshot: "tank/data/a@t1"}, ToGUID: guids["tank/data/a@t1"]}
			tc.spec(&spec)
			src := &specSource{}
			src.set(spec, nil)
			srv, err := transfer.NewHandler(transfer.ServerConfig{Authorizer: allowAll{}, Source: src, ZFS: za})
			if err != nil {
				t.Fatal(err)
			}
			c, err := transfer.NewClient(transfer.ClientConfig{Locator: fixedLocator{netip.AddrPortFrom(ipA, 4680)},
				ZFS: zb, Transport: inMemory{srv}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.Fetch(ctx, reqAB, into)
			if tc.wantErr == nil {
				if err != nil || res.Snapshot != into.Target+"@t1" || res.GUID != guids["tank/data/a@t1"] {
					t.Fatalf("Fetch: %+v, %v", res, err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Fetch: %+v, %v; want %v", res, err, tc.wantErr)
			}
		})
	}
}

// TestClassify: a fetch's failure keeps its text and its zfs kind, and
// gains the class the receiver acts on.
func TestClassify(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want error // the class; nil: none added
	}{
		{name: "a copy changed here starts over", err: fmt.Errorf("receiving: %w", zfs.ErrDestinationModified), want: transfer.ErrStartOver},
		{name: "a base gone there starts over", err: fmt.Errorf("receiving: %w", zfs.ErrIncrementalMismatch), want: transfer.ErrStartOver},
		{name: "a copy not verified starts over", err: fmt.Errorf("%w: no t@1", transfer.ErrNotVerified), want: transfer.ErrStartOver},
		{name: "a volume's stream is not of a filesystem", err: fmt.Errorf("receiving: %w", zfs.ErrWrongType), want: transfer.ErrNotFilesystem},
		{name: "a cut stream is only itself", err: fmt.Errorf("receiving: %w", zfs.ErrInterrupted)},
		{name: "a busy peer is only itself", err: &transfer.PeerError{Code: "busy"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := transfer.Classify(tc.err)
			if got.Error() != tc.err.Error() || !errors.Is(got, tc.err) {
				t.Errorf("Classify(%v) = %v: the failure is not kept", tc.err, got)
			}
			for _, class := range []error{transfer.ErrStartOver, transfer.ErrNotFilesystem} {
				if errors.Is(got, class) != (class == tc.want) {
					t.Errorf("Classify(%v) is %v: %v, want it only for %v", tc.err, class, errors.Is(got, class), tc.want)
				}
			}
		})
	}
	if transfer.Classify(nil) != nil {
		t.Error("Classify(nil) is not nil")
	}
}
