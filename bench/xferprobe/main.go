// Command xferprobe measures, in the e2e VM, what a transfer's bytes pass
// through besides zfs: copies, AES-GCM, TLS 1.3 on loopback, and HTTP/1.1
// and HTTP/2 over it, each for the same number of bytes. It explains the
// transfer's throughput against a local pipe in docs/performance.md.
//
// usage: xferprobe MIB
package main

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

func main() {
	mib, err := strconv.Atoi(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "usage: xferprobe MIB")
		os.Exit(2)
	}
	n := int64(mib) << 20
	probe("memcopy", n, func() error {
		_, err := io.CopyBuffer(io.Discard, io.LimitReader(zero{}, n), make([]byte, 256<<10))
		return err
	})
	probe("pipe", n, func() error {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		go func() { _, _ = io.CopyBuffer(w, io.LimitReader(zero{}, n), make([]byte, 256<<10)); w.Close() }()
		_, err = io.CopyBuffer(io.Discard, r, make([]byte, 256<<10))
		r.Close()
		return err
	})
	key := make([]byte, 32)
	block, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(block)
	probe("aes-gcm-seal", n, func() error { return seal(gcm, n) })
	cc, _ := chacha20poly1305.New(key)
	probe("chacha20-seal", n, func() error { return seal(cc, n) })
	cert := selfSigned()
	probe("tls13-loopback", n, func() error { return tlsCopy(cert, n) })
	probe("http1-tls", n, func() error { return httpCopy(cert, n, false) })
	probe("http2-tls", n, func() error { return httpCopy(cert, n, true) })
}

func probe(name string, n int64, f func() error) {
	start := time.Now()
	if err := f(); err != nil {
		fmt.Printf("probe %s error=%v\n", name, err)
		return
	}
	d := time.Since(start)
	fmt.Printf("probe %s bytes=%d seconds=%.3f mib_s=%.1f\n", name, n, d.Seconds(), float64(n)/(1<<20)/d.Seconds())
}

type zero struct{}

func (zero) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func seal(a cipher.AEAD, n int64) error {
	buf := make([]byte, 16<<10)
	out := make([]byte, 0, len(buf)+a.Overhead())
	nonce := make([]byte, a.NonceSize())
	for done := int64(0); done < n; done += int64(len(buf)) {
		out = a.Seal(out[:0], nonce, buf, nil)
	}
	return nil
}

func selfSigned() tls.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "probe"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"probe"}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func tlsCopy(cert tls.Certificate, n int64) error {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = io.CopyBuffer(c, io.LimitReader(zero{}, n), make([]byte, 256<<10))
		c.Close()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	if err != nil {
		return err
	}
	defer c.Close()
	got, err := io.CopyBuffer(io.Discard, c, make([]byte, 256<<10))
	if err == nil && got != n {
		err = fmt.Errorf("got %d bytes", got)
	}
	return err
}

func httpCopy(cert tls.Certificate, n int64, h2 bool) error {
	var p http.Protocols
	p.SetHTTP1(!h2)
	p.SetHTTP2(h2)
	srv := &http.Server{Protocols: &p, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13},
		HTTP2: &http.HTTP2Config{MaxReadFrameSize: 1 << 20},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.CopyBuffer(w, io.LimitReader(zero{}, n), make([]byte, 256<<10))
		})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	defer srv.Close()
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}, Protocols: &p,
		ForceAttemptHTTP2: h2, HTTP2: &http.HTTP2Config{MaxReadFrameSize: 1 << 20}}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://"+ln.Addr().String()+"/", bytes.NewReader(nil))
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.CopyBuffer(io.Discard, resp.Body, make([]byte, 256<<10))
	if err == nil && got != n {
		err = fmt.Errorf("got %d bytes (%s)", got, resp.Proto)
	}
	return err
}
