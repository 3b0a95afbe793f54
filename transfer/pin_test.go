package transfer_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/transfer"
)

// TestTransferPeerCannotPinTheSender: a peer with a cluster certificate
// (any node's, node C's here) cannot hold the sender's handlers: a request
// whose body stalls is cut at BodyTimeout, one address gets at most
// DefaultMaxPerPeer requests in at once (more are answered busy, with
// Retry-After, before anything is read), and a refusal tells the peer
// nothing of B's node or of the allocations (issue 28: 100 half-sent
// requests held 100 handlers for 55 s and more, and a refusal named B's
// node, its addresses and both allocations).
func TestTransferPeerCannotPinTheSender(t *testing.T) {
	h := newHarness(t)
	h.stop()
	h.bodyTimeout = 2 * time.Second
	h.start()
	h.source.set(h.snapshot("t1", "first", 4<<10, ""), nil)
	c := rawClient(t, h, ipC)
	url := "https://" + h.srvCfg.Address + "/v1/send"

	// DefaultMaxPerPeer requests that send their headers and stall.
	type answer struct {
		code  int
		took  time.Duration
		retry string
	}
	stalled := make(chan answer, transfer.DefaultMaxPerPeer)
	var writers []*io.PipeWriter
	start := time.Now()
	for range transfer.DefaultMaxPerPeer {
		r, w := io.Pipe()
		writers = append(writers, w)
		go func() {
			resp, err := c.Post(url, "application/json", r)
			a := answer{took: time.Since(start)}
			if err == nil {
				a.code = resp.StatusCode
				resp.Body.Close()
			}
			stalled <- a
		}()
	}
	defer func() {
		for _, w := range writers {
			w.Close()
		}
	}()
	waitInside(t, h, transfer.DefaultMaxPerPeer)

	// One more from the same address: busy at once, nothing read.
	resp, err := c.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("request %d from one address: %d, Retry-After %q; want 503 with Retry-After",
			transfer.DefaultMaxPerPeer+1, resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	// The stalled ones are cut at the body timeout, not held.
	for range transfer.DefaultMaxPerPeer {
		select {
		case a := <-stalled:
			if a.code == http.StatusOK {
				t.Errorf("a stalled request was served")
			}
		case <-time.After(30 * h.bodyTimeout):
			t.Fatalf("a request stalled in its body still holds a handler after %s (BodyTimeout %s)", 30*h.bodyTimeout, h.bodyTimeout)
		}
	}

	// Node C asks for A's data: refused, and told nothing more.
	_, err = h.client(ipC).Fetch(t.Context(), reqAB, into)
	if !errors.Is(err, transfer.ErrRefused) {
		t.Fatalf("node C's request: %v, want ErrRefused", err)
	}
	for _, secret := range []string{nodeB, ipB.String(), allocB, allocA, "job", "namespace"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the refusal tells node C %q: %v", secret, err)
		}
	}
	waitLog(t, h.logs, "refused a transfer request")
}

// waitInside gives the n stalled requests a moment to arrive, and checks
// none of them was turned away.
func waitInside(t *testing.T, h *harness, n int) {
	t.Helper()
	time.Sleep(500 * time.Millisecond)
	if strings.Contains(h.logs.String(), "too many requests from one peer") {
		t.Fatalf("the first %d requests were already refused:\n%s", n, h.logs)
	}
}

// rawClient is an HTTP/2 client with a client certificate of the test CA
// whose connections come from address from, for requests the transfer's
// own Client would never send.
func rawClient(t *testing.T, h *harness, from netip.Addr) *http.Client {
	t.Helper()
	certFile, keyFile := h.pki.Cert(t, "-client")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(h.pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	var protos http.Protocols
	protos.SetHTTP2(true)
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: from.AsSlice()}, Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext:     dialer.DialContext,
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots, ServerName: "client.global.nomad"},
		Protocols:       &protos,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}
