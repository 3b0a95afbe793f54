package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/hashicorp/nomad/nomad/structs"

	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// The transport between the two plugins, below the Fetcher seam: what
// transfer.Client.Fetch and transfer.Server.ServeHTTP do, step by step,
// with the sending node's own pieces (its view of Nomad for transfer.Decide,
// its Manager's Sender, its zfs for the token's check and the send) and
// the receiving node's zfs for the receive, the stream passed in memory.
// Faults act on it: a stream cut at a random byte, the sending plugin
// killed mid-stream, plugins that cannot reach each other, a node down,
// and a sender that lies.

// xfaults are the transport's faults now armed.
type xfaults struct {
	// cuts: the next streams are cut at a random byte.
	cuts int
	// killSender: the next stream is cut by the sending plugin's death.
	killSender bool
	// downTill: no connection between the plugins until then.
	downTill time.Time
	lie      lieKind
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
	numLies
)

func (l lieKind) String() string {
	return [...]string{"none", "a forged guid", "another allocation's data", "complete too early"}[l]
}

// xlink is the receiving node's Fetcher.
type xlink struct {
	w  *XWorld
	to *xnode
}

var _ transfer.Fetcher = (*xlink)(nil)

func peerErr(code string, err error) error {
	status := map[string]int{"refused": http.StatusForbidden, "no_data": http.StatusNotFound,
		"resume_refused": http.StatusConflict, "busy": http.StatusServiceUnavailable, "internal": http.StatusInternalServerError}[code]
	return &transfer.PeerError{Peer: "sim", Status: status, Code: code, Message: err.Error()}
}

// Fetch is transfer.Client.Fetch against the node that holds req.Alloc's
// data, with transfer.Server's checks on that side.
func (l *xlink) Fetch(ctx context.Context, req transfer.Request, into transfer.Into) (transfer.Result, error) {
	w := l.w
	from, err := l.locate(req.Alloc)
	if err != nil {
		return transfer.Result{}, err
	}
	if err := from.authorize(req, l.to); err != nil {
		return transfer.Result{}, peerErr("refused", err)
	}
	plan, err := from.p.mgr.Sender().Plan(ctx, req)
	switch {
	case errors.Is(err, transfer.ErrNoData):
		return transfer.Result{}, peerErr("no_data", err)
	case errors.Is(err, transfer.ErrPeerBusy):
		return transfer.Result{}, peerErr("busy", err)
	case err != nil:
		return transfer.Result{}, peerErr("internal", err)
	case !plan.Complete && (plan.ToGUID == 0 || (plan.Send.From == "") != (plan.FromGUID == 0)):
		return transfer.Result{}, peerErr("internal", fmt.Errorf("invalid plan %+v", plan))
	}
	if lie := w.link.lie; lie == lieComplete && !plan.Complete {
		w.link.lie = lieNone
		w.counts.Lies++
		w.logf("  link: %s lies: complete (it planned %s)", from.name, plan.Send.Snapshot)
		return transfer.Result{Complete: true}, nil
	}
	if plan.Complete {
		w.counts.Complete++
		return transfer.Result{Complete: true}, nil
	}
	z := zfs.NewClient(from.p.run)
	if req.ResumeToken != "" {
		tok, err := z.DecodeResumeToken(ctx, req.ResumeToken)
		if err == nil {
			err = zfs.CheckResumeToken(tok, zfs.ExpectFor(plan.Send, plan.ToGUID, plan.FromGUID, plan.Encrypted))
		}
		if err != nil {
			w.counts.TokensRefused++
			w.logf("  link: %s refuses the resume token: %v", from.name, short(err))
			return transfer.Result{}, peerErr("resume_refused", err)
		}
		w.counts.Resumes++
	}
	var stream bytes.Buffer
	send := plan.Send
	lie := w.link.lie
	if lie == lieOther {
		if other := from.otherSnapshot(send.Snapshot); other != "" {
			send = zfs.SendOptions{Snapshot: other, Compressed: true, LargeBlocks: true, Embedded: true}
			w.logf("  link: %s lies: sends %s for %s", from.name, other, plan.Send.Snapshot)
		} else {
			lie = lieNone
		}
	}
	if lie != lieNone {
		w.link.lie = lieNone
		w.counts.Lies++
	}
	if req.ResumeToken != "" && lie != lieOther {
		err = z.SendResume(ctx, req.ResumeToken, plan.Send.Raw, &stream)
	} else {
		err = z.Send(ctx, send, &stream)
	}
	w.counts.Streams++
	res := transfer.Result{Snapshot: into.Target + "@" + snapName(plan.Send.Snapshot), GUID: plan.ToGUID, FromGUID: plan.FromGUID,
		Resumed: req.ResumeToken != ""}
	if lie == lieGUID {
		res.GUID ^= 0x5a5a
		w.logf("  link: %s lies: names guid %d", from.name, res.GUID)
	}
	body, cutErr := l.cut(from, stream.Bytes(), err)
	opts := zfs.ReceiveOptions{Target: into.Target, Resumable: true, NoMount: true, Props: into.Props}
	for _, p := range transfer.HostProps {
		if _, set := into.Props[p]; !set {
			opts.Exclude = append(opts.Exclude, p)
		}
	}
	if err := zfs.NewClient(l.to.p.run).Receive(ctx, opts, body); err != nil {
		if cutErr != nil {
			err = fmt.Errorf("%w (the sender: %v)", err, cutErr)
		}
		return res, fmt.Errorf("receiving %s from %s into %s: %w", plan.Send.Snapshot, from.name, into.Target, err)
	}
	if err := l.verify(ctx, into.Target, res); err != nil {
		if lie != lieNone {
			w.counts.LiesCaught++
		}
		return res, err
	}
	return res, nil
}

// locate finds the plugin that holds the allocation's data: its node's,
// if it runs and the two can reach each other.
func (l *xlink) locate(alloc string) (*xnode, error) {
	w := l.w
	sa := w.cluster.Alloc(alloc)
	if sa == nil {
		return nil, fmt.Errorf("finding allocation %s's node: %w", alloc, transfer.ErrNoPeer)
	}
	from := w.node(sa.NodeID)
	switch {
	case from == nil:
		return nil, fmt.Errorf("finding allocation %s's node: %w", alloc, transfer.ErrNoPeer)
	case !from.connected || !l.to.connected || w.now.Before(w.link.downTill):
		return nil, fmt.Errorf("asking %s for allocation %s's data: dial tcp %s:4680: i/o timeout", from.name, alloc, from.addr)
	case from.p == nil || from.p.run.dead:
		return nil, fmt.Errorf("asking %s for allocation %s's data: dial tcp %s:4680: connect: connection refused", from.name, alloc, from.addr)
	}
	return from, nil
}

// authorize is the sending node's rule (transfer.NomadAuthorizer): its
// own view of Nomad, and the address the request comes from.
func (n *xnode) authorize(req transfer.Request, by *xnode) error {
	conv := func(sa *structs.Allocation) transfer.Alloc {
		if sa == nil {
			return transfer.Alloc{}
		}
		return transfer.Alloc{ID: sa.ID, NodeID: sa.NodeID, Namespace: sa.Namespace, JobID: sa.JobID, TaskGroup: sa.TaskGroup,
			PreviousAllocation: sa.PreviousAllocation, DesiredStatus: sa.DesiredStatus, ClientStatus: sa.ClientStatus}
	}
	a, b := n.w.cluster.Alloc(req.Alloc), n.w.cluster.Alloc(req.Replacement)
	if a == nil || b == nil {
		return fmt.Errorf("%w: an allocation Nomad does not know", transfer.ErrRefused)
	}
	var nodeB transfer.Node
	if bn := n.w.node(b.NodeID); bn != nil {
		nodeB = transfer.Node{ID: bn.id, Name: bn.name, Addresses: []netip.Addr{bn.addr}}
	}
	return transfer.Decide(n.id, req, conv(a), conv(b), nodeB, by.addr)
}

// cut passes the stream through the armed faults: cut at a random byte,
// or cut by the sending plugin's death. The receiver reads what came, then
// the error a broken connection gives.
func (l *xlink) cut(from *xnode, stream []byte, sendErr error) (io.Reader, error) {
	w := l.w
	switch {
	case sendErr != nil:
		return io.MultiReader(bytes.NewReader(stream), errReader{sendErr}), sendErr
	case w.link.killSender:
		w.link.killSender = false
		w.counts.PeerKills++
		from.p.run.dead = true
		at := w.rng.IntN(len(stream) + 1)
		w.logf("  link: %s's plugin dies at byte %d of %d", from.name, at, len(stream))
		return io.MultiReader(bytes.NewReader(stream[:at]), errReader{io.ErrUnexpectedEOF}), errKilled
	case w.link.cuts > 0:
		w.link.cuts--
		w.counts.Cuts++
		at := w.rng.IntN(len(stream) + 1)
		w.logf("  link: stream cut at byte %d of %d", at, len(stream))
		return io.MultiReader(bytes.NewReader(stream[:at]), errReader{errors.New("read tcp: connection reset by peer")}), nil
	}
	return bytes.NewReader(stream), nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// verify is transfer.Client's: the snapshot the sender named is on the
// target with the guid it named.
func (l *xlink) verify(ctx context.Context, target string, res transfer.Result) error {
	sets, err := zfs.NewClient(l.to.p.run).List(ctx, target, nil)
	if err != nil {
		return fmt.Errorf("verifying %s: %w", res.Snapshot, err)
	}
	for _, d := range sets {
		if d.Name == res.Snapshot {
			if d.GUID != fmt.Sprint(res.GUID) {
				return fmt.Errorf("%w: %s has guid %s, the sender's %d", transfer.ErrNotVerified, d.Name, d.GUID, res.GUID)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: no %s after the receive", transfer.ErrNotVerified, res.Snapshot)
}

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

func snapName(s string) string {
	_, n, _ := strings.Cut(s, "@")
	return n
}

// forge asks a node, as someone who is not the replacement's node, for an
// allocation's data: another allocation as the replacement, the right
// replacement from the wrong node, or a resume token of another
// dataset's snapshot. The sender must refuse, and send nothing.
func (w *XWorld) forge() {
	var as []*structs.Allocation
	for _, n := range w.nodes {
		for _, sa := range w.cluster.Allocs(n.id) {
			if d := w.data[sa.ID]; d != nil && d.started {
				as = append(as, sa)
			}
		}
	}
	if len(as) == 0 {
		return
	}
	a := as[w.rng.IntN(len(as))]
	from := w.node(a.NodeID)
	slot := ""
	for _, t := range a.AllocatedResources.Tasks {
		for _, d := range t.Devices {
			slot = d.DeviceIDs[0]
		}
	}
	req := transfer.Request{Alloc: a.ID, Slot: slot}
	by := w.other(from)
	var b *structs.Allocation
	if next := w.cluster.Alloc(a.NextAllocation); next != nil {
		b = next
	}
	switch w.rng.IntN(3) {
	case 0: // some other allocation as the replacement
		o := as[w.rng.IntN(len(as))]
		if o.ID == a.ID || o.PreviousAllocation == a.ID {
			return
		}
		req.Replacement = o.ID
	case 1: // the real replacement, asked from the node it is not on
		if b == nil {
			return
		}
		req.Replacement = b.ID
		by = w.node(b.NodeID)
		by = w.other(by)
	default: // a token of another dataset's snapshot
		if b == nil || w.node(b.NodeID) == from {
			return
		}
		other := from.otherSnapshot(parent + "/pg/none@x")
		if other == "" {
			return
		}
		req.Replacement, by = b.ID, w.node(b.NodeID)
		if req.ResumeToken = forgedToken(other, from); req.ResumeToken == "" {
			return
		}
	}
	w.counts.Forged++
	if from.p == nil || from.p.run.dead {
		return
	}
	err := from.authorize(req, by)
	if err == nil && req.ResumeToken == "" {
		w.violate("X3", "%s would send %s's data to %s for %s, which is not its replacement there", from.name, shortID(a.ID), by.name, shortID(req.Replacement))
		return
	}
	if err == nil {
		// Authorized; the token must still be refused before any stream.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		plan, perr := from.p.mgr.Sender().Plan(ctx, req)
		if perr == nil && !plan.Complete {
			z := zfs.NewClient(from.p.run)
			tok, derr := z.DecodeResumeToken(ctx, req.ResumeToken)
			if derr == nil && zfs.CheckResumeToken(tok, zfs.ExpectFor(plan.Send, plan.ToGUID, plan.FromGUID, plan.Encrypted)) == nil {
				w.violate("X3", "%s accepts a resume token of another dataset's snapshot for %s's data", from.name, shortID(a.ID))
				return
			}
		}
	}
	w.counts.ForgedRefused++
	w.logf("forged request to %s for %s's data (replacement %s, from %s): refused", from.name, shortID(a.ID), shortID(req.Replacement), by.name)
}

// forgedToken is a resume token for the whole of snapshot snap of node n,
// as a receiver could forge it: zfs on n decodes it.
func forgedToken(snap string, n *xnode) string {
	sets, err := zfs.NewClient(n.fake).List(context.Background(), snap, nil)
	if err != nil || len(sets) == 0 {
		return ""
	}
	var guid uint64
	_, _ = fmt.Sscan(sets[0].GUID, &guid)
	return zfstest.EncodeResumeToken(zfs.ResumeToken{ToName: snap, ToGUID: guid, CompressOK: true, LargeBlockOK: true, EmbedOK: true})
}
