package transfer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Locator finds the peer that holds an allocation's data: where its
// plugin's transfer server listens.
type Locator interface {
	Locate(ctx context.Context, allocID string) (netip.AddrPort, error)
}

// NomadLocator finds it through the Nomad API: the allocation's node, and
// the address and port that node's plugin publishes (AttrAddress,
// AttrPort), else the node's address as Nomad lists it. No list of peers
// is kept anywhere.
type NomadLocator struct {
	Nomad Nomad
}

var _ Locator = NomadLocator{}

// Locate implements Locator. An allocation or node Nomad does not know,
// or a node whose plugin publishes no port, is ErrNoPeer.
func (l NomadLocator) Locate(ctx context.Context, allocID string) (netip.AddrPort, error) {
	a, err := l.Nomad.Allocation(ctx, allocID)
	if errors.Is(err, ErrUnknown) {
		return netip.AddrPort{}, fmt.Errorf("%w: %w", ErrNoPeer, err)
	}
	if err != nil {
		return netip.AddrPort{}, err
	}
	n, err := l.Nomad.Node(ctx, a.NodeID)
	if errors.Is(err, ErrUnknown) {
		return netip.AddrPort{}, fmt.Errorf("%w: allocation %s's node: %w", ErrNoPeer, allocID, err)
	}
	if err != nil {
		return netip.AddrPort{}, err
	}
	if n.TransferPort <= 0 || n.TransferPort > 65535 {
		return netip.AddrPort{}, fmt.Errorf("%w: node %s (%s), where allocation %s ran, publishes no %s: its plugin has no transfer block",
			ErrNoPeer, n.ID, n.Name, allocID, AttrPort)
	}
	addr := n.TransferAddr
	if !addr.IsValid() && len(n.Addresses) > 0 {
		addr = n.Addresses[0]
	}
	if !addr.IsValid() {
		return netip.AddrPort{}, fmt.Errorf("%w: node %s (%s) has no address", ErrNoPeer, n.ID, n.Name)
	}
	return netip.AddrPortFrom(addr, uint16(n.TransferPort)), nil
}

// ClientConfig configures a Client.
type ClientConfig struct {
	Config  Config
	Locator Locator
	// ZFS runs zfs receive; its runner must stream (zfs.Streamer).
	ZFS    *zfs.Client
	Logger hclog.Logger
	// HeaderTimeout bounds the wait for the sender's answer, before its
	// stream (it decides, and may decode a token: a few zfs commands).
	// Default 2 minutes.
	HeaderTimeout time.Duration
	// Transport, when set, carries the requests instead of mutual TLS over
	// TCP: a test or a simulation joins this Client to a Server's
	// ServeHTTP in memory (NewHandler), and runs the client's own checks
	// over a transport it controls. Config is then neither checked nor
	// used. The plugin leaves it nil.
	Transport http.RoundTripper
	// Observer is told of the bytes each stream reads from its peer
	// (default: nobody).
	Observer Observer
}

// Fetcher is what the receiving side's lifecycle calls to bring an
// allocation's data over; *Client is the real one, and a simulation or a
// test of the lifecycle can put its own in its place.
type Fetcher interface {
	Fetch(ctx context.Context, req Request, into Into) (Result, error)
}

var _ Fetcher = (*Client)(nil)

// Client fetches allocations' data from peers.
type Client struct {
	c    ClientConfig
	http *http.Client
}

// NewClient checks c and returns a Client.
func NewClient(c ClientConfig) (*Client, error) {
	if c.Locator == nil || c.ZFS == nil {
		return nil, errors.New("transfer client: Locator and ZFS are required")
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.Transport != nil {
		return &Client{c: c, http: &http.Client{Transport: c.Transport}}, nil
	}
	if err := c.Config.Validate(); err != nil {
		return nil, err
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = 2 * time.Minute
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if src := c.Config.sourceAddr(); src.IsValid() {
		dialer.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
	}
	tr := &http.Transport{
		DialContext:           dialer.DialContext,
		TLSClientConfig:       c.Config.clientTLS(),
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: c.HeaderTimeout,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
		Protocols:             http2Only(),
		HTTP2:                 http2Config(),
	}
	return &Client{c: c, http: &http.Client{Transport: tr}}, nil
}

// Into is where a fetched stream is received: Target, a filesystem that
// does not exist for a full stream, or holds the base snapshot (the
// request's HaveGUID) for an incremental, or holds the partial receive
// the request's ResumeToken resumes. Props are set on it (-o): the
// ownership mark, canmount. It is received resumable (-s) and unmounted
// (-u), and HostProps are excluded from the stream.
//
// A copy that changes between two fetches is "modified since its most
// recent snapshot" and the next incremental fails with
// zfs.ErrDestinationModified: mounting it read-write is enough (reading
// it updates atimes). Keep it unmounted until the last fetch, or mount it
// read-only (-o ro, or readonly=on in Props), or roll it back to its
// newest snapshot before fetching again.
type Into struct {
	Target string
	Props  map[string]string
	// Exclude are more properties of the stream Fetch does not take (-x),
	// beside HostProps: the receiver's own rule (model.ReceiveExclude).
	Exclude []string
	// Beside, when set, is where a whole stream is received when the
	// request names a base (HaveGUID) and the sender sends whole: it no
	// longer has that base (a replica's pull, model.ReplicaSend.StartOver).
	// Target is then left as it is, a copy the caller keeps until the
	// whole one is in. Its own Beside is not read. nil: into Target, which
	// then refuses a whole stream (zfs.ErrExists).
	Beside *Into
	// UserProps are the user properties of the listing Fetch verifies the
	// received snapshot on (Result.Rows).
	UserProps []string
}

// HostProps are properties a stream could carry (a sender's -p) that act
// on the receiving host beyond the dataset's own data: where it mounts,
// what it shares, whether setuid binaries and devices work in it. Fetch
// never takes them from a peer (-x); Into.Props may still set them.
var HostProps = []string{"canmount", "devices", "exec", "mountpoint", "setuid", "sharenfs", "sharesmb", "zoned"}

// Result is a fetched and verified copy.
type Result struct {
	// Complete: the sender says the request's HaveGUID is its final
	// snapshot: the copy is whole, and nothing was received.
	Complete bool
	// Snapshot is the snapshot received, Target@<the sent one's name>, and
	// GUID its guid: the same as the sender's.
	Snapshot string
	GUID     uint64
	// FromGUID is the incremental's base, 0 for a full stream.
	FromGUID uint64
	// Beside: the whole stream was received into Into.Beside.
	Beside  bool
	Bytes   int64
	Resumed bool
	Peer    netip.AddrPort
	// Rows are the target (Into.Target, or Into.Beside's when Beside) as
	// listed once the snapshot was received, the listing its guid was
	// verified on (zfs.Client.ListAll: volumes too, with the target's
	// UserProps): the receiver decides on it without listing the copy
	// again. Nil when nothing was received.
	Rows []zfs.Dataset
}

// Fetch asks the peer holding req.Alloc's data (Locator) for it and
// receives the stream into into.Target (into.Beside for a whole stream
// that answers a request from a base). It returns only once zfs receive
// has finished and the received snapshot is on Target with the guid the
// sender named: then the copy is complete and verified (zfs checks the
// stream's checksums as it receives).
//
// Failures, by what the caller does next:
//   - zfs.ErrInterrupted: the stream was cut (peer gone, network, ctx).
//     Target keeps what came; ask again with ResumeToken set to its
//     receive_resume_token (zfs.Client.ResumeToken).
//   - ErrResumeRefused: the sender will not resume that token. Abort the
//     partial receive (zfs.Client.ReceiveAbort) and ask again without it.
//   - ErrRefused: the sender's Nomad does not see this node as where
//     req.Replacement runs. ErrNoData, ErrNoPeer: nothing to fetch there.
//   - ErrPeerBusy: ask again later.
//   - ErrStartOver: the copy no longer lines up with the sender's data
//     (zfs.ErrDestinationModified, zfs.ErrIncrementalMismatch, or
//     ErrNotVerified): drop it and ask again from nothing.
//   - ErrNotFilesystem: the stream is not of a filesystem
//     (zfs.ErrWrongType); every stream from that node is the same.
//   - zfs.ErrNoSpace, ...: as zfs receive said.
//
// Every failure is classified once, here (Classify).
func (c *Client) Fetch(ctx context.Context, req Request, into Into) (Result, error) {
	res, err := c.fetch(ctx, req, into)
	return res, Classify(err)
}

// fetch is Fetch before its failure is classified.
func (c *Client) fetch(ctx context.Context, req Request, into Into) (Result, error) {
	if err := req.validate(); err != nil {
		return Result{}, err
	}
	opts, err := receiveOptions(into)
	if err != nil {
		return Result{}, err
	}
	besideOpts := opts
	if into.Beside != nil {
		if besideOpts, err = receiveOptions(*into.Beside); err != nil {
			return Result{}, err
		}
	}
	peer, err := c.c.Locator.Locate(ctx, req.Alloc)
	if err != nil {
		return Result{}, fmt.Errorf("finding allocation %s's node: %w", req.Alloc, err)
	}
	res := Result{Peer: peer, Resumed: req.ResumeToken != ""}
	resp, err := c.post(ctx, peer, req)
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent && resp.Header.Get(hdrComplete) == "true" {
		res.Complete = true
		return res, nil
	}
	name, guid, from, err := streamHeaders(resp.Header)
	if err != nil {
		return res, fmt.Errorf("peer %s: %w", peer, err)
	}
	res.GUID, res.FromGUID = guid, from
	listed := into
	if from == 0 && req.HaveGUID != 0 && into.Beside != nil {
		opts, res.Beside, listed = besideOpts, true, *into.Beside
	}
	res.Snapshot = opts.Target + "@" + name
	start := time.Now()
	body := &countingReader{r: resp.Body, kind: observedKind(req.Kind), obs: c.c.Observer}
	err = c.c.ZFS.Receive(ctx, opts, body)
	res.Bytes = body.n
	if err != nil {
		if t := resp.Trailer.Get(trailerResult); strings.HasPrefix(t, "error: ") {
			err = fmt.Errorf("%w (the sender: %s)", err, strings.TrimPrefix(t, "error: "))
		}
		return res, fmt.Errorf("receiving %s from %s into %s: %w", resp.Header.Get(hdrSnapshot), peer, opts.Target, err)
	}
	if res.Rows, err = c.verify(ctx, listed, res); err != nil {
		return res, err
	}
	c.c.Logger.Info("received", "alloc_id", req.Alloc, "replacement_id", req.Replacement, "peer", peer.String(),
		"snapshot", res.Snapshot, "bytes", res.Bytes, "duration", time.Since(start).Round(time.Millisecond).String(), "resumed", res.Resumed)
	return res, nil
}

// receiveOptions are zfs receive's for into: resumable, unmounted, its
// Props set, HostProps and its Exclude not taken unless set.
func receiveOptions(into Into) (zfs.ReceiveOptions, error) {
	opts := zfs.ReceiveOptions{Target: into.Target, Resumable: true, NoMount: true, Props: into.Props}
	for _, p := range slices.Concat(HostProps, into.Exclude) {
		if _, set := into.Props[p]; !set && !slices.Contains(opts.Exclude, p) {
			opts.Exclude = append(opts.Exclude, p)
		}
	}
	if _, err := zfs.ReceiveArgs(opts); err != nil {
		return opts, fmt.Errorf("%w: %w", zfs.ErrInvalid, err)
	}
	return opts, nil
}

// verify finds the received snapshot with the sender's guid in one
// listing of into.Target, which it returns.
func (c *Client) verify(ctx context.Context, into Into, res Result) ([]zfs.Dataset, error) {
	ds, err := c.c.ZFS.ListAll(ctx, into.Target, into.UserProps)
	if err != nil {
		return nil, fmt.Errorf("verifying %s: %w", res.Snapshot, err)
	}
	for _, d := range ds {
		if d.Name == res.Snapshot {
			if d.GUID != fmt.Sprint(res.GUID) {
				return nil, fmt.Errorf("%w: %s has guid %s, the sender's %d", ErrNotVerified, d.Name, d.GUID, res.GUID)
			}
			return ds, nil
		}
	}
	return nil, fmt.Errorf("%w: no %s after the receive", ErrNotVerified, res.Snapshot)
}

// post sends the request and returns a 200 response, or the peer's
// refusal as a *PeerError.
func (c *Client) post(ctx context.Context, peer netip.AddrPort, req Request) (*http.Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+peer.String()+sendPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	req.headers(hr.Header)
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("asking %s for allocation %s's data: %w", peer, req.Alloc, err)
	}
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNoContent {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxRequest))
	return nil, peerError(peer.String(), resp.StatusCode, raw)
}

// streamHeaders reads what the sender says it sends: the snapshot's
// short name (the received one takes it), its guid and the base's.
func streamHeaders(h http.Header) (name string, guid, from uint64, err error) {
	snap := h.Get(hdrSnapshot)
	if err := zfs.ValidateName(snap, true); err != nil {
		return "", 0, 0, fmt.Errorf("header %s: %w", hdrSnapshot, err)
	}
	_, name, _ = strings.Cut(snap, "@")
	if guid, err = headerGUID(h, hdrSnapshotGUID); err != nil {
		return "", 0, 0, err
	}
	if from, err = headerGUID(h, hdrFromGUID); err != nil {
		return "", 0, 0, err
	}
	return name, guid, from, nil
}

// countingReader counts what came in from the peer, for Result.Bytes
// and, as it goes, for the Observer: the one place a received byte is
// counted.
type countingReader struct {
	r    io.ReadCloser
	n    int64
	kind string // observedKind
	obs  Observer
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if n > 0 {
		c.obs.Received(c.kind, n)
	}
	return n, err
}

// Close lets zfsexec.Runner.Stream unblock a read the receive no longer
// needs.
func (c *countingReader) Close() error { return c.r.Close() }
