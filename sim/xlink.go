package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The transport between the two plugins is the transfer package's own:
// each node's pulls fetch with a transfer.Client (its verification of
// what came), and each request is answered by the sending node's
// transfer.Server (its authorization by its own view of Nomad, the plan of
// its Manager's Sender, its resume-token check, its zfs send), joined in
// memory by the wire below instead of mutual TLS over TCP (the Client's
// Transport, transfer.NewHandler). So a bug in any of them shows in this
// world. The wire's faults act on the server's answer: a stream cut at a
// random byte, the sending plugin killed mid-stream, plugins that cannot
// reach each other, a node down, and a sender that lies.

// xTransferPort is the port every node's plugin publishes.
const xTransferPort = 4680

// xfaults are the transport's faults now armed.
type xfaults struct {
	// cuts: the next streams are cut at a random byte.
	cuts int
	// killSender: the next stream is cut by the sending plugin's death.
	killSender bool
	// downTill: no connection between the plugins until then.
	downTill time.Time
	lie      lieKind
	// told is the lie told in the fetch now running (lieNone for none).
	told lieKind
	// lies numbers the liar's datasets.
	lies int
	// stalls: the next streams stop for a while.
	stalls int
}

// lieKind is how a lying sender answers.
type lieKind int

const (
	lieNone lieKind = iota
	// lieGUID: the headers name a guid the stream's snapshot does not have.
	lieGUID
	// lieOther: the stream is another dataset's snapshot (another
	// allocation's data), under the planned snapshot's guid.
	lieOther
	// lieComplete: "you hold the final copy" while the receiver does not.
	lieComplete
	// lieName: the stream is a snapshot of the planned name, and the
	// headers name the planned guid, of data that is no allocation's: only
	// the snapshot's guid tells it apart.
	lieName
	numLies
)

func (l lieKind) String() string {
	return [...]string{"none", "a forged guid", "another allocation's data", "complete too early",
		"foreign data under the planned name"}[l]
}

// xnomad is a node's view of the servers, as the transfer reads it (the
// Locator on the receiving side, the Authorizer on the sending one): cut
// off from them, it has no answer.
type xnomad struct{ n *xnode }

var _ transfer.Nomad = xnomad{}

func (x xnomad) Allocation(_ context.Context, id string) (transfer.Alloc, error) {
	if !x.n.connected {
		return transfer.Alloc{}, errNoServers
	}
	sa := x.n.w.cluster.Alloc(id)
	if sa == nil {
		return transfer.Alloc{}, fmt.Errorf("allocation %s: %w", id, transfer.ErrUnknown)
	}
	return transfer.Alloc{ID: sa.ID, NodeID: sa.NodeID, Namespace: sa.Namespace, JobID: sa.JobID, TaskGroup: sa.TaskGroup, Name: sa.Name,
		PreviousAllocation: sa.PreviousAllocation, NextAllocation: sa.NextAllocation, DesiredStatus: sa.DesiredStatus,
		ClientStatus: sa.ClientStatus, LostByServers: nomadapi.LostByServers(sa.DesiredDescription), CreateIndex: sa.CreateIndex}, nil
}

func (x xnomad) Node(_ context.Context, id string) (transfer.Node, error) {
	if !x.n.connected {
		return transfer.Node{}, errNoServers
	}
	n := x.n.w.node(id)
	if n == nil {
		return transfer.Node{}, fmt.Errorf("node %s: %w", id, transfer.ErrUnknown)
	}
	return transfer.Node{ID: n.id, Name: n.name, Addresses: []netip.Addr{n.addr}, TransferPort: xTransferPort}, nil
}

// Nodes lists the world's nodes as the servers do: ready while they
// reach the servers, each offering the class with the transfer's port
// (no replica is made in this world: the list is there for the seam).
func (x xnomad) Nodes(_ context.Context) ([]nomadapi.NodeStub, error) {
	if !x.n.connected {
		return nil, errNoServers
	}
	var out []nomadapi.NodeStub
	for _, n := range append(slices.Clone(x.n.w.nodes), x.n.w.lost...) {
		status := "down"
		if n.connected {
			status = "ready"
		}
		out = append(out, nomadapi.NodeStub{ID: n.id, Status: status, SchedulingEligibility: "eligible",
			Devices: []nomadapi.DeviceGroup{{Vendor: transfer.DeviceVendor, Type: transfer.DeviceType, Name: "pg",
				Attributes: []string{transfer.AttrPort}}}})
	}
	return out, nil
}

// newFetcher is a plugin's receiving side: the transfer's Client over the
// plugin's zfs, its requests carried by the wire from node n.
func (n *xnode) newFetcher(p *xplugin) transfer.Fetcher {
	c, err := transfer.NewClient(transfer.ClientConfig{Locator: transfer.NomadLocator{Nomad: xnomad{n}}, ZFS: zfs.NewClient(p.run),
		Logger: n.w.logger.Named(n.name).Named("transfer"), Transport: xwire{w: n.w, by: n}})
	if err != nil {
		n.w.violate("harness", "transfer client of %s: %v", n.name, err)
		return nil
	}
	return xfetcher{w: n.w, n: n, c: c}
}

// holdsFinal reports whether req's HaveGUID is the guid of the final
// snapshot (@migrate-final, or @migrated once recorded) of req.Alloc's
// data on n: what a "complete" answer asserts.
func (n *xnode) holdsFinal(req transfer.Request) bool {
	for _, ds := range []string{n.w.cfg.SlotDataset("pg", req.Slot), n.w.cfg.ParkedName("pg", req.Alloc, req.Slot)} {
		sets, err := zfs.NewClient(n.fake).List(context.Background(), ds, nil)
		if err != nil {
			continue
		}
		for _, s := range sets {
			if s.Name == ds+"@"+model.MigrateFinal || s.Name == ds+"@"+model.Migrated {
				if s.GUID == strconv.FormatUint(req.HaveGUID, 10) {
					return true
				}
			}
		}
	}
	return false
}

// xfetcher counts the lies the client's checks caught, and holds the
// client to X6: after a lie about what was sent (a guid, the data), the
// fetch fails.
type xfetcher struct {
	w *XWorld
	n *xnode
	c *transfer.Client
}

func (f xfetcher) Fetch(ctx context.Context, req transfer.Request, into transfer.Into) (transfer.Result, error) {
	f.w.link.told = lieNone
	res, err := f.c.Fetch(ctx, req, into)
	if err != nil {
		delete(f.w.replicating, into.Target)
		delete(f.w.replicating, strings.TrimSuffix(into.Target, ".whole"))
	}
	switch told := f.w.link.told; {
	case told != lieNone && errors.Is(err, transfer.ErrNotVerified):
		f.w.counts.LiesCaught++
	case err == nil && (told == lieGUID || told == lieOther || told == lieName):
		f.w.violate("X6", "the receiver took %s into %s as verified (%s, guid %d)", told, into.Target, res.Snapshot, res.GUID)
	}
	f.w.link.told = lieNone
	return res, err
}

// xwire carries node by's requests to the node they are addressed to,
// whose transfer server answers in memory, as from by's address.
type xwire struct {
	w  *XWorld
	by *xnode
}

func (x xwire) RoundTrip(r *http.Request) (*http.Response, error) {
	w := x.w
	ap, err := netip.ParseAddrPort(r.URL.Host)
	if err != nil {
		return nil, fmt.Errorf("dial tcp %s: %w", r.URL.Host, err)
	}
	var from *xnode
	for _, n := range w.nodes {
		if n.addr == ap.Addr() && ap.Port() == xTransferPort {
			from = n
		}
	}
	switch {
	case from == nil:
		return nil, fmt.Errorf("dial tcp %s: connect: no route to host", ap)
	case !from.connected || !x.by.connected || w.now.Before(w.link.downTill):
		return nil, fmt.Errorf("dial tcp %s: i/o timeout", ap)
	case from.p == nil || from.p.run.dead:
		return nil, fmt.Errorf("dial tcp %s: connect: connection refused", ap)
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	var req transfer.Request
	if err := json.Unmarshal(raw, &req); err != nil {
		w.violate("harness", "the client's request %q: %v", raw, err)
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	rec := w.serve(from, x.by, r)
	resp := rec.Result()
	resp.Request = r
	if resp.StatusCode == http.StatusOK && req.Kind == transfer.KindReplica {
		w.counts.ReplicaStreams++
		if w.now.Before(w.hostileTill) {
			x.by.metHostile = w.now // its loop refuses the replica until it restarts (XR6)
		}
		if resp.Header.Get("Ndz-Resumed") == "true" {
			w.counts.ReplicaResumes++
		}
		cuts := w.counts.Cuts + w.counts.PeerKills
		resp = w.tamper(from, x.by, w.cfg.ReplicaName("pg", req.Alloc, req.Slot), resp)
		w.counts.ReplicaCuts += w.counts.Cuts + w.counts.PeerKills - cuts
		return resp, nil
	}
	switch resp.StatusCode {
	case http.StatusOK:
		w.counts.Streams++
		if resp.Header.Get("Ndz-Resumed") == "true" {
			w.counts.Resumes++
		}
		return w.tamper(from, x.by, w.cfg.ParkedName("pg", req.Alloc, req.Slot), resp), nil
	case http.StatusNoContent:
		w.counts.Complete++
		from.holdCopied(w.cfg.ParkedName("pg", req.Alloc, req.Slot))
		if !from.holdsFinal(req) {
			w.violate("X6", "%s answers complete to %s for %s's data, whose newest snapshot (guid %d) is not %s's final one",
				from.name, x.by.name, shortID(req.Alloc), req.HaveGUID, from.name)
		}
	case http.StatusConflict:
		w.counts.TokensRefused++
		w.logf("  link: %s refuses the resume token: %s", from.name, short(errors.New(rec.Body.String())))
	}
	return resp, nil
}

// serve is node from's transfer server answering r, which comes from node
// by: a server of the plugin now running there, its Nomad its own view.
func (w *XWorld) serve(from, by *xnode, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	srv, err := transfer.NewHandler(transfer.ServerConfig{
		Authorizer: &transfer.NomadAuthorizer{Nomad: xnomad{from},
			Self: func(context.Context) (string, error) { return from.id, nil }, ReplicaNodes: from.p.mgr.ReplicaNodes},
		Source:   from.p.mgr.Sender(),
		Replicas: from.p.mgr.Sender(),
		ZFS:      zfs.NewClient(from.p.run),
		Logger:   w.logger.Named(from.name).Named("transfer"),
	})
	if err != nil {
		w.violate("harness", "transfer server of %s: %v", from.name, err)
		rec.WriteHeader(http.StatusInternalServerError)
		return rec
	}
	r = r.Clone(r.Context())
	r.RemoteAddr = netip.AddrPortFrom(by.addr, 40000+uint16(by.i)).String()
	srv.ServeHTTP(rec, r)
	return rec
}

// tamper passes a stream for copy target on node by through the armed
// faults: a lie or a hostile sender, then a cut at a random byte or by the
// sending plugin's death, or a stall. A cut connection has no trailer; the
// receiver reads what came, then the error a broken connection gives.
func (w *XWorld) tamper(from, by *xnode, target string, resp *http.Response) *http.Response {
	body, _ := io.ReadAll(resp.Body)
	planned := resp.Header.Get("Ndz-Snapshot")
	told := w.link.lie
	if told != lieComplete && (w.link.killSender || w.link.cuts > 0) {
		told = lieNone // kept for a stream that arrives whole
	}
	switch told {
	case lieComplete:
		w.logf("  link: %s lies: complete (it planned %s)", from.name, planned)
		resp.StatusCode, resp.Status, body = http.StatusNoContent, "204 No Content", nil
		resp.Header = http.Header{"Ndz-Complete": {"true"}}
		resp.Trailer = nil
	case lieGUID:
		g, _ := strconv.ParseUint(resp.Header.Get("Ndz-Snapshot-Guid"), 10, 64)
		resp.Header.Set("Ndz-Snapshot-Guid", strconv.FormatUint(g^0x5a5a, 10))
		w.logf("  link: %s lies: names guid %d", from.name, g^0x5a5a)
	case lieOther:
		other := from.otherSnapshot(planned)
		if other == "" {
			told = lieNone // kept for the next stream
			break
		}
		var stream bytes.Buffer
		if err := zfs.NewClient(from.p.run).Send(context.Background(),
			zfs.SendOptions{Snapshot: other, Compressed: true, LargeBlocks: true, Embedded: true}, &stream); err != nil {
			told = lieNone
			break
		}
		body = stream.Bytes()
		w.logf("  link: %s lies: sends %s for %s", from.name, other, planned)
	case lieName:
		stream, err := from.foreign(snapName(planned))
		if err != nil {
			w.violate("harness", "%s: a liar's stream: %v", from.name, err)
			told = lieNone
			break
		}
		body = stream
		w.logf("  link: %s lies: sends foreign data as %s", from.name, planned)
	}
	if told != lieNone {
		w.link.told, w.link.lie = told, lieNone
		w.counts.Lies++
	}
	if told == lieNone && resp.StatusCode == http.StatusOK && !w.link.killSender && w.link.cuts == 0 {
		body = w.hostile(from, target, resp.Header, body)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body = io.NopCloser(bytes.NewReader(nil))
		return resp
	}
	var rd io.Reader = bytes.NewReader(body)
	switch {
	case w.link.killSender:
		w.link.killSender = false
		w.counts.PeerKills++
		from.p.run.dead = true
		at := w.rng.IntN(len(body) + 1)
		w.logf("  link: %s's plugin dies at byte %d of %d", from.name, at, len(body))
		rd, resp.Trailer = io.MultiReader(bytes.NewReader(body[:at]), errReader{io.ErrUnexpectedEOF}), nil
	case w.link.cuts > 0:
		w.link.cuts--
		w.counts.Cuts++
		at := w.rng.IntN(len(body) + 1)
		w.logf("  link: stream cut at byte %d of %d", at, len(body))
		rd, resp.Trailer = io.MultiReader(bytes.NewReader(body[:at]), errReader{errors.New("read tcp: connection reset by peer")}), nil
	case w.link.stalls > 0 && told == lieNone:
		// (A lie's stream is never stalled: the fetch that sees it would
		// then end after others, and the lie told is the world's one.)
		w.link.stalls--
		rd = w.stalled(from, by, body)
	}
	resp.Body = io.NopCloser(rd)
	return resp
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// otherSnapshot is a snapshot of another dataset on the node, for a lie.
func (n *xnode) otherSnapshot(not string) string {
	ds, _, _ := strings.Cut(not, "@")
	sets, err := zfs.NewClient(n.fake).List(context.Background(), parent, nil)
	if err != nil {
		return ""
	}
	for _, s := range sets {
		if name, _, ok := strings.Cut(s.Name, "@"); ok && name != ds && strings.HasPrefix(s.Name, parent+"/") {
			return s.Name
		}
	}
	return ""
}

// foreign is a liar's full stream of a snapshot named snap of data that no
// allocation wrote (a token no task holds), taken outside the parent and
// gone once sent.
func (n *xnode) foreign(snap string) ([]byte, error) {
	n.w.link.lies++
	ds := fmt.Sprintf("%s/liar-%d", pool, n.w.link.lies)
	ctx := context.Background()
	z := zfs.NewClient(n.fake)
	if err := z.Create(ctx, ds, nil); err != nil {
		return nil, err
	}
	defer func() { _, _ = n.fake.Run(ctx, "zfs", "destroy", "-r", ds) }()
	name := fmt.Sprintf("token-lie-%d", n.w.link.lies)
	if err := os.WriteFile(filepath.Join(n.fake.Mountpoint(ds), name), []byte(name), 0o644); err != nil {
		return nil, err
	}
	if err := z.Snapshot(ctx, ds+"@"+snap, nil); err != nil {
		return nil, err
	}
	var stream bytes.Buffer
	err := z.Send(ctx, zfs.SendOptions{Snapshot: ds + "@" + snap}, &stream)
	return stream.Bytes(), err
}

func snapName(s string) string {
	_, n, _ := strings.Cut(s, "@")
	return n
}
