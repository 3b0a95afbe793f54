package allocwatch

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
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
	r := Reason(err)
	if r == ReasonClientError {
		status, _ := nomadapi.HTTPStatus(err)
		return fmt.Sprintf("nomad API answered %d", status)
	}
	return conditions[r]
}

// conditions are the log's words for each Reason.
var conditions = map[string]string{
	ReasonDenied:        "nomad API denies the token",
	ReasonNotRegistered: "node not registered yet",
	ReasonClientIDFile:  "client ID file not readable",
	ReasonNoClientNode:  "agent reports no client node",
	ReasonNoIndex:       "nomad API answer without index",
	ReasonServerError:   "nomad API error",
	ReasonUnreachable:   "nomad API unreachable",
}

// Reasons a blocking query failed, as Reason names them: a small fixed set,
// so a metric labelled with one stays bounded.
const (
	ReasonDenied        = "permission_denied"
	ReasonNotRegistered = "node_not_registered"
	ReasonClientIDFile  = "client_id_file"
	ReasonNoClientNode  = "no_client_node"
	ReasonNoIndex       = "no_index"
	ReasonServerError   = "server_error"
	ReasonClientError   = "client_error"
	ReasonUnreachable   = "unreachable"
)

// Reason names the kind of a failed query, as condition does for the log.
func Reason(err error) string {
	status, _ := nomadapi.HTTPStatus(err)
	switch {
	case errors.Is(err, nomadapi.ErrPermissionDenied):
		return ReasonDenied
	case errors.Is(err, nomadapi.ErrNodeNotFound):
		return ReasonNotRegistered
	case errors.Is(err, errClientIDFile):
		return ReasonClientIDFile
	case errors.Is(err, errNoClientNode):
		return ReasonNoClientNode
	case errors.Is(err, nomadapi.ErrNoIndex):
		return ReasonNoIndex
	case status >= http.StatusInternalServerError:
		return ReasonServerError
	case status != 0:
		return ReasonClientError
	}
	return ReasonUnreachable
}
