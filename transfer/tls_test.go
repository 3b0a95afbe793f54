package transfer_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadtest"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
	"github.com/nomad-device-zfs/nomad-device-zfs/transfer/transfertest"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

// TestConfigValidate: a configuration mistake is an error when the
// configuration is read, naming the key and its value.
func TestConfigValidate(t *testing.T) {
	pki := transfertest.NewPKI(t, nomadtest.Binary(t))
	other := transfertest.NewPKI(t, pki.Nomad)
	good := pki.Config(t, "0.0.0.0:4680")
	cli, cliKey := pki.Cert(t, "-cli")
	east, eastKey := pki.RegionCert(t, "east")
	server, serverKey := pki.Cert(t, "-server")
	foreign, foreignKey := other.Cert(t, "-client")
	_, otherKey := pki.Cert(t, "-client")
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	with := func(change func(c *transfer.Config)) transfer.Config {
		c := good
		change(&c)
		return c
	}
	cases := []struct {
		name    string
		cfg     transfer.Config
		wantErr []string // "" accepts
	}{
		{name: "a client certificate", cfg: good},
		{name: "a server certificate (an agent that is both)", cfg: with(func(c *transfer.Config) { c.CertFile, c.KeyFile = server, serverKey })},
		{name: "one address", cfg: with(func(c *transfer.Config) { c.Address = "10.0.0.5:4680" })},
		{name: "IPv6", cfg: with(func(c *transfer.Config) { c.Address = "[::]:4680" })},
		{name: "missing CA file", cfg: with(func(c *transfer.Config) { c.CAFile = "/etc/nomad.d/nope.pem" }),
			wantErr: []string{`ca_file = "/etc/nomad.d/nope.pem"`, "no such file"}},
		{name: "a directory as key", cfg: with(func(c *transfer.Config) { c.KeyFile = t.TempDir() }),
			wantErr: []string{"key_file = ", "is a directory"}},
		{name: "no certificate", cfg: with(func(c *transfer.Config) { c.CertFile = "" }),
			wantErr: []string{`cert_file = ""`, "required"}},
		{name: "a CA file with no certificate", cfg: with(func(c *transfer.Config) { c.CAFile = notPEM }),
			wantErr: []string{`ca_file = "` + notPEM + `"`, "no PEM certificate"}},
		{name: "a key of another certificate", cfg: with(func(c *transfer.Config) { c.KeyFile = otherKey }),
			wantErr: []string{"cert_file = ", "key_file = ", "private key does not match"}},
		{name: "a certificate of another CA", cfg: with(func(c *transfer.Config) { c.CertFile, c.KeyFile = foreign, foreignKey }),
			wantErr: []string{"cert_file = ", "not signed by ca_file"}},
		{name: "the CLI certificate", cfg: with(func(c *transfer.Config) { c.CertFile, c.KeyFile = cli, cliKey }),
			wantErr: []string{"cert_file = ", "cli.global.nomad", "none of client.global.nomad, server.global.nomad"}},
		{name: "another region's certificate", cfg: with(func(c *transfer.Config) { c.CertFile, c.KeyFile = east, eastKey }),
			wantErr: []string{"client.east.nomad", "nomad tls cert create -client -region global"}},
		{name: "that region's certificate for that region", cfg: with(func(c *transfer.Config) { c.CertFile, c.KeyFile, c.Region = east, eastKey, "east" })},
		{name: "a key anyone may read", cfg: with(func(c *transfer.Config) { c.KeyFile = openKey(t, c.KeyFile, 0o644) }),
			wantErr: []string{"key_file = ", "mode 0644", "chmod 600"}},
		{name: "a key the group may read", cfg: with(func(c *transfer.Config) { c.KeyFile = openKey(t, c.KeyFile, 0o640) }),
			wantErr: []string{"key_file = ", "mode 0640"}},
		{name: "a name as address", cfg: with(func(c *transfer.Config) { c.Address = "node1.example:4680" }),
			wantErr: []string{`address = "node1.example:4680"`, "not an IP address"}},
		{name: "no port", cfg: with(func(c *transfer.Config) { c.Address = "10.0.0.5" }),
			wantErr: []string{`address = "10.0.0.5"`, "not host:port"}},
		{name: "a region with a dot", cfg: with(func(c *transfer.Config) { c.Region = "global.nomad" }),
			wantErr: []string{`region = "global.nomad"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestAdvertised(t *testing.T) {
	cases := []struct {
		address  string
		wantAddr string
		wantPort int
	}{
		{"0.0.0.0:4680", "invalid IP", 4680},
		{":4680", "invalid IP", 4680},
		{"[::]:4681", "invalid IP", 4681},
		{"10.0.0.5:4680", "10.0.0.5", 4680},
		{"[::ffff:10.0.0.5]:4680", "10.0.0.5", 4680},
	}
	for _, tc := range cases {
		a, p, err := transfer.Config{Address: tc.address}.Advertised()
		if err != nil || a.String() != tc.wantAddr || p != tc.wantPort {
			t.Errorf("%s: %v %d %v, want %s %d", tc.address, a, p, err, tc.wantAddr, tc.wantPort)
		}
	}
}

// TestTLSPeers: the server admits only a client with a certificate of the
// cluster's CA naming a client or server agent of its region, over TLS
// 1.3; the client trusts only such a server.
func TestTLSPeers(t *testing.T) {
	h := newHarness(t)
	other := transfertest.NewPKI(t, h.pki.Nomad)
	ca := x509.NewCertPool()
	caPEM, _ := os.ReadFile(h.pki.CAFile)
	ca.AppendCertsFromPEM(caPEM)
	server := h.srvCfg.Address

	t.Run("server refuses", func(t *testing.T) {
		cases := []struct {
			name    string
			cert    func() (string, string)
			max     uint16
			wantLog string
		}{
			{name: "the operator's CLI certificate", cert: func() (string, string) { return h.pki.Cert(t, "-cli") },
				wantLog: "cli.global.nomad"},
			{name: "another region's client", cert: func() (string, string) { return h.pki.RegionCert(t, "east") },
				wantLog: "client.east.nomad"},
			{name: "another CA's client", cert: func() (string, string) { return other.Cert(t, "-client") },
				wantLog: "certificate signed by unknown authority"},
			{name: "no client certificate", wantLog: "client didn't provide a certificate"},
			{name: "TLS 1.2", cert: func() (string, string) { return h.pki.Cert(t, "-client") }, max: tls.VersionTLS12,
				wantLog: "unsupported versions"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				cfg := &tls.Config{RootCAs: ca, ServerName: "client.global.nomad", NextProtos: []string{"h2"}, MaxVersion: tc.max}
				if tc.cert != nil {
					c, k := tc.cert()
					pair, err := tls.LoadX509KeyPair(c, k)
					if err != nil {
						t.Fatal(err)
					}
					cfg.Certificates = []tls.Certificate{pair}
				}
				conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", server, cfg)
				if err == nil {
					// TLS 1.3: the client finishes first; the server's
					// verdict on its certificate comes as an alert.
					_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
					_, err = conn.Read(make([]byte, 1))
					conn.Close()
				}
				if err == nil || !strings.Contains(err.Error(), "tls") {
					t.Fatalf("the server took it: %v", err)
				}
				waitLog(t, h.logs, tc.wantLog)
			})
		}
	})

	t.Run("client refuses", func(t *testing.T) {
		cases := []struct {
			name    string
			cert    func() (string, string)
			wantErr string
		}{
			{name: "a server of another CA", cert: func() (string, string) { return other.Cert(t, "-client") }, wantErr: "unknown authority"},
			{name: "a server with the CLI's certificate", cert: func() (string, string) { return h.pki.Cert(t, "-cli") }, wantErr: "cli.global.nomad"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c, k := tc.cert()
				pair, err := tls.LoadX509KeyPair(c, k)
				if err != nil {
					t.Fatal(err)
				}
				ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2"}})
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				go func() {
					for {
						conn, err := ln.Accept()
						if err != nil {
							return
						}
						_ = conn.(*tls.Conn).Handshake()
						conn.Close()
					}
				}()
				port := ln.Addr().(*net.TCPAddr).Port
				peers := transfertest.NewNomad()
				a, _, _ := world()
				peers.SetAlloc(a)
				peers.SetNode(transfer.Node{ID: nodeA, Addresses: []netip.Addr{ipA}, TransferPort: port})
				cl, err := transfer.NewClient(transfer.ClientConfig{Config: h.pki.Config(t, ipB.String()+":0"),
					Locator: transfer.NomadLocator{Nomad: peers}, ZFS: zfs.NewClient(zfstest.New(zfstest.Options{MountRoot: t.TempDir()}))})
				if err != nil {
					t.Fatal(err)
				}
				_, err = cl.Fetch(t.Context(), reqAB, into)
				if !errors.Is(err, transfer.ErrBadPeerCertificate) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want ErrBadPeerCertificate saying %q", err, tc.wantErr)
				}
			})
		}
	})
}

// openKey copies key to a file of mode perm.
func openKey(t *testing.T, key string, perm os.FileMode) string {
	t.Helper()
	b, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "open-key.pem")
	if err := os.WriteFile(p, b, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	return p
}
