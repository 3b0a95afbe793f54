package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/pause"
)

// Path is where the endpoint serves the metrics.
const Path = "/metrics"

// listenRetry paces attempts to listen on an address that is taken; tests
// shorten it.
var listenRetry = 10 * time.Second

// Serve listens on addr and serves m at Path until ctx ends. An address
// that is taken (another process, a plugin of the agent's previous run not
// gone yet) is not fatal: the slots go on, and Serve tries again every
// listenRetry, logging the failure once. With port 0 the system picks
// one; the log line "metrics endpoint listening" names the address.
func (m *Metrics) Serve(ctx context.Context, addr string, logger hclog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle(Path, m.Handler(logger))
	logged := false
	for {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", addr)
		if err == nil {
			if logged {
				logger.Info("metrics endpoint can listen now", "address", ln.Addr().String())
			}
			return serve(ctx, ln, mux, logger)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !logged {
			logger.Error("cannot listen for the metrics endpoint; retrying", "address", addr, "error", err)
			logged = true
		}
		if err := pause.For(ctx, listenRetry); err != nil {
			return err
		}
	}
}

// serve runs the HTTP server on ln until ctx ends, then gives scrapes in
// flight a moment to finish.
func serve(ctx context.Context, ln net.Listener, h http.Handler, logger hclog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	logger.Info("metrics endpoint listening", "address", ln.Addr().String(), "path", Path)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(stop)
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return ctx.Err()
}
