package nomadapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

const (
	// requestTimeout bounds a non-blocking request.
	requestTimeout = 30 * time.Second
	// blockingSlack is added to a blocking query's wait: Nomad adds up to
	// wait/16 of jitter, plus forwarding to the leader.
	blockingSlack = 30 * time.Second
)

// Client is the project's one client of a Nomad agent's HTTP API: the
// github.com/hashicorp/nomad/api client made from a Config, with the token
// sent per request so that a rotated token file replaces it. Its methods
// are safe for concurrent use.
type Client struct {
	api       *api.Client
	addr      string      // the configured address, for people ("unix:///..." stays so)
	base      url.URL     // the api client's address, for the request built here
	region    string      // the client's region, "" for the agent's
	namespace string      // the client's namespace ($NOMAD_NAMESPACE)
	headers   http.Header // the client's extra headers
	httpAuth  *api.HttpBasicAuth
	tokenFile string
	logger    hclog.Logger
	counts    counter

	mu    sync.Mutex
	token string
}

// New makes the client c describes over the NOMAD_* environment, reading
// TokenFile once, and logs once to logger (nil: no log) how it reaches the
// agent. It does not Validate c: each caller does, in its own words; and
// it makes no request.
func New(c Config, logger hclog.Logger) (*Client, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	ac, err := c.APIConfig()
	if err != nil {
		return nil, err
	}
	// The token goes per request (Client.do), so a rotated one replaces it.
	token := ac.SecretID
	ac.SecretID = ""
	client, err := api.NewClient(ac)
	if err != nil {
		return nil, fmt.Errorf("nomad API client for %s: %w", ac.Address, err)
	}
	// Address is the client's, after api.NewClient made a unix socket's
	// http://127.0.0.1.
	base, err := url.Parse(client.Address())
	if err != nil {
		return nil, fmt.Errorf("nomad API address %q: %w", client.Address(), err)
	}
	logTransport(logger, c, ac)
	return &Client{
		api: client, addr: ac.Address, base: url.URL{Scheme: base.Scheme, User: base.User, Host: base.Host},
		region: ac.Region, namespace: ac.Namespace, headers: ac.Headers.Clone(), httpAuth: ac.HttpAuth,
		tokenFile: c.TokenFile, logger: logger, token: token,
	}, nil
}

// Address is the agent's address as configured (Address, $NOMAD_ADDR or
// the default), for messages.
func (c *Client) Address() string { return c.addr }

// Token is the token the next request carries: Token, TokenFile's content
// as last read, or $NOMAD_TOKEN; "" for none.
func (c *Client) Token() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token
}

func (c *Client) setToken(t string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.token = t
}

// do runs one request of kind with the current token, each attempt bounded
// by timeout, and classifies a 401 or 403 as ErrPermissionDenied. On 401 or
// 403 it re-reads TokenFile and, if the token changed, retries once with
// the new one. call gets the options to pass on (token, context).
func (c *Client) do(ctx context.Context, kind string, timeout time.Duration, call func(*api.QueryOptions) error) error {
	token := c.Token()
	err := c.attempt(ctx, kind, timeout, token, call)
	if !isAuthStatus(err) || c.tokenFile == "" {
		return classify(err)
	}
	fresh, rerr := readTokenFile(c.tokenFile)
	if rerr != nil {
		return fmt.Errorf("%w (re-reading the token file: %v)", classify(err), rerr)
	}
	if fresh == token {
		return classify(err)
	}
	c.setToken(fresh)
	c.logger.Info("token file changed; using the new token", "path", c.tokenFile)
	return classify(c.attempt(ctx, kind, timeout, fresh, call))
}

func (c *Client) attempt(ctx context.Context, kind string, timeout time.Duration, token string, call func(*api.QueryOptions) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c.counts.add(kind)
	// AllowStale false: the leader answers, so an index never comes from a
	// lagging follower.
	q := &api.QueryOptions{AuthToken: token, AllowStale: false}
	return call(q.WithContext(ctx))
}

// Requests returns the number of requests made so far, by kind (the Kind
// constants). A retry after a token change counts as a request.
func (c *Client) Requests() map[string]uint64 { return c.counts.snapshot() }

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

// logTransport says once, at start, how the client reaches the agent:
// whether TLS is on and whether the agent's certificate is verified. A
// skipped verification or an allowed plaintext token is a warning: each
// hands the token to anyone who can sit on the path.
func logTransport(logger hclog.Logger, c Config, ac *api.Config) {
	tls := ac.TLSConfig
	scheme := ac.Address
	if u, err := url.Parse(ac.Address); err == nil {
		scheme = u.Scheme
	}
	switch {
	case scheme != "https":
		logger.Info("Nomad API without TLS", "address", ac.Address, "tls", false)
	case tls.Insecure:
		logger.Warn("Nomad API over TLS WITHOUT verifying the agent's certificate (NOMAD_SKIP_VERIFY)",
			"address", ac.Address, "tls", true, "tls_verify", false)
	default:
		ca := "system roots"
		switch {
		case tls.CACert != "":
			ca = tls.CACert
		case tls.CAPath != "":
			ca = tls.CAPath
		}
		logger.Info("Nomad API over TLS", "address", ac.Address, "tls", true, "tls_verify", true,
			"ca", ca, "client_cert", tls.ClientCert != "", "server_name", tls.TLSServerName)
	}
	if c.PlaintextToken() && c.AllowPlaintextToken {
		logger.Warn("sending the ACL token unencrypted to a host that is not loopback, as allowed by the configuration",
			"address", ac.Address)
	}
}
