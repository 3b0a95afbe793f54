package metrics

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// TestServe: the endpoint answers at Path on its address; an address that
// is taken is logged once and tried again until it is free; the server
// stops with its context.
func TestServe(t *testing.T) {
	listenRetry = 50 * time.Millisecond
	t.Cleanup(func() { listenRetry = 10 * time.Second })
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := taken.Addr().String()
	var log syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &log, Level: hclog.Info})
	m := New(&model.Config{Parent: "tank/nomad"}, "test")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx, addr, logger) }()

	waitUntil(t, "the failure to listen logged", func() bool { return strings.Contains(log.String(), "cannot listen") })
	time.Sleep(5 * listenRetry)
	if n := strings.Count(log.String(), "cannot listen"); n != 1 {
		t.Errorf("the taken address was logged %d times, want once:\n%s", n, log.String())
	}
	taken.Close()
	waitUntil(t, "the endpoint to answer", func() bool {
		resp, err := http.Get("http://" + addr + Path)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if !strings.Contains(log.String(), "metrics endpoint listening") || !strings.Contains(log.String(), addr) {
		t.Errorf("the log does not say where the endpoint listens:\n%s", log.String())
	}
	if resp, err := http.Get("http://" + addr + "/"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET /: %s, want 404 (only %s is served)", resp.Status, Path)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Errorf("Serve returned %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := http.Get("http://" + addr + Path); err == nil {
		t.Error("the endpoint still answers after its context ended")
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAfterScrape: the hook runs once per scrape, after the answer.
func TestAfterScrape(t *testing.T) {
	m := New(&model.Config{Parent: "tank/nomad"}, "test")
	var mu sync.Mutex
	calls := 0
	m.AfterScrape(func() { mu.Lock(); calls++; mu.Unlock() })
	for i := 1; i <= 2; i++ {
		fs := scrapeHandler(t, m)
		if fs["nomad_device_zfs_build_info"] == nil {
			t.Fatal("no answer")
		}
		waitUntil(t, "the hook after the scrape", func() bool { mu.Lock(); defer mu.Unlock(); return calls == i })
	}
}
