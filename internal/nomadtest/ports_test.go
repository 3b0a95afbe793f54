package nomadtest

import (
	"fmt"
	"net"
	"testing"
)

// TestPortTakenIsRetried: when another process takes an agent's HTTP port
// between freePorts and the agent's bind, the agent exits (after logging
// tens of lines more; seen in the e2e suite), and Start runs it again on
// new ports instead of failing the test.
func TestPortTakenIsRetried(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Nomad agent; skipped with -short")
	}
	t.Parallel()
	var picks []ports
	cfg := Config{Binary: Binary(t)}
	cfg.choosePorts = func() (ports, error) {
		p, err := freePorts()
		if err != nil {
			return p, err
		}
		if len(picks) == 0 {
			// The squatter closes every connection, as the agent that
			// took the port in the e2e suite answered the readiness
			// check ("EOF"). Another process may take the port first
			// on a busy machine (seen in CI): then pick again.
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p.HTTP))
			for try := 0; err != nil && try < 20; try++ {
				if p, err = freePorts(); err == nil {
					l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p.HTTP))
				}
			}
			if err != nil {
				return p, err
			}
			t.Cleanup(func() { l.Close() })
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
		}
		picks = append(picks, p)
		return p, nil
	}
	a := Start(t, cfg)
	if len(picks) != 2 {
		t.Fatalf("ports picked %d times (%v), want twice: the taken port, then new ones", len(picks), picks)
	}
	if got := a.Address(); got != fmt.Sprintf("http://127.0.0.1:%d", picks[1].HTTP) {
		t.Errorf("agent at %s, want the second pick's port %d", got, picks[1].HTTP)
	}
}
