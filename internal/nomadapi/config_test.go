package nomadapi

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token := file("token", "  8c3e41a0-0d1e-4d2c-9f4a-3b3c6f0e4d11\n")
	empty := file("empty", "\n")
	ca := file("ca.pem", "pem")
	missing := filepath.Join(dir, "missing")

	cases := []struct {
		name    string
		cfg     Config
		wantErr []string // substrings; none means valid
	}{
		{name: "zero config uses the environment", cfg: Config{}},
		{name: "http address", cfg: Config{Address: "http://127.0.0.1:4646"}},
		{name: "https address with TLS files", cfg: Config{Address: "https://nomad.local:4646", CAFile: ca, CertFile: ca, KeyFile: ca}},
		{name: "unix socket", cfg: Config{Address: "unix:///run/nomad/api.sock"}},
		{name: "token file", cfg: Config{TokenFile: token}},
		{name: "address without scheme", cfg: Config{Address: "127.0.0.1:4646"},
			wantErr: []string{`Address "127.0.0.1:4646" does not parse`}},
		{name: "address with other scheme", cfg: Config{Address: "ftp://nomad:4646"},
			wantErr: []string{`Address "ftp://nomad:4646" has scheme "ftp"`, "http, https or unix"}},
		{name: "address without host", cfg: Config{Address: "http://"},
			wantErr: []string{`Address "http://" has no host`}},
		{name: "token and token file", cfg: Config{Token: "secret", TokenFile: token},
			wantErr: []string{"Token and TokenFile", token}},
		{name: "token file missing", cfg: Config{TokenFile: missing},
			wantErr: []string{"TokenFile", missing, "no such file"}},
		{name: "token file empty", cfg: Config{TokenFile: empty},
			wantErr: []string{"TokenFile", empty, "is empty"}},
		{name: "CA file missing", cfg: Config{CAFile: missing},
			wantErr: []string{"CAFile", missing}},
		{name: "cert without key", cfg: Config{CertFile: ca},
			wantErr: []string{"CertFile", "KeyFile", "together"}},
		{name: "key file is a directory", cfg: Config{CertFile: ca, KeyFile: dir},
			wantErr: []string{"KeyFile", dir, "is a directory"}},
		{name: "token over http to loopback", cfg: Config{Address: "http://127.0.0.1:4646", Token: "secret"}},
		{name: "token over http to ::1", cfg: Config{Address: "http://[::1]:4646", Token: "secret"}},
		{name: "token over https to a remote host", cfg: Config{Address: "https://10.0.0.5:4646", Token: "secret"}},
		{name: "no token over http to a remote host", cfg: Config{Address: "http://10.0.0.5:4646"}},
		{name: "token over http to a remote host, allowed", cfg: Config{Address: "http://10.0.0.5:4646", Token: "secret", AllowPlaintextToken: true}},
		{name: "token over http to a remote host", cfg: Config{Address: "http://10.0.0.5:4646", Token: "secret"},
			wantErr: []string{`Address "http://10.0.0.5:4646"`, "unencrypted"}},
		{name: "token file over http to a remote name", cfg: Config{Address: "http://nomad.example:4646", TokenFile: token},
			wantErr: []string{`Address "http://nomad.example:4646"`, "unencrypted"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error with %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() = %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

// TestConfigEnvironment: zero fields fall back to NOMAD_*; set fields win.
// Not parallel: it sets the environment.
func TestConfigEnvironment(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "http://10.0.0.1:4646")
	t.Setenv("NOMAD_REGION", "eu")
	t.Setenv("NOMAD_TOKEN", "env-token")
	t.Setenv("NOMAD_CACERT", "/env/ca.pem")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name                    string
		cfg                     Config
		addr, region, token, ca string
	}{
		{name: "all from the environment", cfg: Config{},
			addr: "http://10.0.0.1:4646", region: "eu", token: "env-token", ca: "/env/ca.pem"},
		{name: "config wins", cfg: Config{Address: "http://127.0.0.1:4646", Region: "us", Token: "cfg-token", CAFile: "/cfg/ca.pem"},
			addr: "http://127.0.0.1:4646", region: "us", token: "cfg-token", ca: "/cfg/ca.pem"},
		{name: "token file wins over NOMAD_TOKEN", cfg: Config{TokenFile: tokenFile},
			addr: "http://10.0.0.1:4646", region: "eu", token: "file-token", ca: "/env/ca.pem"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ac, err := tc.cfg.APIConfig()
			if err != nil {
				t.Fatal(err)
			}
			tok := ac.SecretID
			if ac.Address != tc.addr || ac.Region != tc.region || tok != tc.token || ac.TLSConfig.CACert != tc.ca {
				t.Errorf("got address %q region %q token %q CA %q; want %q %q %q %q",
					ac.Address, ac.Region, tok, ac.TLSConfig.CACert, tc.addr, tc.region, tc.token, tc.ca)
			}
		})
	}
}

// TestConfigTLSEnvironment: every NOMAD_* TLS variable is read as the nomad
// CLI reads it, and a key the Config sets replaces that variable only.
// Not parallel: it sets the environment.
func TestConfigTLSEnvironment(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "https://10.0.0.1:4646")
	t.Setenv("NOMAD_CACERT", "/env/ca.pem")
	t.Setenv("NOMAD_CAPATH", "/env/cas")
	t.Setenv("NOMAD_CLIENT_CERT", "/env/cli.pem")
	t.Setenv("NOMAD_CLIENT_KEY", "/env/cli-key.pem")
	t.Setenv("NOMAD_TLS_SERVER_NAME", "env.global.nomad")
	t.Setenv("NOMAD_SKIP_VERIFY", "true")
	t.Setenv("NOMAD_TOKEN", "env-token")

	cases := []struct {
		name                       string
		cfg                        Config
		addr, ca, cert, key, sni   string
		insecure, plaintext, valid bool
	}{
		{name: "environment only", addr: "https://10.0.0.1:4646", ca: "/env/ca.pem", cert: "/env/cli.pem",
			key: "/env/cli-key.pem", sni: "env.global.nomad", insecure: true, valid: true},
		{name: "the CA file replaces NOMAD_CACERT only", cfg: Config{CAFile: "/cfg/ca.pem"},
			addr: "https://10.0.0.1:4646", ca: "/cfg/ca.pem", cert: "/env/cli.pem",
			key: "/env/cli-key.pem", sni: "env.global.nomad", insecure: true, valid: true},
		{name: "every key set", cfg: Config{Address: "https://127.0.0.1:4646", CAFile: "/cfg/ca.pem",
			CertFile: "/cfg/cli.pem", KeyFile: "/cfg/cli-key.pem", TLSServerName: "client.global.nomad"},
			addr: "https://127.0.0.1:4646", ca: "/cfg/ca.pem", cert: "/cfg/cli.pem",
			key: "/cfg/cli-key.pem", sni: "client.global.nomad", insecure: true, valid: true},
		{name: "http address with the environment's token", cfg: Config{Address: "http://10.0.0.2:4646"},
			addr: "http://10.0.0.2:4646", ca: "/env/ca.pem", cert: "/env/cli.pem",
			key: "/env/cli-key.pem", sni: "env.global.nomad", insecure: true, plaintext: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ac, err := tc.cfg.APIConfig()
			if err != nil {
				t.Fatal(err)
			}
			tls := ac.TLSConfig
			if ac.Address != tc.addr || tls.CACert != tc.ca || tls.CAPath != "/env/cas" || tls.ClientCert != tc.cert ||
				tls.ClientKey != tc.key || tls.TLSServerName != tc.sni || tls.Insecure != tc.insecure || ac.SecretID != "env-token" {
				t.Errorf("got %s %+v token %q", ac.Address, *tls, ac.SecretID)
			}
			if got := tc.cfg.PlaintextToken(); got != tc.plaintext {
				t.Errorf("PlaintextToken() = %v, want %v", got, tc.plaintext)
			}
			// Validate reads no TLS file of the environment: only Config's own.
			if err := (Config{Address: tc.cfg.Address}).Validate(); (err == nil) != tc.valid {
				t.Errorf("Validate() = %v, want valid %v", err, tc.valid)
			}
		})
	}
}

// TestNewLogsTransport: New says once how it reaches the agent, and warns
// once when the configuration allows a token in the clear.
func TestNewLogsTransport(t *testing.T) {
	t.Setenv("NOMAD_SKIP_VERIFY", "")
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "plain http", cfg: Config{Address: "http://127.0.0.1:4646"}, want: "Nomad API without TLS"},
		{name: "https verified", cfg: Config{Address: "https://127.0.0.1:4646"}, want: "tls_verify=true"},
		{name: "plaintext token allowed", cfg: Config{Address: "http://10.0.0.5:4646", Token: "secret", AllowPlaintextToken: true},
			want: "sending the ACL token unencrypted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			if _, err := New(tc.cfg, hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(logs.String(), tc.want); n != 1 {
				t.Errorf("log says %q %d times, want once:\n%s", tc.want, n, logs.String())
			}
			if strings.Contains(logs.String(), "secret") {
				t.Errorf("the token is in the log:\n%s", logs.String())
			}
		})
	}
}
