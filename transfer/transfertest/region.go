package transfertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// RegionCert is a client certificate of this CA that names region's
// client role only (client.<region>.nomad, localhost, 127.0.0.1), as
// `nomad tls cert create -client -region <region>` makes it from Nomad 1.7
// on. Nomad 1.6.2's command names client.global.nomad too, whatever the
// region, so a certificate of another region cannot be made with it; this
// one is signed here with the CA's key, with the key usages Nomad gives.
func (p *PKI) RegionCert(t testing.TB, region string) (certFile, keyFile string) {
	t.Helper()
	caCert, caKey := p.loadCA(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	name := "client." + region + ".nomad"
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name, "localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	n := p.n.Add(1)
	certFile = filepath.Join(p.Dir, fmt.Sprintf("%d-%s-client-nomad.pem", n, region))
	keyFile = filepath.Join(p.Dir, fmt.Sprintf("%d-%s-client-nomad-key.pem", n, region))
	writePEM(t, certFile, "CERTIFICATE", der, 0o644)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER, 0o600)
	return certFile, keyFile
}

// loadCA reads the CA certificate and its key (nomad-agent-ca-key.pem).
func (p *PKI) loadCA(t testing.TB) (*x509.Certificate, any) {
	t.Helper()
	cert, err := x509.ParseCertificate(readPEM(t, p.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	keyDER := readPEM(t, filepath.Join(p.Dir, "nomad-agent-ca-key.pem"))
	if key, err := x509.ParseECPrivateKey(keyDER); err == nil {
		return cert, key
	}
	key, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		t.Fatalf("the CA key: %v", err)
	}
	return cert, key
}

func readPEM(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	return blk.Bytes
}

func writePEM(t testing.TB, path, typ string, der []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		t.Fatal(err)
	}
}
