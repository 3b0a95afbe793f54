package nomadapi

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// Config says how to reach a Nomad agent's HTTP API: the plugin's `nomad`
// block. Zero values fall back to the NOMAD_* environment
// (api.DefaultConfig), then to defaults.
type Config struct {
	// Address of the agent, e.g. "http://127.0.0.1:4646" or
	// "unix:///run/nomad.sock"; "" → $NOMAD_ADDR → http://127.0.0.1:4646.
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
}

// ErrPlaintextToken: the configuration would send a token over plain http
// to a host that is not loopback.
var ErrPlaintextToken = errors.New("a token would cross the network unencrypted (plain http to a host that is not loopback); use https, or allow it explicitly")

// Validate checks the fields that can be checked without the network. Each
// error names the field and its value. The token, CA, certificate and key
// files must be readable now.
func (c Config) Validate() error {
	var errs []error
	if c.Address != "" {
		if err := CheckAddress(c.Address); err != nil {
			errs = append(errs, fmt.Errorf("Address %q %w", c.Address, err))
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
		if err := CheckFile(f.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.field, err))
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, fmt.Errorf("CertFile (%q) and KeyFile (%q) must be set together", c.CertFile, c.KeyFile))
	}
	return errors.Join(errs...)
}

// transport is c over the NOMAD_* environment, key by key, the way the
// nomad CLI layers its flags: api.DefaultConfig reads NOMAD_ADDR,
// NOMAD_REGION, NOMAD_NAMESPACE, NOMAD_CACERT, NOMAD_CAPATH,
// NOMAD_CLIENT_CERT, NOMAD_CLIENT_KEY, NOMAD_TLS_SERVER_NAME,
// NOMAD_SKIP_VERIFY, NOMAD_HTTP_AUTH and NOMAD_TOKEN; every field of c that
// is set replaces its own key only. A CAFile wins over $NOMAD_CAPATH
// (go-rootcerts reads the file first).
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
// configuration. SecretID is the token c resolves to: Token, else
// TokenFile's content, else $NOMAD_TOKEN. Reading TokenFile is its only I/O.
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

// CheckFile says why path cannot be read as a file the configuration names
// (missing, unreadable, a directory), or nil. The error wraps the fs error,
// so errors.Is(err, fs.ErrNotExist) tells a file not written yet.
func CheckFile(path string) error {
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
