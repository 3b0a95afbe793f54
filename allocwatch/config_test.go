package allocwatch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
		{name: "node ID", cfg: Config{NodeID: "1cc0a14a-c239-313f-9be4-9ee3e8cc0399"}},
		{name: "client ID file not written yet", cfg: Config{ClientIDFile: missing}},
		{name: "durations", cfg: Config{MinInterval: time.Millisecond, WaitTime: time.Minute}},
		{name: "address without scheme", cfg: Config{Address: "127.0.0.1:4646"},
			wantErr: []string{`Address "127.0.0.1:4646"`}},
		{name: "address with other scheme", cfg: Config{Address: "ftp://nomad:4646"},
			wantErr: []string{`Address "ftp://nomad:4646"`, "http, https or unix"}},
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
		{name: "node ID not a UUID", cfg: Config{NodeID: "../../v1/jobs"},
			wantErr: []string{`NodeID "../../v1/jobs" is not a UUID`}},
		{name: "client ID file is a directory", cfg: Config{ClientIDFile: dir},
			wantErr: []string{"ClientIDFile", "is a directory"}},
		{name: "negative durations", cfg: Config{MinInterval: -time.Second, WaitTime: -time.Minute},
			wantErr: []string{"MinInterval -1s is negative", "WaitTime -1m0s is negative"}},
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
			if _, nerr := New(tc.cfg, nil); nerr == nil {
				t.Errorf("New accepted a config Validate rejects")
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
		minInterval, waitTime   time.Duration
	}{
		{name: "all from the environment", cfg: Config{},
			addr: "http://10.0.0.1:4646", region: "eu", token: "env-token", ca: "/env/ca.pem",
			minInterval: time.Second, waitTime: 5 * time.Minute},
		{name: "config wins", cfg: Config{Address: "http://127.0.0.1:4646", Region: "us", Token: "cfg-token", CAFile: "/cfg/ca.pem", MinInterval: 2 * time.Second, WaitTime: time.Minute},
			addr: "http://127.0.0.1:4646", region: "us", token: "cfg-token", ca: "/cfg/ca.pem",
			minInterval: 2 * time.Second, waitTime: time.Minute},
		{name: "token file wins over NOMAD_TOKEN", cfg: Config{TokenFile: tokenFile},
			addr: "http://10.0.0.1:4646", region: "eu", token: "file-token", ca: "/env/ca.pem",
			minInterval: time.Second, waitTime: 5 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg.withDefaults()
			ac := cfg.apiConfig()
			tok, err := cfg.initialToken(ac.SecretID)
			if err != nil {
				t.Fatal(err)
			}
			if ac.Address != tc.addr || ac.Region != tc.region || tok != tc.token || ac.TLSConfig.CACert != tc.ca {
				t.Errorf("got address %q region %q token %q CA %q; want %q %q %q %q",
					ac.Address, ac.Region, tok, ac.TLSConfig.CACert, tc.addr, tc.region, tc.token, tc.ca)
			}
			if cfg.MinInterval != tc.minInterval || cfg.WaitTime != tc.waitTime {
				t.Errorf("MinInterval %s WaitTime %s, want %s %s", cfg.MinInterval, cfg.WaitTime, tc.minInterval, tc.waitTime)
			}
		})
	}
}
