package transfer_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer/transfertest"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// replicaSource is the holder's answer to replica pulls: the send it is
// given, and the requests it was asked.
type replicaSource struct {
	mu    sync.Mutex
	spec  model.Send
	err   error
	asked []model.ReplicaSendRequest
}

func (s *replicaSource) set(p model.Send, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spec, s.err = p, err
}

func (s *replicaSource) SendReplica(_ context.Context, req model.ReplicaSendRequest) (model.Send, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, req)
	return s.spec, s.err
}

// fromAddr is a Transport that hands each request to a Server's
// ServeHTTP as from addr (inMemory's, from any node).
type fromAddr struct {
	srv  *transfer.Server
	addr netip.Addr
}

func (m fromAddr) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.RemoteAddr = netip.AddrPortFrom(m.addr, 40000).String()
	rec := httptest.NewRecorder()
	m.srv.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// replicaRig is node A, holding allocation A's slot data-1 (tank/data/a),
// serving replica pulls with the NomadAuthorizer over a fake of its Nomad
// API; node B (10.0.0.2) is the one node chosen for A's replicas, node C
// (10.0.0.3) is not.
type replicaRig struct {
	a, b   *zfstest.Fake
	za, zb *zfs.Client
	nomad  *transfertest.Nomad
	src    *replicaSource
	srv    *transfer.Server
	logs   *syncBuffer
	// keeps is what the chooser answers: the class keeps replicas.
	keeps bool
}

var (
	ipRepB = netip.MustParseAddr(addrOfB)
	ipRepC = netip.MustParseAddr("10.0.0.3")
)

func newReplicaRig(t *testing.T) *replicaRig {
	t.Helper()
	ctx := t.Context()
	r := &replicaRig{nomad: transfertest.NewNomad(), src: &replicaSource{}, logs: &syncBuffer{}, keeps: true}
	r.a = zfstest.New(zfstest.Options{MountRoot: t.TempDir()})
	r.b = zfstest.New(zfstest.Options{MountRoot: t.TempDir(), RandomGUIDs: true})
	for _, f := range []*zfstest.Fake{r.a, r.b} {
		if err := f.AddPool("tank", 1<<30); err != nil {
			t.Fatal(err)
		}
	}
	r.za, r.zb = zfs.NewClient(r.a), zfs.NewClient(r.b)
	for _, ds := range []string{"tank/data", "tank/data/a"} {
		must(t, r.za.Create(ctx, ds, nil))
	}
	must(t, r.zb.Create(ctx, "tank/in", nil))
	r.nomad.SetAlloc(transfer.Alloc{ID: allocA, NodeID: nodeA, Namespace: "default", JobID: "pg", TaskGroup: "db",
		DesiredStatus: "run", ClientStatus: "running"})
	r.nomad.SetNode(transfer.Node{ID: nodeB, Name: "b", Addresses: []netip.Addr{ipRepB}})
	r.nomad.SetNode(transfer.Node{ID: nodeC, Name: "c", Addresses: []netip.Addr{ipRepC}})
	r.nomad.SetNodeList([]nomadapi.NodeStub{{ID: nodeA}, {ID: nodeB}, {ID: nodeC}})
	auth := &transfer.NomadAuthorizer{Nomad: r.nomad, Self: func(context.Context) (string, error) { return nodeA, nil },
		ReplicaNodes: func(a transfer.Alloc, slot string, nodes []nomadapi.NodeStub) ([]string, bool) {
			if !r.keeps || slot != "data-1" || len(nodes) != 3 {
				return nil, false
			}
			return []string{nodeB}, true
		}}
	srv, err := transfer.NewHandler(transfer.ServerConfig{Authorizer: auth, Source: &specSource{}, Replicas: r.src, ZFS: r.za,
		Logger: hclog.New(&hclog.LoggerOptions{Output: r.logs, Level: hclog.Debug})})
	must(t, err)
	r.srv = srv
	return r
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot takes tank/data/a@name: the send of it, from base ("" whole).
func (r *replicaRig) snapshot(t *testing.T, name, base string) model.Send {
	t.Helper()
	must(t, r.za.Snapshot(t.Context(), "tank/data/a@"+name, nil))
	p := model.Send{Options: zfs.SendOptions{Snapshot: "tank/data/a@" + name}, ToGUID: r.guid(t, "tank/data/a@"+name)}
	if base != "" {
		p.Options.From, p.FromGUID = "tank/data/a@"+base, r.guid(t, "tank/data/a@"+base)
	}
	return p
}

func (r *replicaRig) guid(t *testing.T, snap string) uint64 {
	t.Helper()
	sets, err := r.za.List(t.Context(), "tank/data/a", nil)
	must(t, err)
	for _, d := range sets {
		if d.Name == snap {
			g, _ := strconv.ParseUint(d.GUID, 10, 64)
			return g
		}
	}
	t.Fatalf("no %s", snap)
	return 0
}

// client is the requesting node's client, asking from addr.
func (r *replicaRig) client(t *testing.T, addr netip.Addr) *transfer.Client {
	t.Helper()
	c, err := transfer.NewClient(transfer.ClientConfig{Locator: fixedLocator{netip.AddrPortFrom(ipA, 4680)}, ZFS: r.zb,
		Transport: fromAddr{r.srv, addr}})
	must(t, err)
	return c
}

var reqReplica = transfer.Request{Kind: transfer.KindReplica, Alloc: allocA, Slot: "data-1"}

var intoReplica = transfer.Into{Target: "tank/in/replica-a", Props: map[string]string{"canmount": "noauto"}}

// TestTransferReplica: a replica's pull on the wire, authorized by the
// NomadAuthorizer (DecideReplica over the chosen nodes) and answered by
// the ReplicaSource: whole, then an increment, each received and
// verified; the node list asked once for both.
func TestTransferReplica(t *testing.T) {
	r := newReplicaRig(t)
	b := r.client(t, ipRepB)
	ctx := t.Context()
	p1 := r.snapshot(t, "replica-1", "")
	r.src.set(p1, nil)
	res, err := b.Fetch(ctx, reqReplica, intoReplica)
	if err != nil || res.GUID != p1.ToGUID || res.Snapshot != "tank/in/replica-a@replica-1" {
		t.Fatalf("whole: %+v, %v", res, err)
	}
	p2 := r.snapshot(t, "replica-2", "replica-1")
	r.src.set(p2, nil)
	req := reqReplica
	req.HaveGUID = p1.ToGUID
	if res, err = b.Fetch(ctx, req, intoReplica); err != nil || res.FromGUID != p1.ToGUID || res.GUID != p2.ToGUID {
		t.Fatalf("increment: %+v, %v", res, err)
	}
	want := []model.ReplicaSendRequest{{Alloc: allocA, Slot: "data-1"}, {Alloc: allocA, Slot: "data-1", HaveGUID: p1.ToGUID}}
	if len(r.src.asked) != 2 || r.src.asked[0] != want[0] || r.src.asked[1] != want[1] {
		t.Errorf("the source was asked %+v, want %+v", r.src.asked, want)
	}

	// The holder no longer has the replica's base: a whole stream, which
	// goes beside the replica when the request says where, and is refused
	// by the replica itself when it does not.
	p3 := r.snapshot(t, "replica-3", "")
	r.src.set(p3, nil)
	req.HaveGUID = p2.ToGUID
	if _, err := b.Fetch(ctx, req, intoReplica); !errors.Is(err, zfs.ErrExists) {
		t.Fatalf("a whole stream into the replica: %v, want ErrExists", err)
	}
	beside := intoReplica
	beside.Beside = &transfer.Into{Target: "tank/in/replica-a.whole", Props: map[string]string{"canmount": "noauto"}}
	res, err = b.Fetch(ctx, req, beside)
	if err != nil || !res.Beside || res.Snapshot != "tank/in/replica-a.whole@replica-3" || res.GUID != p3.ToGUID {
		t.Fatalf("a whole stream beside: %+v, %v", res, err)
	}
	rows, err := r.zb.List(ctx, "tank/in", nil)
	must(t, err)
	var names []string
	for _, d := range rows {
		names = append(names, d.Name)
	}
	if got := strings.Join(names, " "); got != "tank/in tank/in/replica-a tank/in/replica-a@replica-1 tank/in/replica-a@replica-2 tank/in/replica-a.whole tank/in/replica-a.whole@replica-3" {
		t.Errorf("after the whole stream beside: %s", got)
	}

	if n := r.nomad.NodeLists(); n != 1 {
		t.Errorf("the node list was asked %d times for two pulls, want once", n)
	}
}

// TestTransferReplicaRefusals: what the holder refuses of a replica's
// pull, and that the wire says only "refused" where the log says why.
func TestTransferReplicaRefusals(t *testing.T) {
	cases := []struct {
		name    string
		from    netip.Addr
		req     func(req *transfer.Request)
		setup   func(r *replicaRig)
		wantErr error
		wantLog string
	}{
		{name: "a node not chosen for A's replicas asks", from: ipRepC, wantErr: transfer.ErrRefused,
			wantLog: "not an address of a node that keeps allocation " + allocA + "'s replicas"},
		{name: "the slot's class keeps no replicas", from: ipRepB, wantErr: transfer.ErrRefused,
			wantLog: "not of a class that keeps replicas", setup: func(r *replicaRig) { r.keeps = false }},
		{name: "A has stopped", from: ipRepB, wantErr: transfer.ErrRefused, wantLog: "is not to run",
			setup: func(r *replicaRig) {
				r.nomad.SetAlloc(transfer.Alloc{ID: allocA, NodeID: nodeA, DesiredStatus: "stop", ClientStatus: "running"})
			}},
		{name: "A is on another node", from: ipRepB, wantErr: transfer.ErrRefused, wantLog: "not on this node",
			setup: func(r *replicaRig) {
				r.nomad.SetAlloc(transfer.Alloc{ID: allocA, NodeID: nodeC, DesiredStatus: "run", ClientStatus: "running"})
			}},
		{name: "Nomad does not know A", from: ipRepB, wantErr: transfer.ErrRefused, wantLog: "whose replica is asked for",
			req: func(req *transfer.Request) { req.Alloc = allocC }},
		{name: "Nomad does not answer", from: ipRepB, wantErr: transfer.ErrPeerBusy, wantLog: "cannot decide",
			setup: func(r *replicaRig) { r.nomad.SetErr(errors.New("connection refused")) }},
		{name: "the holder has no data for it", from: ipRepB, wantErr: transfer.ErrNoData, wantLog: "nothing to send",
			setup: func(r *replicaRig) { r.src.set(model.Send{}, transfer.ErrNoData) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newReplicaRig(t)
			r.src.set(r.snapshot(t, "replica-1", ""), nil)
			if tc.setup != nil {
				tc.setup(r)
			}
			req := reqReplica
			if tc.req != nil {
				tc.req(&req)
			}
			_, err := r.client(t, tc.from).Fetch(t.Context(), req, intoReplica)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
			if errors.Is(err, transfer.ErrRefused) {
				var pe *transfer.PeerError
				if !errors.As(err, &pe) || pe.Code != "refused" || strings.Contains(err.Error(), nodeB) || strings.Contains(err.Error(), "replica") {
					t.Errorf("the wire says more than refused: %v", err)
				}
				if len(r.src.asked) != 0 {
					t.Errorf("a refused pull reached the source: %+v", r.src.asked)
				}
			}
			waitLog(t, r.logs, tc.wantLog)
			if rows, _ := r.zb.List(t.Context(), "tank/in", nil); len(rows) != 1 {
				t.Errorf("something was received: %+v", rows)
			}
		})
	}
}

// TestReplicaRequestOnTheWire: a replica's pull is authorized on its
// headers (the allocation and the slot) before its body is read, and a
// body that names another slot, or a migration's pull, than the headers
// is refused.
func TestReplicaRequestOnTheWire(t *testing.T) {
	cases := []struct {
		name     string
		headers  map[string]string
		body     string
		wantCode int
		wantIn   string
	}{
		{name: "headers and body agree", headers: map[string]string{"Ndz-Alloc": allocA, "Ndz-Kind": "replica", "Ndz-Slot": "data-1"},
			body: `{"kind":"replica","alloc_id":"` + allocA + `","slot":"data-1"}`, wantCode: http.StatusOK},
		{name: "the body names another slot", headers: map[string]string{"Ndz-Alloc": allocA, "Ndz-Kind": "replica", "Ndz-Slot": "data-1"},
			body: `{"kind":"replica","alloc_id":"` + allocA + `","slot":"data-2"}`, wantCode: http.StatusForbidden, wantIn: "refused"},
		{name: "the body is a migration's", headers: map[string]string{"Ndz-Alloc": allocA, "Ndz-Kind": "replica", "Ndz-Slot": "data-1"},
			body: `{"alloc_id":"` + allocA + `","replacement_id":"` + allocB + `","slot":"data-1"}`, wantCode: http.StatusForbidden, wantIn: "refused"},
		{name: "no slot in the headers", headers: map[string]string{"Ndz-Alloc": allocA, "Ndz-Kind": "replica"},
			body: `{}`, wantCode: http.StatusBadRequest, wantIn: "not a device ID"},
		{name: "a replacement in a replica's headers", headers: map[string]string{"Ndz-Alloc": allocA, "Ndz-Kind": "replica",
			"Ndz-Slot": "data-1", "Ndz-Replacement": allocB}, body: `{}`, wantCode: http.StatusBadRequest, wantIn: "no replacement"},
		{name: "an unknown kind", headers: map[string]string{"Ndz-Alloc": allocA, "Ndz-Kind": "mirror", "Ndz-Slot": "data-1"},
			body: `{}`, wantCode: http.StatusBadRequest, wantIn: "kind"},
		{name: "refused on the headers, the body never read", headers: map[string]string{"Ndz-Alloc": allocA, "Ndz-Kind": "replica",
			"Ndz-Slot": "data-9"}, body: `not json`, wantCode: http.StatusForbidden, wantIn: "refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newReplicaRig(t)
			r.src.set(r.snapshot(t, "replica-1", ""), nil)
			req := httptest.NewRequest(http.MethodPost, "/v1/send", strings.NewReader(tc.body))
			req.RemoteAddr = netip.AddrPortFrom(ipRepB, 40000).String()
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			r.srv.ServeHTTP(rec, req)
			if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String()[:min(rec.Body.Len(), 512)], tc.wantIn) {
				t.Fatalf("answered %d %.200q, want %d with %q", rec.Code, rec.Body.String(), tc.wantCode, tc.wantIn)
			}
		})
	}
}

// TestNodeListKept: the holder asks Nomad for the node list once in
// NodeListTTL, whatever the pulls, peers or allocations; a failed lookup
// does not refuse; a list older than the TTL is asked again, and kept.
func TestNodeListKept(t *testing.T) {
	n := transfertest.NewNomad()
	for _, id := range []string{allocA, allocC} {
		n.SetAlloc(transfer.Alloc{ID: id, NodeID: nodeA, DesiredStatus: "run", ClientStatus: "running"})
	}
	n.SetNode(transfer.Node{ID: nodeB, Addresses: []netip.Addr{ipRepB}})
	n.SetNodeList([]nomadapi.NodeStub{{ID: nodeB}})
	auth := &transfer.NomadAuthorizer{Nomad: n, Self: func(context.Context) (string, error) { return nodeA, nil },
		NodeListTTL: 300 * time.Millisecond,
		ReplicaNodes: func(transfer.Alloc, string, []nomadapi.NodeStub) ([]string, bool) {
			return []string{nodeB}, true
		}}
	ctx := t.Context()
	ask := func(alloc string, from netip.Addr) error {
		return auth.Authorize(ctx, transfer.Request{Kind: transfer.KindReplica, Alloc: alloc, Slot: "data-1"}, transfer.Peer{Addr: from})
	}
	must(t, ask(allocA, ipRepB))
	must(t, ask(allocC, ipRepB))
	if err := ask(allocA, ipRepC); !errors.Is(err, transfer.ErrRefused) {
		t.Fatalf("node C: %v, want refused", err)
	}
	if got := n.NodeLists(); got != 1 {
		t.Fatalf("%d node lists for three pulls within the TTL, want 1", got)
	}
	time.Sleep(350 * time.Millisecond)
	n.SetErr(errors.New("connection refused"))
	if err := ask(allocA, ipRepB); err == nil || errors.Is(err, transfer.ErrRefused) {
		t.Fatalf("Nomad down: %v, want an error that is no refusal", err)
	}
	n.SetErr(nil)
	must(t, ask(allocA, ipRepB))
	if got := n.NodeLists(); got != 2 {
		t.Errorf("%d node lists, want 2 (once, then again after the TTL)", got)
	}
	must(t, ask(allocC, ipRepB))
	if got := n.NodeLists(); got != 2 {
		t.Errorf("%d node lists, want 2: the new one is kept", got)
	}
}

// TestReplicaNodeIdentity: with require_node_identity, a replica's pull
// from a chosen node's address must also present that node's own
// certificate.
func TestReplicaNodeIdentity(t *testing.T) {
	n := transfertest.NewNomad()
	n.SetAlloc(transfer.Alloc{ID: allocA, NodeID: nodeA, DesiredStatus: "run", ClientStatus: "running"})
	n.SetNode(transfer.Node{ID: nodeB, Name: "b", Addresses: []netip.Addr{ipRepB}})
	n.SetNodeList([]nomadapi.NodeStub{{ID: nodeB}})
	auth := &transfer.NomadAuthorizer{Nomad: n, Self: func(context.Context) (string, error) { return nodeA, nil },
		RequireNodeIdentity: true, Region: "global",
		ReplicaNodes: func(transfer.Alloc, string, []nomadapi.NodeStub) ([]string, bool) { return []string{nodeB}, true }}
	req := transfer.Request{Kind: transfer.KindReplica, Alloc: allocA, Slot: "data-1"}
	cases := []struct {
		name    string
		names   []string
		wantErr string // "" allows
	}{
		{name: "node b's certificate", names: []string{"client.global.nomad", transfer.NodeDNSName("b", "global")}},
		{name: "another node's certificate", names: []string{"client.global.nomad", transfer.NodeDNSName("c", "global")},
			wantErr: "names c.global.nomad, not b.global.nomad"},
		{name: "a certificate that names no node", names: []string{"client.global.nomad"}, wantErr: "names no node"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := auth.Authorize(t.Context(), req, transfer.Peer{Addr: ipRepB, Cert: &x509.Certificate{DNSNames: tc.names}})
			if tc.wantErr == "" {
				must(t, err)
				return
			}
			if !errors.Is(err, transfer.ErrRefused) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err %v, want a refusal saying %q", err, tc.wantErr)
			}
		})
	}
}
