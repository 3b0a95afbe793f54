package allocwatch

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
)

// health logs the API's condition when it changes, not on every retry:
// "nomad API unreachable" once, then "nomad API reachable again". Until the
// first success it logs at Info: the agent starts its HTTP API after its
// plugins, so a plugin always waits a little at start.
type health struct {
	logger    hclog.Logger
	everOK    bool
	condition string // "" while the last request succeeded
	since     time.Time
}

func newHealth(logger hclog.Logger) *health { return &health{logger: logger} }

func (h *health) failed(err error, attempt int) {
	c := condition(err)
	switch {
	case c == h.condition:
		h.logger.Debug("still failing", "attempt", attempt, "error", err)
		return
	case h.condition == "":
		h.since = time.Now()
	}
	h.condition = c
	if !h.everOK {
		h.logger.Info("waiting: "+c, "error", err)
		return
	}
	h.logger.Warn(c+"; retrying with backoff", "error", err)
}

func (h *health) ok() {
	defer func() { h.everOK, h.condition = true, "" }()
	switch {
	case h.condition == "":
	case !h.everOK:
		h.logger.Info("nomad API reachable", "after", time.Since(h.since).Round(time.Millisecond))
	default:
		h.logger.Info("nomad API reachable again", "after", time.Since(h.since).Round(time.Millisecond))
	}
}

// condition names the kind of failure, for the transition log.
func condition(err error) string {
	status, _ := httpStatus(err)
	switch {
	case errors.Is(err, ErrPermissionDenied):
		return "nomad API denies the token"
	case errors.Is(err, errNodeNotFound):
		return "node not registered yet"
	case errors.Is(err, errClientIDFile):
		return "client ID file not readable"
	case errors.Is(err, errNoClientNode):
		return "agent reports no client node"
	case errors.Is(err, errNoIndex):
		return "nomad API answer without index"
	case status >= http.StatusInternalServerError:
		return "nomad API error"
	case status != 0:
		return fmt.Sprintf("nomad API answered %d", status)
	}
	return "nomad API unreachable"
}
