package nomadapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/hashicorp/nomad/api"
)

// Errors the calls classify Nomad's answers into, once, here. An answer
// that is none of these is returned as it came (HTTPStatus reads its
// status): an unknown error is never read as "absent".
var (
	// ErrPermissionDenied: the token may not read what was asked (HTTP 401
	// or 403, or a 500 `Unknown allocation` from GET /v1/allocation/<id>,
	// Nomad's answer for an allocation in a namespace without read-job).
	ErrPermissionDenied = errors.New("permission denied")
	// ErrAllocNotFound: the servers do not know the allocation (404 "alloc
	// not found": never placed, or garbage-collected).
	ErrAllocNotFound = errors.New("alloc not found")
	// ErrUnknownAlloc: the local client has no runner for the allocation
	// (404 `Unknown allocation` from the client's endpoint).
	ErrUnknownAlloc = errors.New("unknown allocation")
	// ErrNodeNotFound: the node is not registered (404 "node not found").
	ErrNodeNotFound = errors.New("node not registered")
	// ErrNoIndex: a 200 answer to a blocking query without X-Nomad-Index.
	ErrNoIndex = errors.New("answer without X-Nomad-Index")
)

// maxErrorBody bounds what is kept of a refusal's body.
const maxErrorBody = 64 << 10

// StatusError is a non-200 answer to the request the client builds itself
// (NodeAllocations), worded as the api package words its
// UnexpectedResponseError; HTTPStatus reads both. A fake above the seam
// makes a refusal with it.
type StatusError struct {
	Code int
	Body string // trimmed
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("Unexpected response code: %d", e.Code)
	}
	return fmt.Sprintf("Unexpected response code: %d (%s)", e.Code, e.Body)
}

// HTTPStatus returns the status code and body (trimmed) of an error
// answer of the API, or 0 and "" for a transport error, a success, or any
// other error.
func HTTPStatus(err error) (int, string) {
	var ure api.UnexpectedResponseError
	if errors.As(err, &ure) {
		return ure.StatusCode(), ure.Body()
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code, se.Body
	}
	return 0, ""
}

func isAuthStatus(err error) bool {
	status, _ := HTTPStatus(err)
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}

// classify marks 401/403 answers with ErrPermissionDenied.
func classify(err error) error {
	if isAuthStatus(err) {
		return fmt.Errorf("%w: %w", ErrPermissionDenied, err)
	}
	return err
}

// IsUUID reports whether s looks like a Nomad ID:
// "1cc0a14a-c239-313f-9be4-9ee3e8cc0399". Checking an ID before it goes
// into a request path or a log line keeps it from changing the path
// ("x/stop", "../..").
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F') {
				return false
			}
		}
	}
	return true
}
