package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Source says what this node sends for a request it has allowed: the
// lifecycle's decision, made from its own state (which dataset holds the
// allocation's data, which snapshot a transfer sends, which of its
// snapshots has the guid the requester holds).
type Source interface {
	// Send returns the send for req, its snapshot taken. ErrNoData:
	// nothing of req.Alloc's is here. It is asked again for a resumed
	// transfer, and a token is accepted only if it resumes exactly what
	// Send says now.
	Send(ctx context.Context, req model.SendRequest) (model.Send, error)
}

// ReplicaSource says what this node sends for a replica's pull it has
// allowed (KindReplica): the holder's answer, decided from its slot as it
// is (hooks.Sender.SendReplica). ErrNoData: the slot is not held by the
// allocation, or its class keeps no replicas.
type ReplicaSource interface {
	SendReplica(ctx context.Context, req model.ReplicaSendRequest) (model.Send, error)
}

// validateSend is the server's own check of a Source's send: it names
// its snapshot's guid, its base and the base's guid agree, an encrypted
// dataset goes out raw (never decrypted), and zfs can send it.
func validateSend(s model.Send) error {
	if s.Complete {
		return nil
	}
	if s.ToGUID == 0 {
		return errors.New("the send names no snapshot guid")
	}
	if (s.Options.From == "") != (s.FromGUID == 0) {
		return fmt.Errorf("the send's base %q and its guid %d disagree", s.Options.From, s.FromGUID)
	}
	if s.Encrypted && !s.Options.Raw {
		return fmt.Errorf("%s is encrypted and the send is not raw: it would go out decrypted", s.Options.Snapshot)
	}
	_, err := zfs.SendArgs(s.Options)
	return err
}

// ServerConfig configures a Server.
type ServerConfig struct {
	Config     Config
	Authorizer Authorizer
	Source     Source
	// Replicas answers replica pulls; nil: each is answered no_data.
	Replicas ReplicaSource
	// ZFS runs zfs send; its runner must stream (zfs.Streamer).
	ZFS    *zfs.Client
	Logger hclog.Logger
	// MaxSends bounds concurrent sends (default DefaultMaxSends); more
	// requests are answered busy.
	MaxSends int
	// MaxPerPeer bounds the requests one address may have in the server
	// at once, from its first byte to its last (default DefaultMaxPerPeer);
	// more are answered busy with Retry-After, before anything is read.
	MaxPerPeer int
	// BodyTimeout bounds the reading of a request's body (default
	// DefaultBodyTimeout): a peer that sends its headers and then stalls
	// holds a handler that long, not for ever.
	BodyTimeout time.Duration
	// DecisionTTL is how long the Authorizer's decision for one pair of
	// allocations, peer address and certificate is kept (default
	// DefaultDecisionTTL); Lookups the decisions a second it is asked for
	// beyond those (default DefaultLookups, in bursts of twice that).
	DecisionTTL time.Duration
	Lookups     float64
	// Observer is told of the bytes each stream writes to its peer
	// (default: nobody).
	Observer Observer
}

// DefaultDecisionTTL: a pull asks again within seconds while it resumes;
// a replacement that ends meanwhile is refused that much later at most.
const DefaultDecisionTTL = 5 * time.Second

// DefaultLookups: a node moves a few slots at a time; each decision is
// three Nomad lookups.
const DefaultLookups = 10

// DefaultMaxPerPeer: a node pulls one stream per slot it receives; a few
// more leave room for a pull that restarts while the old one winds down.
const DefaultMaxPerPeer = 8

// DefaultBodyTimeout: a request is a few hundred bytes.
const DefaultBodyTimeout = 10 * time.Second

// retryAfter is what a busy answer asks a peer to wait, in seconds.
const retryAfter = "5"

// DefaultMaxSends: a few streams at once keep a pool's disks busy without
// letting a burst of requests run the node out of I/O.
const DefaultMaxSends = 4

// Server answers peers' requests with zfs send streams.
type Server struct {
	c      ServerConfig
	logger hclog.Logger
	slots  chan struct{}

	mu     sync.Mutex
	inside map[netip.Addr]int // requests in the server, by peer address

	decisions *decisions // the Authorizer, cached and rate-limited
}

// NewServer checks c and returns a Server; Run starts it.
func NewServer(c ServerConfig) (*Server, error) {
	if err := c.Config.Validate(); err != nil {
		return nil, err
	}
	return NewHandler(c)
}

// NewHandler is a Server for its ServeHTTP alone, c.Config not checked:
// what a test or a simulation joins to a Client's Transport in memory, so
// that the server's own authorization, send and token checks answer it.
// Its Run and Serve have no TLS material to serve with; the plugin uses
// NewServer.
func NewHandler(c ServerConfig) (*Server, error) {
	if c.Authorizer == nil || c.Source == nil || c.ZFS == nil {
		return nil, errors.New("transfer server: Authorizer, Source and ZFS are required")
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.MaxSends <= 0 {
		c.MaxSends = DefaultMaxSends
	}
	if c.MaxPerPeer <= 0 {
		c.MaxPerPeer = DefaultMaxPerPeer
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.DecisionTTL <= 0 {
		c.DecisionTTL = DefaultDecisionTTL
	}
	if c.Lookups <= 0 {
		c.Lookups = DefaultLookups
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	return &Server{c: c, logger: c.Logger, slots: make(chan struct{}, c.MaxSends), inside: map[netip.Addr]int{},
		decisions: newDecisions(c.Authorizer, c.DecisionTTL, c.Lookups, int(2*c.Lookups))}, nil
}

// Run listens on Config.Address and serves until ctx ends; then it closes
// every connection, cutting any stream (its receiver resumes later). It
// returns nil when ctx ended, or why it could not listen.
func (s *Server) Run(ctx context.Context) error {
	ln, err := s.Listen()
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// Listen opens the listening socket (for Serve; Run does both).
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.c.Config.Address)
	if err != nil {
		return nil, fmt.Errorf("transfer: listening on %s: %w", s.c.Config.Address, err)
	}
	return ln, nil
}

// Serve serves on ln until ctx ends, as Run.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		TLSConfig:         s.c.Config.serverTLS(),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		// What net/http logs is a refused handshake or a broken
		// connection: a peer refused, a warning like any other refusal.
		ErrorLog:    s.logger.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
		BaseContext: func(net.Listener) context.Context { return ctx },
		Protocols:   http2Only(),
		HTTP2:       http2Config(),
	}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	s.logger.Info("transfer server listening", "address", ln.Addr().String(), "region", s.c.Config.Region)
	err := srv.ServeTLS(ln, "", "")
	if ctx.Err() != nil && errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("transfer: serving on %s: %w", ln.Addr(), err)
}

// ServeHTTP handles one request: authorize, ask the Source what to send
// (Send), check a resume token, stream.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != sendPath || r.Method != http.MethodPost {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	ctx := r.Context()
	peer := Peer{Addr: remoteAddr(r.RemoteAddr)}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		peer.Cert = r.TLS.PeerCertificates[0]
	}
	if !s.enter(peer.Addr) {
		s.logger.Warn("too many requests from one peer at once; asked to come back", "remote", peer.Addr, "max_per_peer", s.c.MaxPerPeer)
		w.Header().Set("Retry-After", retryAfter)
		writeError(w, "busy", fmt.Errorf("too many requests from %s at once", peer.Addr))
		return
	}
	defer s.leave(peer.Addr)
	// Authorized on the headers, before a byte of the body is read: a
	// peer that may not have the data holds no handler while it sends.
	claim := claimed(r.Header)
	if err := claim.validateIDs(); err != nil {
		s.logger.Warn("transfer request without its allocations in the headers", "remote", peer.Addr, "error", err)
		writeError(w, "bad_request", fmt.Errorf("headers %s, %s, %s and %s: %w", hdrAlloc, hdrReplacement, hdrKind, hdrSlot, err))
		return
	}
	log := s.logger.With("alloc_id", claim.Alloc, "replacement_id", claim.Replacement, "remote", peer.Addr)
	if claim.Kind == KindReplica {
		log = s.logger.With("alloc_id", claim.Alloc, "kind", claim.Kind, "slot", claim.Slot, "remote", peer.Addr)
	}
	if err := s.decisions.Authorize(ctx, claim, peer); err != nil {
		if errors.Is(err, ErrRefused) {
			// The reason stays here: it names the replacement's node, its
			// addresses and both allocations, which a peer that is not
			// that node has no business learning.
			log.Warn("refused a transfer request", "reason", err)
			writeError(w, "refused", errRefusedOnWire)
			return
		}
		log.Warn("cannot decide on a transfer request now; asked to come back", "error", err)
		w.Header().Set("Retry-After", retryAfter)
		writeError(w, "busy", errors.New("cannot decide now"))
		return
	}
	var req Request
	// A peer that stalls in its body is cut at BodyTimeout. (A transport
	// without deadlines, as a test's in memory, has none to set.)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.c.BodyTimeout))
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		log.Warn("unreadable transfer request", "error", err)
		writeError(w, "bad_request", fmt.Errorf("reading the request: %w", err))
		return
	}
	_ = rc.SetReadDeadline(time.Time{})
	if !claim.matches(req) {
		log.Warn("refused a transfer request whose body names other allocations than its headers",
			"body_alloc_id", req.Alloc, "body_replacement_id", req.Replacement, "body_kind", req.Kind, "body_slot", req.Slot)
		writeError(w, "refused", errRefusedOnWire)
		return
	}
	if err := req.validate(); err != nil {
		log.Warn("invalid transfer request", "error", err)
		writeError(w, "bad_request", err)
		return
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		log.Warn("too many transfers at once; asked to come back", "max_sends", s.c.MaxSends)
		writeError(w, "busy", fmt.Errorf("%d transfers are running", s.c.MaxSends))
		return
	}
	spec, err := s.send(ctx, req)
	if err == nil {
		err = validateSend(spec)
	}
	switch {
	case errors.Is(err, ErrNoData):
		log.Info("nothing to send for the allocation", "reason", err)
		writeError(w, "no_data", err)
		return
	case errors.Is(err, ErrPeerBusy):
		log.Debug("cannot send now; asked to come back", "reason", err)
		writeError(w, "busy", err)
		return
	case errors.Is(err, ErrResumeRefused):
		// The Source decoded the token first, and zfs could not
		// (model.DecideSendMove): refused as checkToken refuses one.
		log.Info("cannot resume from the token", "reason", err)
		writeError(w, "resume_refused", err)
		return
	case err != nil:
		log.Error("cannot decide a transfer", "error", err)
		writeError(w, "internal", err)
		return
	}
	if spec.Complete {
		log.Info("the requester holds the final copy")
		w.Header().Set(hdrComplete, "true")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	log = log.With("snapshot", spec.Options.Snapshot, "from", spec.Options.From)
	if req.ResumeToken != "" {
		if err := s.checkToken(ctx, req.ResumeToken, spec); err != nil {
			if errors.Is(err, zfs.ErrResumeTokenRefused) {
				log.Warn("refused a resume token that does not resume this transfer", "reason", err)
			} else {
				log.Info("cannot resume from the token", "reason", err)
			}
			writeError(w, "resume_refused", err)
			return
		}
	}
	s.stream(ctx, w, req, spec, log)
}

// send asks the Source, or for a replica's pull the ReplicaSource, what
// to send for req.
func (s *Server) send(ctx context.Context, req Request) (model.Send, error) {
	if req.Kind != KindReplica {
		return s.c.Source.Send(ctx, req.model())
	}
	if s.c.Replicas == nil {
		return model.Send{}, fmt.Errorf("%w: this node answers no replica pulls", ErrNoData)
	}
	spec, err := s.c.Replicas.SendReplica(ctx, req.replicaModel())
	if err == nil && spec.Complete {
		// A replica is never "complete": its holder still runs.
		err = errors.New("a replica's send names no snapshot")
	}
	return spec, err
}

// errRefusedOnWire is all a refused peer is told.
var errRefusedOnWire = errors.New("refused (the sending node's log says why)")

// enter counts a request of peer in; false when peer has MaxPerPeer in
// already.
func (s *Server) enter(peer netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inside[peer] >= s.c.MaxPerPeer {
		return false
	}
	s.inside[peer]++
	return true
}

func (s *Server) leave(peer netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inside[peer]--; s.inside[peer] <= 0 {
		delete(s.inside, peer)
	}
}

// checkToken decodes a token with zfs and checks it against the send
// (zfs.CheckResumeToken). A token zfs cannot decode is refused too.
func (s *Server) checkToken(ctx context.Context, token string, spec model.Send) error {
	tok, err := s.c.ZFS.DecodeResumeToken(ctx, token)
	if err != nil {
		return fmt.Errorf("decoding the resume token: %w", err)
	}
	return zfs.CheckResumeToken(tok, zfs.ExpectFor(spec.Options, spec.ToGUID, spec.FromGUID, spec.Encrypted))
}

// stream sends the headers, then zfs send's stream, then the result as a
// trailer. A failure after the headers can only be told in the trailer:
// the body then ends early, and the receiver's zfs receive keeps what came.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, req Request, spec model.Send, log hclog.Logger) {
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set(hdrSnapshot, spec.Options.Snapshot)
	h.Set(hdrSnapshotGUID, strconv.FormatUint(spec.ToGUID, 10))
	h.Set(hdrFromGUID, strconv.FormatUint(spec.FromGUID, 10))
	h.Set(hdrResumed, strconv.FormatBool(req.ResumeToken != ""))
	h.Set("Trailer", trailerResult)
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()

	start := time.Now()
	cw := &countingWriter{w: w, kind: observedKind(req.Kind), obs: s.c.Observer}
	var err error
	if req.ResumeToken != "" {
		err = s.c.ZFS.SendResume(ctx, req.ResumeToken, spec.Options.Raw, cw)
	} else {
		err = s.c.ZFS.Send(ctx, spec.Options, cw)
	}
	if err != nil {
		h.Set(trailerResult, "error: "+err.Error())
		log.Warn("send ended early", "bytes", cw.n, "duration", time.Since(start).Round(time.Millisecond).String(), "error", err)
		return
	}
	h.Set(trailerResult, "ok")
	log.Info("sent", "bytes", cw.n, "duration", time.Since(start).Round(time.Millisecond).String(), "resumed", req.ResumeToken != "")
}

// countingWriter counts what went out to the peer, for the stream's log
// line and, as it goes, for the Observer: the one place a sent byte is
// counted.
type countingWriter struct {
	w    io.Writer
	n    int64
	kind string // observedKind
	obs  Observer
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if n > 0 {
		c.obs.Sent(c.kind, n)
	}
	return n, err
}

// remoteAddr is a request's source address.
func remoteAddr(s string) netip.Addr {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// http2Only: both ends speak HTTP/2 over TLS and nothing else.
func http2Only() *http.Protocols {
	var p http.Protocols
	p.SetHTTP2(true)
	return &p
}

// http2Config makes a dead connection noticed in about a minute, on
// either end, instead of when TCP gives up: a ping after 30 s without a
// frame, closed if unanswered in 15 s or if nothing could be written for a
// minute (a peer that stopped reading).
//
// MaxReadFrameSize lets the sender write the stream in frames of up to
// 1 MiB instead of HTTP/2's default 16 KiB: each write of the body goes
// out as one frame, and the writes are as large as a read of zfs send's
// stdout (256 KiB: zfsexec widens its pipes), not 16 KiB pieces, each of
// which costs the frame writer an allocation, a pass through its
// scheduler and a TLS record for its 9-byte header.
//
// The flow-control windows are Go's (4 MiB a stream at the receiver):
// wider ones moved the bytes no faster on loopback, and a window is what
// the receiving process may hold of a stream while zfs receive is slower
// than the network (docs/performance.md, "Moving data between nodes").
func http2Config() *http.HTTP2Config {
	return &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second, WriteByteTimeout: time.Minute,
		MaxReadFrameSize: 1 << 20}
}
