package nomadapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Request kinds, the keys of Client.Requests (and the endpoint names of
// internal/nomadfake, so a test can compare what the client counted with
// what the agent saw).
const (
	KindNodeAllocations = "node_allocations"
	KindNode            = "node"
	KindAgentSelf       = "agent_self"
	KindAllocation      = "allocation"
	KindAllocationStats = "client_allocation_stats"
	// KindQuery counts Query's requests, whatever their path.
	KindQuery = "query"
)

// NodeAllocations is GET /v1/node/<id>/allocations: the node's allocations
// that the token can see, and the answer's X-Nomad-Index. waitIndex 0 does
// not block; otherwise the query blocks up to wait for an index above
// waitIndex. Each allocation holds only what DecodeNodeAllocations reads.
func (c *Client) NodeAllocations(ctx context.Context, nodeID string, waitIndex uint64, wait time.Duration) ([]*api.Allocation, uint64, error) {
	timeout := requestTimeout
	if waitIndex > 0 {
		timeout = wait + wait/16 + blockingSlack
	}
	var allocs []*api.Allocation
	var index uint64
	err := c.do(ctx, KindNodeAllocations, timeout, func(q *api.QueryOptions) error {
		q.WaitIndex, q.WaitTime = waitIndex, wait
		out, idx, err := c.nodeAllocations(q, nodeID)
		allocs, index = out, idx
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("listing allocations of node %s: %w", nodeID, err)
	}
	return allocs, index, nil
}

// nodeAllocations is Nodes().Allocations(nodeID, q) with the answer
// decoded by DecodeNodeAllocations instead of the api package's
// encoding/json. The request is built as the api package builds it for the
// options NodeAllocations sets (token, index, wait; the client's region,
// namespace, headers and basic auth) and goes through the api client's own
// HTTP client (its TLS, its socket); a non-200 answer is an error
// HTTPStatus reads like the api package's.
func (c *Client) nodeAllocations(q *api.QueryOptions, nodeID string) ([]*api.Allocation, uint64, error) {
	u := c.base // a copy; the api client's address is already http://127.0.0.1 for a unix socket
	u.Path = "/v1/node/" + nodeID + "/allocations"
	params := url.Values{}
	if c.region != "" {
		params.Set("region", c.region)
	}
	if c.namespace != "" {
		params.Set("namespace", c.namespace)
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
	for k, v := range c.headers {
		req.Header[k] = v
	}
	switch {
	case user != nil:
		pw, _ := user.Password()
		req.SetBasicAuth(user.Username(), pw)
	case c.httpAuth != nil:
		req.SetBasicAuth(c.httpAuth.Username, c.httpAuth.Password)
	}
	if q.AuthToken != "" {
		req.Header.Set("X-Nomad-Token", q.AuthToken)
	}
	// No Accept-Encoding of our own: net/http then asks for gzip and
	// decompresses, as the api package does by hand.
	resp, err := c.api.Raw().Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, 0, &StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(body))}
	}
	index, err := strconv.ParseUint(resp.Header.Get("X-Nomad-Index"), 10, 64)
	if err != nil || index == 0 {
		// Nomad always sends one (at least 1), so this is not a Nomad
		// answer to trust.
		return nil, 0, ErrNoIndex
	}
	out, err := DecodeNodeAllocations(resp.Body)
	if err != nil {
		return nil, 0, err
	}
	return out, index, nil
}

// Node is GET /v1/node/<id>; ErrNodeNotFound only on a definite 404 "node
// not found".
func (c *Client) Node(ctx context.Context, nodeID string) (*api.Node, error) {
	var node *api.Node
	err := c.do(ctx, KindNode, requestTimeout, func(q *api.QueryOptions) (err error) {
		node, _, err = c.api.Nodes().Info(nodeID, q)
		return err
	})
	if status, body := HTTPStatus(err); status == http.StatusNotFound && body == "node not found" {
		err = fmt.Errorf("%w: %w", ErrNodeNotFound, err)
	}
	if err != nil {
		return nil, fmt.Errorf("reading node %s: %w", nodeID, err)
	}
	return node, nil
}

// AgentSelf is GET /v1/agent/self (it needs agent:read).
func (c *Client) AgentSelf(ctx context.Context) (*api.AgentSelf, error) {
	var self api.AgentSelf
	err := c.do(ctx, KindAgentSelf, requestTimeout, func(q *api.QueryOptions) error {
		// Raw keeps the status code; Agent().Self() flattens the error.
		_, err := c.api.Raw().Query("/v1/agent/self", &self, q)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading /v1/agent/self: %w", err)
	}
	return &self, nil
}

// Allocation is GET /v1/allocation/<id>; ErrAllocNotFound only on a
// definite 404 "alloc not found", ErrPermissionDenied also on the 500
// `Unknown allocation` Nomad answers for an allocation in a namespace the
// token cannot read-job.
func (c *Client) Allocation(ctx context.Context, allocID string) (*api.Allocation, error) {
	var alloc *api.Allocation
	err := c.do(ctx, KindAllocation, requestTimeout, func(q *api.QueryOptions) (err error) {
		alloc, _, err = c.api.Allocations().Info(allocID, q)
		return err
	})
	if err != nil {
		return nil, allocationErr(allocID, err)
	}
	return alloc, nil
}

// allocationErr classifies a failed GET /v1/allocation/<id>.
func allocationErr(allocID string, err error) error {
	status, body := HTTPStatus(err)
	switch {
	case status == http.StatusNotFound && body == "alloc not found":
		err = fmt.Errorf("%w: %w", ErrAllocNotFound, err)
	case status == http.StatusInternalServerError && strings.HasPrefix(body, "Unknown allocation"):
		// Alloc.GetAlloc's answer when the allocation exists in a namespace
		// the token cannot read.
		err = fmt.Errorf("%w: the allocation is in a namespace the token cannot read-job: %w", ErrPermissionDenied, err)
	}
	return fmt.Errorf("reading allocation %s: %w", allocID, err)
}

// AllocationStats is GET /v1/client/allocation/<id>/stats, asked of the
// agent's own client: nil while the client has a runner for the
// allocation, ErrUnknownAlloc only on a definite 404 `Unknown allocation`.
func (c *Client) AllocationStats(ctx context.Context, allocID string) error {
	err := c.do(ctx, KindAllocationStats, requestTimeout, func(q *api.QueryOptions) error {
		_, err := c.api.Allocations().Stats(&api.Allocation{ID: allocID}, q)
		return err
	})
	if status, body := HTTPStatus(err); status == http.StatusNotFound && strings.HasPrefix(body, "Unknown allocation") {
		err = fmt.Errorf("%w: %w", ErrUnknownAlloc, err)
	}
	if err != nil {
		return fmt.Errorf("reading client stats of allocation %s: %w", allocID, err)
	}
	return nil
}

// Query is any other GET of the API, decoded into out: path, and the
// options q sets (namespace, paging; nil for none), with the client's token.
// Its error is the api package's, with 401 and 403 marked
// ErrPermissionDenied; HTTPStatus reads its status and body.
func (c *Client) Query(ctx context.Context, path string, q *api.QueryOptions, out any) error {
	return c.do(ctx, KindQuery, requestTimeout, func(opts *api.QueryOptions) error {
		if q != nil {
			qc := *q
			qc.AuthToken = opts.AuthToken
			opts = qc.WithContext(opts.Context())
		}
		_, err := c.api.Raw().Query(path, out, opts)
		return err
	})
}
