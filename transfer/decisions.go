package transfer

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// decisions puts a cache and a rate limit in front of the Authorizer: each
// of its decisions costs three Nomad lookups (A, B, B's node), and any
// holder of a cluster certificate can send requests. A decision, allowed
// or refused, holds for ttl for the same allocations, peer address and
// certificate; lookups beyond the limit are not made, and the request is
// answered busy (its peer comes back after Retry-After). A lookup that
// failed is not kept: the next request asks again.
type decisions struct {
	inner Authorizer
	ttl   time.Duration
	limit *rate.Limiter
	now   func() time.Time

	mu sync.Mutex
	m  map[decisionKey]decision
}

type decisionKey struct {
	kind, alloc, replacement, slot string
	peer                           netip.Addr
	cert                           [sha256.Size]byte
}

type decision struct {
	err   error
	until time.Time
}

// maxDecisions bounds the cache: a burst of distinct requests empties it
// rather than growing it.
const maxDecisions = 4096

// errLookupsLimited: more decisions than the rate limit allows are asked
// for; the peer is told busy.
var errLookupsLimited = errors.New("too many authorization lookups at once; ask again later")

func newDecisions(inner Authorizer, ttl time.Duration, perSecond float64, burst int) *decisions {
	return &decisions{inner: inner, ttl: ttl, limit: rate.NewLimiter(rate.Limit(perSecond), burst), now: time.Now,
		m: map[decisionKey]decision{}}
}

// Authorize is the inner Authorizer's decision for req from peer, cached.
func (d *decisions) Authorize(ctx context.Context, req Request, peer Peer) error {
	key := decisionKey{kind: req.Kind, alloc: req.Alloc, replacement: req.Replacement, slot: req.Slot, peer: peer.Addr}
	if peer.Cert != nil {
		key.cert = sha256.Sum256(peer.Cert.Raw)
	}
	now := d.now()
	d.mu.Lock()
	c, ok := d.m[key]
	d.mu.Unlock()
	if ok && now.Before(c.until) {
		return c.err
	}
	if !d.limit.AllowN(now, 1) {
		return errLookupsLimited
	}
	err := d.inner.Authorize(ctx, req, peer)
	if err != nil && !errors.Is(err, ErrRefused) {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.m) >= maxDecisions {
		for k, c := range d.m {
			if !now.Before(c.until) {
				delete(d.m, k)
			}
		}
		if len(d.m) >= maxDecisions {
			clear(d.m)
		}
	}
	d.m[key] = decision{err: err, until: now.Add(d.ttl)}
	return err
}
