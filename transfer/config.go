package transfer

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is the transport's part of the plugin configuration (the
// `transfer` block): where this plugin listens, and the TLS material it
// and its peers prove themselves with. The files are the ones a Nomad
// operator already has: the agent's CA (`nomad tls ca create`) and a
// client certificate (`nomad tls cert create -client`), which may be the
// client agent's own.
type Config struct {
	// Address is where the server listens, "host:port". A host that is not
	// 0.0.0.0 or :: is also the address peers are told to dial, and the
	// address this side's requests come from.
	Address string
	// CAFile verifies the peer's certificate chain; nothing else does
	// (not the system roots).
	CAFile string
	// CertFile and KeyFile are this side's certificate and key, presented
	// as a server and as a client.
	CertFile, KeyFile string
	// Region names the certificates accepted from a peer, as Nomad's RPC
	// accepts a client's: client.<Region>.nomad or server.<Region>.nomad.
	Region string
	// RequireNodeIdentity accepts a request only from a certificate that
	// also names the replacement's node, <node name>.<Region>.nomad
	// (identity.go); this side's certificate must then name a node too.
	RequireNodeIdentity bool
}

// Validate checks c without the network, naming the key and value of each
// problem (the `transfer` block's keys). It reads the files: each must be
// readable PEM, the certificate and key a pair, the certificate signed by
// the CA, and valid for a name a peer accepts, so a mistake is an error at
// configuration time and not at the first transfer.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, value string, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s = %q: %s", key, value, fmt.Sprintf(format, a...)))
	}
	if _, _, err := c.listen(); err != nil {
		bad("address", c.Address, "%v", err)
	}
	if c.Region == "" || strings.ContainsAny(c.Region, ". \t/") {
		bad("region", c.Region, "must be the Nomad region the certificates name, e.g. \"global\" for client.global.nomad")
	}
	for _, f := range []struct{ key, path string }{{"ca_file", c.CAFile}, {"cert_file", c.CertFile}, {"key_file", c.KeyFile}} {
		if f.path == "" {
			bad(f.key, f.path, "required: transfers are mutual TLS")
		} else if _, err := os.ReadFile(f.path); err != nil {
			bad(f.key, f.path, "%v", err)
		}
	}
	if err := checkKeyMode(c.KeyFile); err != nil {
		bad("key_file", c.KeyFile, "%v", err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	m, err := c.material()
	if err != nil {
		return err
	}
	leaf := m.cert.Leaf
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: m.roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		bad("cert_file", c.CertFile, "not signed by ca_file %s: %v", c.CAFile, err)
	}
	if err := checkName(leaf, c.Region); err != nil {
		bad("cert_file", c.CertFile, "%v; peers would refuse it (make it with `nomad tls cert create -client -region %s`)", err, c.Region)
	}
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if len(leaf.ExtKeyUsage) > 0 && !slices.Contains(leaf.ExtKeyUsage, u) && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) {
			bad("cert_file", c.CertFile, "not usable for %s; a transfer uses it as server and client", usageName(u))
		}
	}
	if c.RequireNodeIdentity && len(nodeNames(leaf, c.Region)) == 0 {
		bad("cert_file", c.CertFile, "require_node_identity is set and the certificate names no node (a DNS name <node name>.%s.nomad); "+
			"make it with `nomad tls cert create -client -region %s -additional-dnsname <node name>.%s.nomad`", c.Region, c.Region, c.Region)
	}
	if time.Now().After(leaf.NotAfter) {
		bad("cert_file", c.CertFile, "expired on %s", leaf.NotAfter.Format(time.RFC3339))
	}
	return errors.Join(errs...)
}

// listen splits Address into the host to bind (empty for all) and port.
func (c Config) listen() (host string, port int, err error) {
	h, p, err := net.SplitHostPort(c.Address)
	if err != nil {
		return "", 0, fmt.Errorf("not host:port (%v), e.g. \"0.0.0.0:4680\"", err)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, fmt.Errorf("port %q is not a port number", p)
	}
	if h != "" {
		if _, err := netip.ParseAddr(h); err != nil {
			return "", 0, fmt.Errorf("host %q is not an IP address (a name could resolve elsewhere later)", h)
		}
	}
	return h, n, nil
}

// Advertised is what this plugin publishes for its peers to find it: its
// port, and its address when it listens on one address only (otherwise
// peers dial the node's address as Nomad knows it).
func (c Config) Advertised() (addr netip.Addr, port int, err error) {
	host, port, err := c.listen()
	if err != nil {
		return netip.Addr{}, 0, err
	}
	if host == "" {
		return netip.Addr{}, port, nil
	}
	a, _ := netip.ParseAddr(host)
	if a.IsUnspecified() {
		return netip.Addr{}, port, nil
	}
	return a.Unmap(), port, nil
}

// sourceAddr is the address this side's requests come from: the listen
// address when it is one, so that the peer sees the address this node
// publishes; otherwise the kernel's choice.
func (c Config) sourceAddr() netip.Addr {
	a, _, _ := c.Advertised()
	return a
}

// material is the TLS material as read now.
type material struct {
	cert  tls.Certificate // Leaf set
	roots *x509.CertPool
}

// material reads the files again: a rotated certificate is used from the
// next connection on, without a restart.
func (c Config) material() (*material, error) {
	var errs []error
	caPEM, err := os.ReadFile(c.CAFile)
	if err != nil {
		errs = append(errs, fmt.Errorf("ca_file = %q: %w", c.CAFile, err))
	}
	roots := x509.NewCertPool()
	if err == nil && !appendCerts(roots, caPEM) {
		errs = append(errs, fmt.Errorf("ca_file = %q: no PEM certificate in it", c.CAFile))
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		errs = append(errs, fmt.Errorf("cert_file = %q, key_file = %q: %w", c.CertFile, c.KeyFile, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &material{cert: cert, roots: roots}, nil
}

// appendCerts adds every CERTIFICATE block of pemData, reporting whether
// there was one.
func appendCerts(pool *x509.CertPool, pemData []byte) bool {
	found := false
	for {
		var b *pem.Block
		b, pemData = pem.Decode(pemData)
		if b == nil {
			return found
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			pool.AddCert(c)
			found = true
		}
	}
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "TLS Web Server Authentication"
	}
	return "TLS Web Client Authentication"
}

// checkKeyMode refuses a private key that group or others may read or
// write, as ssh does: any local user who can read it is this node to its
// peers. A file that cannot be read is Validate's error already.
func checkKeyMode(path string) error {
	fi, err := os.Stat(path)
	if err != nil || path == "" {
		return nil
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("mode %04o lets group or others read the private key (any local user could be this node to its peers): chmod 600 %s", perm, path)
	}
	return nil
}
