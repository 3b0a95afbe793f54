package allocwatch

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

const (
	// DefaultMinInterval is the least time between two queries of Run. It
	// only merges bursts: a change that lands within it waits for the rest
	// of it. 200 ms is the Nomad client's own batching of allocation
	// updates to the servers (client.allocSyncIntv), so a node's answer
	// cannot usefully change faster, and it still bounds Run to five
	// queries a second under any churn. It was 1 s, most of the latency
	// between a batch task's end and its release: such a task's updates
	// (running, then complete) come within a second of each other.
	DefaultMinInterval = 200 * time.Millisecond
	// DefaultWaitTime bounds one blocking query. Nomad caps it at 5m too
	// (MaxBlockingRPCQueryTime) and adds up to 1/16 of jitter.
	DefaultWaitTime = 5 * time.Minute
	// ResyncEvery is the longest Run goes without delivering a snapshot
	// while the API answers, so consumers can apply time-based rules.
	ResyncEvery = 5 * time.Minute
)

// Config says how to reach the local Nomad agent. Zero values fall back to
// the NOMAD_* environment (api.DefaultConfig), then to defaults.
type Config struct {
	// Address of the local agent, e.g. "http://127.0.0.1:4646" or
	// "unix:///run/nomad.sock"; "" → $NOMAD_ADDR → http://127.0.0.1:4646.
	// It must be the agent of this node: RunningLocally asks its client.
	Address string
	// Token is the ACL token's secret ID; "" → $NOMAD_TOKEN.
	Token string
	// TokenFile holds the token. It is read by New and re-read whenever the
	// API answers 401 or 403, so a rotated token is picked up without a
	// restart. Mutually exclusive with Token.
	TokenFile string
	// CAFile, CertFile, KeyFile and TLSServerName configure TLS; "" →
	// $NOMAD_CACERT, $NOMAD_CLIENT_CERT, $NOMAD_CLIENT_KEY,
	// $NOMAD_TLS_SERVER_NAME.
	CAFile, CertFile, KeyFile, TLSServerName string
	// AllowPlaintextToken lets a token go over plain http to a host that is
	// not loopback. Without it Validate refuses that: anyone on the path
	// could read the token and act with its rights.
	AllowPlaintextToken bool
	// Region; "" → $NOMAD_REGION → the agent's region.
	Region string
	// NodeID, if set, skips discovery. Otherwise the ID is read from
	// ClientIDFile if set (the client's "<data_dir>/client/client-id"),
	// else from the agent's /v1/agent/self (stats.client.node_id, which
	// needs agent:read).
	NodeID       string
	ClientIDFile string
	// MinInterval is the least time between two queries of Run (default
	// 200ms). WaitTime bounds each blocking query (default 5m).
	MinInterval, WaitTime time.Duration
}

// ErrPlaintextToken: the configuration would send a token over plain http
// to a host that is not loopback.
var ErrPlaintextToken = errors.New("a token would cross the network unencrypted (plain http to a host that is not loopback); use https, or allow it explicitly")

// Validate checks the fields that can be checked without the network. Each
// error names the field and its value. The files must be readable now,
// except ClientIDFile: the client writes it only after the agent has loaded
// its plugins, so a missing one is fine.
func (c Config) Validate() error {
	var errs []error
	if c.Address != "" {
		if err := validateAddress(c.Address); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Token != "" && c.TokenFile != "" {
		errs = append(errs, fmt.Errorf("Token and TokenFile (%q) are both set; set one", c.TokenFile))
	}
	if c.PlaintextToken() && !c.AllowPlaintextToken {
		errs = append(errs, fmt.Errorf("Address %q: %w", c.AgentAddress(), ErrPlaintextToken))
	}
	if c.TokenFile != "" {
		if _, err := readTokenFile(c.TokenFile); err != nil {
			errs = append(errs, fmt.Errorf("TokenFile: %w", err))
		}
	}
	for _, f := range []struct{ field, path string }{
		{"CAFile", c.CAFile}, {"CertFile", c.CertFile}, {"KeyFile", c.KeyFile},
	} {
		if f.path == "" {
			continue
		}
		if err := checkReadable(f.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.field, err))
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, fmt.Errorf("CertFile (%q) and KeyFile (%q) must be set together", c.CertFile, c.KeyFile))
	}
	if c.NodeID != "" && !isUUID(c.NodeID) {
		errs = append(errs, fmt.Errorf("NodeID %q is not a UUID", c.NodeID))
	}
	if c.ClientIDFile != "" {
		if err := checkReadable(c.ClientIDFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("ClientIDFile: %w", err))
		}
	}
	if c.MinInterval < 0 {
		errs = append(errs, fmt.Errorf("MinInterval %s is negative", c.MinInterval))
	}
	if c.WaitTime < 0 {
		errs = append(errs, fmt.Errorf("WaitTime %s is negative", c.WaitTime))
	}
	return errors.Join(errs...)
}

// withDefaults fills the durations.
func (c Config) withDefaults() Config {
	if c.MinInterval == 0 {
		c.MinInterval = DefaultMinInterval
	}
	if c.WaitTime == 0 {
		c.WaitTime = DefaultWaitTime
	}
	return c
}

// transport is c over the NOMAD_* environment, key by key, the way the
// nomad CLI layers its flags: api.DefaultConfig reads NOMAD_ADDR,
// NOMAD_REGION, NOMAD_CACERT, NOMAD_CAPATH, NOMAD_CLIENT_CERT,
// NOMAD_CLIENT_KEY, NOMAD_TLS_SERVER_NAME, NOMAD_SKIP_VERIFY and
// NOMAD_TOKEN; every field of c that is set replaces its own key only. A
// CAFile wins over $NOMAD_CAPATH (go-rootcerts reads the file first).
func (c Config) transport() *api.Config {
	ac := api.DefaultConfig()
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&ac.Address, c.Address)
	set(&ac.Region, c.Region)
	set(&ac.TLSConfig.CACert, c.CAFile)
	set(&ac.TLSConfig.ClientCert, c.CertFile)
	set(&ac.TLSConfig.ClientKey, c.KeyFile)
	set(&ac.TLSConfig.TLSServerName, c.TLSServerName)
	return ac
}

// APIConfig is the one mapping of a Config onto the nomad/api client's
// configuration, shared by the watcher and the operator CLI. SecretID is
// the token c resolves to: Token, else TokenFile's content, else
// $NOMAD_TOKEN. Reading TokenFile is its only I/O.
func (c Config) APIConfig() (*api.Config, error) {
	ac := c.transport()
	switch {
	case c.Token != "":
		ac.SecretID = c.Token
	case c.TokenFile != "":
		tok, err := readTokenFile(c.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("TokenFile: %w", err)
		}
		ac.SecretID = tok
	}
	return ac, nil
}

// AgentAddress is the address c leads to: Address, else $NOMAD_ADDR, else
// http://127.0.0.1:4646.
func (c Config) AgentAddress() string { return c.transport().Address }

// CheckAddress says why addr cannot be a Nomad agent's HTTP address, or nil.
func CheckAddress(addr string) error {
	u, err := url.Parse(addr)
	if err != nil {
		return fmt.Errorf("does not parse as a URL (%v); write it as http://127.0.0.1:4646", err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Hostname() == "" {
			return fmt.Errorf("has no host")
		}
	case "unix":
		if u.Path == "" && u.Host == "" {
			return fmt.Errorf("has no socket path")
		}
	default:
		return fmt.Errorf("has scheme %q: it must be http, https or unix, e.g. http://127.0.0.1:4646", u.Scheme)
	}
	return nil
}

// PlaintextToken reports whether c would send a token unencrypted off this
// host: an http address (Address or $NOMAD_ADDR) whose host is not
// loopback, and a token (Token, TokenFile or $NOMAD_TOKEN).
func (c Config) PlaintextToken() bool {
	ac := c.transport()
	if c.Token == "" && c.TokenFile == "" && ac.SecretID == "" {
		return false
	}
	u, err := url.Parse(ac.Address)
	if err != nil || u.Scheme != "http" {
		return false
	}
	return !isLoopback(u.Hostname())
}

// isLoopback: "localhost" or an address in 127.0.0.0/8 or ::1. A name that
// resolves to loopback is not trusted to keep doing so.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func validateAddress(addr string) error {
	if err := CheckAddress(addr); err != nil {
		return fmt.Errorf("Address %q %w", addr, err)
	}
	return nil
}

// readTokenFile returns the file's content without surrounding whitespace.
func readTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return tok, nil
}

// readClientIDFile reads the node ID the Nomad client wrote.
func readClientIDFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if !isUUID(id) {
		return "", fmt.Errorf("%s holds %q, not a node ID", path, id)
	}
	return id, nil
}

func checkReadable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	return nil
}

// isUUID reports whether s looks like a Nomad ID:
// "1cc0a14a-c239-313f-9be4-9ee3e8cc0399". Checking it keeps an ID from
// changing the request path ("x/stop", "../..").
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F') {
				return false
			}
		}
	}
	return true
}

// logTransport says once, at start, how the watcher reaches the agent:
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
