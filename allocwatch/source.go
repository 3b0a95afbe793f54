package allocwatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// source is the seam to the Nomad HTTP API: one method per request kind.
// Errors are classified here and nowhere else.
type source interface {
	// NodeAllocs is GET /v1/node/<id>/allocations. waitIndex 0 does not
	// block. The index is the answer's X-Nomad-Index.
	NodeAllocs(ctx context.Context, nodeID string, waitIndex uint64, wait time.Duration) ([]*api.Allocation, uint64, error)
	// Node is GET /v1/node/<id>: nil when the node is registered.
	Node(ctx context.Context, nodeID string) error
	// AgentNodeID is GET /v1/agent/self → stats.client.node_id.
	AgentNodeID(ctx context.Context) (string, error)
	// Alloc is GET /v1/allocation/<id>; errAllocNotFound only on a
	// definite 404 "alloc not found".
	Alloc(ctx context.Context, allocID string) (*api.Allocation, error)
	// AllocStats is GET /v1/client/allocation/<id>/stats; errUnknownAlloc
	// only on a definite 404 "Unknown allocation".
	AllocStats(ctx context.Context, allocID string) error
}

// Request kinds, the keys of Watcher.Requests.
const (
	kindNodeAllocs = "node_allocations"
	kindNode       = "node"
	kindAgentSelf  = "agent_self"
	kindAlloc      = "allocation"
	kindAllocStats = "client_allocation_stats"
)

var (
	// ErrPermissionDenied: the token may not read what was asked (HTTP 401
	// or 403, or a 500 `Unknown allocation` from GET /v1/allocation/<id>,
	// Nomad's answer for an allocation in a namespace without read-job).
	ErrPermissionDenied = errors.New("permission denied")

	// errAllocNotFound: the servers do not know the allocation.
	errAllocNotFound = errors.New("alloc not found")
	// errUnknownAlloc: the local client has no runner for the allocation.
	errUnknownAlloc = errors.New("unknown allocation")
	// errNodeNotFound: the node is not registered (yet).
	errNodeNotFound = errors.New("node not registered")
	// errClientIDFile: Config.ClientIDFile cannot be read (yet).
	errClientIDFile = errors.New("reading the client ID file")
	// errNoClientNode: /v1/agent/self names no client node.
	errNoClientNode = errors.New("agent has no client node ID")
	// errNoIndex: a 200 answer without X-Nomad-Index.
	errNoIndex = errors.New("answer without X-Nomad-Index")
)

const (
	// requestTimeout bounds a non-blocking request.
	requestTimeout = 30 * time.Second
	// blockingSlack is added to a blocking query's wait: Nomad adds up to
	// wait/16 of jitter, plus forwarding to the leader.
	blockingSlack = 30 * time.Second
)

// nomadSource implements source with github.com/hashicorp/nomad/api.
type nomadSource struct {
	client    *api.Client
	base      url.URL     // the client's address, for the requests built here
	region    string      // the client's region, "" for the agent's
	namespace string      // the client's namespace ($NOMAD_NAMESPACE)
	headers   http.Header // the client's extra headers
	httpAuth  *api.HttpBasicAuth
	tokenFile string
	logger    hclog.Logger
	counts    *counter

	mu    sync.Mutex
	token string
}

var _ source = (*nomadSource)(nil)

// newNomadSource wraps client, made from ac; token is the first token.
func newNomadSource(client *api.Client, ac *api.Config, tokenFile, token string, logger hclog.Logger, counts *counter) (*nomadSource, error) {
	// Address is the client's, after api.NewClient made a unix socket's
	// http://127.0.0.1.
	base, err := url.Parse(client.Address())
	if err != nil {
		return nil, fmt.Errorf("nomad API address %q: %w", client.Address(), err)
	}
	return &nomadSource{
		client: client, base: url.URL{Scheme: base.Scheme, User: base.User, Host: base.Host},
		region: ac.Region, namespace: ac.Namespace, headers: ac.Headers.Clone(), httpAuth: ac.HttpAuth,
		tokenFile: tokenFile, logger: logger, counts: counts, token: token,
	}, nil
}

func (s *nomadSource) NodeAllocs(ctx context.Context, nodeID string, waitIndex uint64, wait time.Duration) ([]*api.Allocation, uint64, error) {
	timeout := requestTimeout
	if waitIndex > 0 {
		timeout = wait + wait/16 + blockingSlack
	}
	var allocs []*api.Allocation
	var index uint64
	err := s.do(ctx, kindNodeAllocs, timeout, func(q *api.QueryOptions) error {
		q.WaitIndex, q.WaitTime = waitIndex, wait
		out, idx, err := s.nodeAllocs(q, nodeID)
		if err != nil {
			return err
		}
		allocs = make([]*api.Allocation, 0, len(out))
		for _, n := range out {
			if n != nil {
				allocs = append(allocs, n.allocation())
			}
		}
		index = idx
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("listing allocations of node %s: %w", nodeID, err)
	}
	return allocs, index, nil
}

// nodeAllocs is Nodes().Allocations(nodeID, q) with the answer decoded by
// decodeNodeAllocs instead of the api package's encoding/json. The request
// is built as the api package builds it for the options the watcher sets
// (token, index, wait; the client's region, namespace, headers and basic
// auth) and goes through the api client's own HTTP client (its TLS, its
// socket); a non-200 answer is an error httpStatus reads like the api
// package's.
func (s *nomadSource) nodeAllocs(q *api.QueryOptions, nodeID string) ([]*nodeAlloc, uint64, error) {
	u := s.base // a copy; Address() is already http://127.0.0.1 for a unix socket
	u.Path = "/v1/node/" + nodeID + "/allocations"
	params := url.Values{}
	if s.region != "" {
		params.Set("region", s.region)
	}
	if s.namespace != "" {
		params.Set("namespace", s.namespace)
	}
	if q.WaitIndex != 0 {
		params.Set("index", strconv.FormatUint(q.WaitIndex, 10))
	}
	if q.WaitTime != 0 {
		params.Set("wait", fmt.Sprintf("%dms", q.WaitTime/time.Millisecond))
	}
	u.RawQuery = params.Encode()
	user := u.User
	u.User = nil
	req, err := http.NewRequestWithContext(q.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, 0, err
	}
	for k, v := range s.headers {
		req.Header[k] = v
	}
	switch {
	case user != nil:
		pw, _ := user.Password()
		req.SetBasicAuth(user.Username(), pw)
	case s.httpAuth != nil:
		req.SetBasicAuth(s.httpAuth.Username, s.httpAuth.Password)
	}
	if q.AuthToken != "" {
		req.Header.Set("X-Nomad-Token", q.AuthToken)
	}
	// No Accept-Encoding of our own: net/http then asks for gzip and
	// decompresses, as the api package does by hand.
	resp, err := s.client.Raw().Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, 0, &statusError{code: resp.StatusCode, body: strings.TrimSpace(string(body))}
	}
	index, err := strconv.ParseUint(resp.Header.Get("X-Nomad-Index"), 10, 64)
	if err != nil || index == 0 {
		// Nomad always sends one (at least 1), so this is not a Nomad
		// answer to trust.
		return nil, 0, errNoIndex
	}
	out, err := decodeNodeAllocs(resp.Body)
	if err != nil {
		return nil, 0, err
	}
	return out, index, nil
}

func (s *nomadSource) Node(ctx context.Context, nodeID string) error {
	err := s.do(ctx, kindNode, requestTimeout, func(q *api.QueryOptions) error {
		_, _, err := s.client.Nodes().Info(nodeID, q)
		return err
	})
	if status, body := httpStatus(err); status == http.StatusNotFound && body == "node not found" {
		err = fmt.Errorf("%w: %w", errNodeNotFound, err)
	}
	if err != nil {
		return fmt.Errorf("reading node %s: %w", nodeID, err)
	}
	return nil
}

func (s *nomadSource) AgentNodeID(ctx context.Context) (string, error) {
	var self api.AgentSelf
	err := s.do(ctx, kindAgentSelf, requestTimeout, func(q *api.QueryOptions) error {
		// Raw keeps the status code; Agent().Self() flattens the error.
		_, err := s.client.Raw().Query("/v1/agent/self", &self, q)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("reading /v1/agent/self: %w", err)
	}
	id := self.Stats["client"]["node_id"]
	if !isUUID(id) {
		return "", fmt.Errorf("%w: /v1/agent/self stats.client.node_id = %q; is the agent a client?", errNoClientNode, id)
	}
	return id, nil
}

func (s *nomadSource) Alloc(ctx context.Context, allocID string) (*api.Allocation, error) {
	var alloc *api.Allocation
	err := s.do(ctx, kindAlloc, requestTimeout, func(q *api.QueryOptions) error {
		a, _, err := s.client.Allocations().Info(allocID, q)
		alloc = a
		return err
	})
	status, body := httpStatus(err)
	switch {
	case err == nil:
		return alloc, nil
	case status == http.StatusNotFound && body == "alloc not found":
		err = fmt.Errorf("%w: %w", errAllocNotFound, err)
	case status == http.StatusInternalServerError && strings.HasPrefix(body, "Unknown allocation"):
		// Alloc.GetAlloc's answer when the allocation exists in a namespace
		// the token cannot read.
		err = fmt.Errorf("%w: the allocation is in a namespace the token cannot read-job: %w", ErrPermissionDenied, err)
	}
	return nil, fmt.Errorf("reading allocation %s: %w", allocID, err)
}

func (s *nomadSource) AllocStats(ctx context.Context, allocID string) error {
	err := s.do(ctx, kindAllocStats, requestTimeout, func(q *api.QueryOptions) error {
		_, err := s.client.Allocations().Stats(&api.Allocation{ID: allocID}, q)
		return err
	})
	if status, body := httpStatus(err); status == http.StatusNotFound && strings.HasPrefix(body, "Unknown allocation") {
		err = fmt.Errorf("%w: %w", errUnknownAlloc, err)
	}
	if err != nil {
		return fmt.Errorf("reading client stats of allocation %s: %w", allocID, err)
	}
	return nil
}

// do runs one request with the current token and a timeout. On 401/403 it
// re-reads TokenFile and, if the token changed, retries once with it.
func (s *nomadSource) do(ctx context.Context, kind string, timeout time.Duration, call func(*api.QueryOptions) error) error {
	token := s.currentToken()
	err := s.call(ctx, kind, timeout, token, call)
	if !isAuthStatus(err) || s.tokenFile == "" {
		return classify(err)
	}
	fresh, rerr := readTokenFile(s.tokenFile)
	if rerr != nil {
		return fmt.Errorf("%w (re-reading the token file: %v)", classify(err), rerr)
	}
	if fresh == token {
		return classify(err)
	}
	s.setToken(fresh)
	s.logger.Info("token file changed; using the new token", "path", s.tokenFile)
	return classify(s.call(ctx, kind, timeout, fresh, call))
}

func (s *nomadSource) call(ctx context.Context, kind string, timeout time.Duration, token string, call func(*api.QueryOptions) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s.counts.add(kind)
	// AllowStale false: the leader answers, so the index never comes from a
	// lagging follower.
	q := &api.QueryOptions{AuthToken: token, AllowStale: false}
	return call(q.WithContext(ctx))
}

func (s *nomadSource) currentToken() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

func (s *nomadSource) setToken(t string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = t
}

// maxErrorBody bounds what is kept of a refusal's body.
const maxErrorBody = 64 << 10

// statusError is a non-200 answer to a request nomadSource makes itself,
// worded as the api package words its UnexpectedResponseError.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string {
	if e.body == "" {
		return fmt.Sprintf("Unexpected response code: %d", e.code)
	}
	return fmt.Sprintf("Unexpected response code: %d (%s)", e.code, e.body)
}

// httpStatus returns the status code and body of an API error, or 0.
func httpStatus(err error) (int, string) {
	var ure api.UnexpectedResponseError
	if errors.As(err, &ure) {
		return ure.StatusCode(), ure.Body()
	}
	var se *statusError
	if errors.As(err, &se) {
		return se.code, se.body
	}
	return 0, ""
}

func isAuthStatus(err error) bool {
	status, _ := httpStatus(err)
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}

// classify marks 401/403 answers with ErrPermissionDenied.
func classify(err error) error {
	if isAuthStatus(err) {
		return fmt.Errorf("%w: %w", ErrPermissionDenied, err)
	}
	return err
}

// counter counts requests by kind.
type counter struct {
	mu sync.Mutex
	m  map[string]uint64
}

func (c *counter) add(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]uint64)
	}
	c.m[kind]++
}

func (c *counter) snapshot() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]uint64, len(c.m))
	for k, v := range c.m {
		out[k] = v
	}
	return out
}
