package allocwatch

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
)

// tlsCase is one watcher configuration against a TLS agent: it connects
// (wantErr "") or Refresh fails with an error containing each of wantErr.
type tlsCase struct {
	name    string
	env     map[string]string
	cfg     Config
	wantErr []string
	wantLog string
}

// runTLSCases builds a watcher for each case and asks the agent once. Not
// parallel: cases set the NOMAD_* environment.
func runTLSCases(t *testing.T, cases []tlsCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var logs logBuffer
			w, err := New(tc.cfg, testLogger(t, &logs))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := w.Refresh(ctx)
			switch {
			case len(tc.wantErr) == 0 && err != nil:
				t.Fatalf("Refresh: %v", err)
			case len(tc.wantErr) == 0 && s.NodeID == "":
				t.Fatalf("Refresh answered no node")
			case len(tc.wantErr) > 0 && err == nil:
				t.Fatalf("Refresh connected; want a refusal with %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Refresh error %q does not contain %q", err, want)
				}
			}
			if tc.wantLog != "" && !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("log does not say %q:\n%s", tc.wantLog, logs.String())
			}
			t.Logf("Refresh: %v; log: %s", err, strings.TrimSpace(logs.String()))
		})
	}
}

// TestWatcherTLS runs the watcher against a real agent serving HTTPS (and
// RPC over TLS) with ACLs on, certificates made here: the watcher connects
// with the right CA, given in the config or in NOMAD_CACERT; refuses a
// wrong CA unless NOMAD_SKIP_VERIFY says so (and then warns); and picks up
// a rotated token file over TLS.
func TestWatcherTLS(t *testing.T) {
	ca, wrong := newTestCA(t, "nomad-agent"), newTestCA(t, "someone-else")
	cert, key := ca.valid(t, "agent")
	a := startAgent(t, nomadtest.Config{ACL: true, TLS: &nomadtest.TLS{CAFile: ca.CAFile, CertFile: cert, KeyFile: key}})
	if !strings.HasPrefix(a.Address(), "https://") {
		t.Fatalf("agent address %s is not https", a.Address())
	}
	mgmt, idFile := a.ManagementToken(), clientIDFile(a)

	runTLSCases(t, []tlsCase{
		{name: "CA in the config", cfg: Config{Config: nomadapi.Config{Address: a.Address(), CAFile: ca.CAFile, Token: mgmt}, ClientIDFile: idFile},
			wantLog: "tls_verify=true"},
		{name: "CA from NOMAD_CACERT, address and token from the environment",
			env: map[string]string{"NOMAD_ADDR": a.Address(), "NOMAD_CACERT": ca.CAFile, "NOMAD_TOKEN": mgmt},
			cfg: Config{ClientIDFile: idFile}, wantLog: "ca=" + ca.CAFile},
		{name: "the config's CA wins over NOMAD_CACERT",
			env: map[string]string{"NOMAD_CACERT": wrong.CAFile},
			cfg: Config{Config: nomadapi.Config{Address: a.Address(), CAFile: ca.CAFile, Token: mgmt}, ClientIDFile: idFile}},
		{name: "wrong CA", cfg: Config{Config: nomadapi.Config{Address: a.Address(), CAFile: wrong.CAFile, Token: mgmt}, ClientIDFile: idFile},
			wantErr: []string{"x509: certificate signed by unknown authority"}},
		{name: "system roots only", cfg: Config{Config: nomadapi.Config{Address: a.Address(), Token: mgmt}, ClientIDFile: idFile},
			wantErr: []string{"x509: certificate signed by unknown authority"}},
		{name: "NOMAD_SKIP_VERIFY with a wrong CA connects and warns",
			env:     map[string]string{"NOMAD_SKIP_VERIFY": "true"},
			cfg:     Config{Config: nomadapi.Config{Address: a.Address(), CAFile: wrong.CAFile, Token: mgmt}, ClientIDFile: idFile},
			wantLog: "WITHOUT verifying"},
		{name: "server name the certificate does not hold",
			cfg:     Config{Config: nomadapi.Config{Address: a.Address(), CAFile: ca.CAFile, TLSServerName: "other.global.nomad", Token: mgmt}, ClientIDFile: idFile},
			wantErr: []string{"x509", "other.global.nomad"}},
	})

	t.Run("token file rotated over TLS", func(t *testing.T) {
		c := a.Client()
		old, fresh, path := twoTokens(t, c, "tls-rotating", `node { policy = "read" }`)
		var logs logBuffer
		w, err := New(Config{Config: nomadapi.Config{Address: a.Address(), CAFile: ca.CAFile, TokenFile: path}, ClientIDFile: idFile}, testLogger(t, &logs))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Refresh(context.Background()); err != nil {
			t.Fatalf("Refresh with the first token: %v", err)
		}
		if _, err := c.ACLTokens().Delete(old.AccessorID, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Refresh(context.Background()); err == nil {
			t.Fatal("Refresh with a deleted token and no new one succeeded")
		}
		if err := os.WriteFile(path, []byte(fresh.SecretID+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Refresh(context.Background()); err != nil {
			t.Fatalf("Refresh after rotation: %v", err)
		}
		if !strings.Contains(logs.String(), "token file changed") {
			t.Errorf("the rotation was not logged:\n%s", logs.String())
		}
	})
}

// TestWatcherMutualTLS: an agent that requires client certificates (mTLS,
// verify_https_client) lets the watcher in with a certificate its CA
// signed, given in the config or in NOMAD_CLIENT_CERT/NOMAD_CLIENT_KEY, and
// refuses it without one, with an expired one, or with one of another CA.
func TestWatcherMutualTLS(t *testing.T) {
	ca, other := newTestCA(t, "nomad-agent"), newTestCA(t, "someone-else")
	cert, key := ca.valid(t, "agent")
	cli, cliKey := ca.valid(t, "watcher")
	expired, expiredKey := ca.issue(t, "expired", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	foreign, foreignKey := other.valid(t, "foreign")
	a := startAgent(t, nomadtest.Config{TLS: &nomadtest.TLS{CAFile: ca.CAFile, CertFile: cert, KeyFile: key, VerifyHTTPSClient: true}})
	idFile := clientIDFile(a)

	runTLSCases(t, []tlsCase{
		{name: "client certificate in the config", cfg: Config{Config: nomadapi.Config{Address: a.Address(), CAFile: ca.CAFile, CertFile: cli, KeyFile: cliKey}, ClientIDFile: idFile},
			wantLog: "client_cert=true"},
		{name: "client certificate from NOMAD_CLIENT_CERT and NOMAD_CLIENT_KEY",
			env: map[string]string{"NOMAD_CLIENT_CERT": cli, "NOMAD_CLIENT_KEY": cliKey},
			cfg: Config{Config: nomadapi.Config{Address: a.Address(), CAFile: ca.CAFile}, ClientIDFile: idFile}},
		{name: "no client certificate", cfg: Config{Config: nomadapi.Config{Address: a.Address(), CAFile: ca.CAFile}, ClientIDFile: idFile},
			wantErr: []string{"tls: certificate required"}},
		{name: "expired client certificate", cfg: Config{Config: nomadapi.Config{Address: a.Address(), CAFile: ca.CAFile, CertFile: expired, KeyFile: expiredKey}, ClientIDFile: idFile},
			wantErr: []string{"tls: expired certificate"}},
		// Go's client offers only a certificate of a CA the server asks
		// for, so the agent sees none.
		{name: "client certificate of another CA", cfg: Config{Config: nomadapi.Config{Address: a.Address(), CAFile: ca.CAFile, CertFile: foreign, KeyFile: foreignKey}, ClientIDFile: idFile},
			wantErr: []string{"tls: certificate required"}},
	})
}
