package main

import (
	"bufio"
	"context"
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
	"strings"
	"time"
)

// framing is one way of carrying the stream over TLS: the protocol, its
// settings on both ends, and how the sender writes the body.
type framing struct {
	name string
	h2   bool
	// h2conf is both ends' HTTP2Config (nil: Go's defaults).
	h2conf *http.HTTP2Config
	// readBuf and writeBuf are the HTTP/1.1 Transport's buffer sizes
	// (0: Go's 4 KiB).
	readBuf, writeBuf int
	// chunk is the most one read of the sender's source returns (0:
	// pipeRead, a read of zfs send's stdout through a default pipe).
	chunk int
	// bodyBuf, when set, puts a bufio.Writer of that size between the
	// sender's copy and the response: fewer, larger writes into the
	// framing, at the cost of one more copy.
	bodyBuf int
}

// framings are the candidates, each named by its protocol and the most a
// read of the sender's source returns (64k: zfs's stdout through a pipe
// of Linux's default capacity; 256k: through the 1 MiB pipe zfsexec asks
// for, so that each read fills its 256 KiB buffer). tls13-loopback is TLS
// alone; http2-64k the transfer before issue 28 item 4, http2-256k the
// transfer now (HTTP/2 frames of up to 1 MiB, Go's default windows).
// "wide" is HTTP/2 with 32 MiB stream windows, "bodybuf" with a 1 MiB
// bufio.Writer before the response; http1 is Go's HTTP/1.1 as it comes,
// http1-256k with 256 KiB read and 64 KiB write buffers in the Transport.
func framings(cert tls.Certificate) []probe {
	old := &http.HTTP2Config{MaxReadFrameSize: 1 << 20}
	wide := &http.HTTP2Config{MaxReadFrameSize: 1 << 20, MaxReceiveBufferPerConnection: 64 << 20, MaxReceiveBufferPerStream: 32 << 20}
	ps := []probe{{"tls13-loopback", func(ctx context.Context, n int64) error { return tlsCopy(ctx, cert, n) }}}
	for _, f := range []framing{
		{name: "http1"},
		{name: "http1-256k", readBuf: 256 << 10, writeBuf: 64 << 10, chunk: 256 << 10},
		{name: "http2-64k", h2: true, h2conf: old},
		{name: "http2-256k", h2: true, h2conf: old, chunk: 256 << 10},
		{name: "http2-wide-64k", h2: true, h2conf: wide},
		{name: "http2-wide-256k", h2: true, h2conf: wide, chunk: 256 << 10},
		{name: "http2-bodybuf", h2: true, h2conf: old, bodyBuf: 1 << 20},
	} {
		ps = append(ps, probe{f.name, func(ctx context.Context, n int64) error { return httpCopy(ctx, cert, n, f) }})
	}
	return ps
}

func selfSigned() tls.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "probe"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"probe"}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsCopy is the floor: the stream straight into a TLS 1.3 connection.
func tlsCopy(ctx context.Context, cert tls.Certificate, n int64) error {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	if err != nil {
		return err
	}
	defer ln.Close()
	sent := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			sent <- err
			return
		}
		_, err = io.CopyBuffer(c, source(n), make([]byte, 256<<10))
		c.Close()
		sent <- err
	}()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}}
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	got, err := io.CopyBuffer(sink{}, c, make([]byte, 256<<10))
	if err == nil && got != n {
		err = fmt.Errorf("got %d bytes", got)
	}
	if serr := <-sent; err == nil {
		err = serr
	}
	return err
}

// httpCopy moves n bytes as the transfer does: a POST with a small JSON
// body, answered with the stream and a trailer.
func httpCopy(ctx context.Context, cert tls.Certificate, n int64, f framing) error {
	var p http.Protocols
	p.SetHTTP1(!f.h2)
	p.SetHTTP2(f.h2)
	srv := &http.Server{Protocols: &p, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13},
		HTTP2: f.h2conf,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Trailer", "Ndz-Result")
			w.WriteHeader(http.StatusOK)
			var dst io.Writer = w
			var bw *bufio.Writer
			if f.bodyBuf > 0 {
				bw = bufio.NewWriterSize(w, f.bodyBuf)
				dst = bw
			}
			_, err := io.CopyBuffer(dst, sourceOf(n, f.chunk), make([]byte, 256<<10))
			if err == nil && bw != nil {
				err = bw.Flush()
			}
			w.Header().Set("Ndz-Result", fmt.Sprint(err == nil))
		})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	defer srv.Close()
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}, Protocols: &p,
		ForceAttemptHTTP2: f.h2, HTTP2: f.h2conf, ReadBufferSize: f.readBuf, WriteBufferSize: f.writeBuf}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+ln.Addr().String()+"/", strings.NewReader(`{"alloc":"a"}`))
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.CopyBuffer(sink{}, resp.Body, make([]byte, 256<<10))
	if err == nil && got != n {
		err = fmt.Errorf("got %d bytes (%s)", got, resp.Proto)
	}
	if err == nil && resp.Trailer.Get("Ndz-Result") != "true" {
		err = fmt.Errorf("trailer %q (%s)", resp.Trailer.Get("Ndz-Result"), resp.Proto)
	}
	return err
}
