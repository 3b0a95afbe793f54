package transfer_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
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
// (any node's, node C's here) cannot hold the sender's handlers. Its
// request is authorized on its headers before a byte of its body is read,
// so one that may not have the data is refused at once however slowly it
// sends; one without the headers is turned away as malformed. Even the
// replacement's own node (B) stalling its bodies holds a handler at most
// BodyTimeout each, and at most DefaultMaxPerPeer at once (more are
// answered busy, with Retry-After, before anything is read). A refusal
// tells the peer nothing of B's node or of the allocations (issue 28: 100
// half-sent requests held 100 handlers for 55 s and more, and a refusal
// named B's node, its addresses and both allocations).
func TestTransferPeerCannotPinTheSender(t *testing.T) {
	h := newHarness(t)
	h.stop()
	h.bodyTimeout = 2 * time.Second
	h.start()
	h.source.set(h.snapshot("t1", "first", 4<<10, ""), nil)
	url := "https://" + h.srvCfg.Address + "/v1/send"
	// post sends headers naming alloc and repl (none when alloc is "")
	// and then body, as slowly as body gives it.
	post := func(c *http.Client, body io.Reader, alloc, repl string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodPost, url, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if alloc != "" {
			req.Header.Set("Ndz-Alloc", alloc)
			req.Header.Set("Ndz-Replacement", repl)
		}
		return c.Do(req)
	}
	stall := func() io.Reader {
		r, w := io.Pipe()
		t.Cleanup(func() { w.Close() })
		return r
	}
	c := rawClient(t, h, ipC)
	for _, tc := range []struct {
		name        string
		alloc, repl string
		want        int
	}{
		{name: "node C names A and B and stalls its body", alloc: allocA, repl: allocB, want: http.StatusForbidden},
		{name: "no allocations in the headers", want: http.StatusBadRequest},
	} {
		start := time.Now()
		resp, err := post(c, stall(), tc.alloc, tc.repl)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
		if took := time.Since(start); resp.StatusCode != tc.want || took >= h.bodyTimeout {
			t.Errorf("%s: %d after %s; want %d at once (before BodyTimeout %s)", tc.name, resp.StatusCode, took, tc.want, h.bodyTimeout)
		}
	}

	// DefaultMaxPerPeer requests from B's node that send their headers
	// and stall.
	b := rawClient(t, h, ipB)
	stalled := make(chan int, transfer.DefaultMaxPerPeer)
	for range transfer.DefaultMaxPerPeer {
		body := stall()
		go func() {
			code := 0
			if resp, err := post(b, body, allocA, allocB); err == nil {
				code = resp.StatusCode
				resp.Body.Close()
			}
			stalled <- code
		}()
	}
	waitInside(t, h, transfer.DefaultMaxPerPeer)

	// One more from the same address: busy at once, nothing read.
	resp, err := post(b, strings.NewReader(`{}`), allocA, allocB)
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
		case code := <-stalled:
			if code == http.StatusOK {
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

// TestTransferDecisionsAreCachedAndLimited: each decision costs Nomad
// lookups, and any certificate holder can ask for one. The same request
// refused again and again is decided once; requests for ever new pairs of
// allocations get decisions up to the limit's burst, then busy with
// Retry-After and no lookup (issue 28: 200 refused requests made 600
// lookups).
func TestTransferDecisionsAreCachedAndLimited(t *testing.T) {
	h := newHarness(t)
	url := "https://" + h.srvCfg.Address + "/v1/send"
	c := rawClient(t, h, ipC)
	ask := func(alloc, repl string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Ndz-Alloc", alloc)
		req.Header.Set("Ndz-Replacement", repl)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	before := h.nomad.Calls()
	for i := range 50 {
		if resp := ask(allocA, allocB); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("request %d from node C: %d, want 403", i, resp.StatusCode)
		}
	}
	if n := h.nomad.Calls() - before; n < 1 || n > 3 {
		t.Errorf("50 refusals of one request made %d Nomad lookups, want one decision's (1-3)", n)
	}

	before = h.nomad.Calls()
	busy := 0
	for i := range 200 {
		switch resp := ask(fmt.Sprintf("a11ca11c-0000-0000-0000-%012d", 1000+i), allocB); resp.StatusCode {
		case http.StatusForbidden:
		case http.StatusServiceUnavailable:
			busy++
			if resp.Header.Get("Retry-After") == "" {
				t.Errorf("a busy answer without Retry-After")
			}
		default:
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	lookups := h.nomad.Calls() - before
	if bound := 3 * (2*transfer.DefaultLookups + 5); lookups > bound || busy == 0 {
		t.Errorf("200 requests for new pairs: %d lookups (want at most %d), %d answered busy (want some)", lookups, bound, busy)
	}
	t.Logf("200 requests for new pairs: %d lookups, %d answered busy", lookups, busy)
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

// TestTransferBodyMustNameTheAuthorizedAllocations: the sender authorizes
// the allocations a request's headers name; a body that asks for another
// allocation's data is refused, whoever sends it (B's own node here).
func TestTransferBodyMustNameTheAuthorizedAllocations(t *testing.T) {
	h := newHarness(t)
	h.source.set(h.snapshot("t1", "first", 4<<10, ""), nil)
	url := "https://" + h.srvCfg.Address + "/v1/send"
	b := rawClient(t, h, ipB)
	for _, tc := range []struct {
		name string
		body string
		want int
	}{
		{name: "the body names another allocation's data",
			body: fmt.Sprintf(`{"alloc_id": %q, "replacement_id": %q, "slot": "data-1"}`, allocC, allocB), want: http.StatusForbidden},
		{name: "the body names another replacement",
			body: fmt.Sprintf(`{"alloc_id": %q, "replacement_id": %q, "slot": "data-1"}`, allocA, allocC), want: http.StatusForbidden},
		{name: "the body names the headers' allocations",
			body: fmt.Sprintf(`{"alloc_id": %q, "replacement_id": %q, "slot": "data-1"}`, allocA, allocB), want: http.StatusOK},
	} {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Ndz-Alloc", allocA)
		req.Header.Set("Ndz-Replacement", allocB)
		resp, err := b.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
}
