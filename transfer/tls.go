package transfer

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Both ends verify the other the same way: TLS 1.3 only, a certificate
// chain to the configured CA (never the system roots), and a name Nomad's
// own RPC accepts from a client agent: client.<region>.nomad, or
// server.<region>.nomad for an agent that is both (nomad/auth's
// validClientCertNames). The certificate proves the peer is an agent of
// this cluster; which node it is, is the Authorizer's to decide (doc.go).

// ErrBadPeerCertificate: the peer's certificate is not one of this
// cluster's agents'.
var ErrBadPeerCertificate = errors.New("peer certificate refused")

// peerNames are the names a peer's certificate must carry one of.
func peerNames(region string) []string {
	return []string{"client." + region + ".nomad", "server." + region + ".nomad"}
}

// checkName is nomad/auth's validateCertificateForNames: the subject's
// common name or a DNS name must be one of peerNames.
func checkName(cert *x509.Certificate, region string) error {
	names := append([]string{cert.Subject.CommonName}, cert.DNSNames...)
	slices.Sort(names)
	names = slices.Compact(names)
	for _, want := range peerNames(region) {
		if slices.Contains(names, want) {
			return nil
		}
	}
	return fmt.Errorf("certificate names %s, none of %s", strings.Join(names, ", "), strings.Join(peerNames(region), ", "))
}

// verifyPeer checks a peer's certificate chain and name, for a server
// verifying a client (usage ClientAuth) or a client verifying a server.
func (c Config) verifyPeer(cs tls.ConnectionState, usage x509.ExtKeyUsage, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: the peer presented none", ErrBadPeerCertificate)
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, ic := range cs.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage},
		CurrentTime: time.Now()}); err != nil {
		return fmt.Errorf("%w: %v", ErrBadPeerCertificate, err)
	}
	if err := checkName(leaf, c.Region); err != nil {
		return fmt.Errorf("%w: %v", ErrBadPeerCertificate, err)
	}
	return nil
}

// serverTLS is the listener's TLS configuration: a client certificate is
// required and verified by verifyPeer against the CA read at each
// handshake, so rotated files need no restart.
func (c Config) serverTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m, err := c.material()
			if err != nil {
				return nil, err
			}
			return &tls.Config{
				MinVersion:   tls.VersionTLS13,
				NextProtos:   []string{"h2"},
				Certificates: []tls.Certificate{m.cert},
				ClientAuth:   tls.RequireAnyClientCert,
				VerifyConnection: func(cs tls.ConnectionState) error {
					return c.verifyPeer(cs, x509.ExtKeyUsageClientAuth, m.roots)
				},
			}, nil
		},
	}
}

// clientTLS is the dialer's TLS configuration. Peers are dialed by IP
// address and their certificates name the cluster, not the host, so Go's
// host name check is replaced (InsecureSkipVerify) by verifyPeer, which
// checks the chain and the cluster name itself.
func (c Config) clientTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"h2"},
		ServerName: "client." + c.Region + ".nomad",
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			m, err := c.material()
			if err != nil {
				return nil, err
			}
			return &m.cert, nil
		},
		InsecureSkipVerify: true, //nolint:gosec // verifyPeer verifies the chain and the name
		VerifyConnection: func(cs tls.ConnectionState) error {
			m, err := c.material()
			if err != nil {
				return err
			}
			return c.verifyPeer(cs, x509.ExtKeyUsageServerAuth, m.roots)
		},
	}
}
