package allocwatch

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

const (
	// DefaultMinInterval is the least time between two queries of Run.
	DefaultMinInterval = time.Second
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
	// Region; "" → $NOMAD_REGION → the agent's region.
	Region string
	// NodeID, if set, skips discovery. Otherwise the ID is read from
	// ClientIDFile if set (the client's "<data_dir>/client/client-id"),
	// else from the agent's /v1/agent/self (stats.client.node_id, which
	// needs agent:read).
	NodeID       string
	ClientIDFile string
	// MinInterval is the least time between two queries of Run (default
	// 1s). WaitTime bounds each blocking query (default 5m).
	MinInterval, WaitTime time.Duration
}

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

// apiConfig layers c over api.DefaultConfig (the NOMAD_* environment).
// The token is not set here: nomadSource sends it per request.
func (c Config) apiConfig() *api.Config {
	ac := api.DefaultConfig()
	if c.Address != "" {
		ac.Address = c.Address
	}
	if c.Region != "" {
		ac.Region = c.Region
	}
	if c.CAFile != "" {
		ac.TLSConfig.CACert = c.CAFile
	}
	if c.CertFile != "" {
		ac.TLSConfig.ClientCert = c.CertFile
	}
	if c.KeyFile != "" {
		ac.TLSConfig.ClientKey = c.KeyFile
	}
	if c.TLSServerName != "" {
		ac.TLSConfig.TLSServerName = c.TLSServerName
	}
	return ac
}

// initialToken is the token New starts with: Token, TokenFile's content,
// or $NOMAD_TOKEN (already in envToken).
func (c Config) initialToken(envToken string) (string, error) {
	switch {
	case c.Token != "":
		return c.Token, nil
	case c.TokenFile != "":
		return readTokenFile(c.TokenFile)
	default:
		return envToken, nil
	}
}

func validateAddress(addr string) error {
	u, err := url.Parse(addr)
	if err != nil {
		return fmt.Errorf("Address %q: %w", addr, err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("Address %q has no host", addr)
		}
	case "unix":
		if u.Path == "" && u.Host == "" {
			return fmt.Errorf("Address %q has no socket path", addr)
		}
	default:
		return fmt.Errorf("Address %q: scheme must be http, https or unix, e.g. http://127.0.0.1:4646", addr)
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
