package transfer

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The transport's errors, classified once, here, as zfs classifies its
// own (zfs/errors.go): a sentinel for each thing a caller does next, a
// peer's refusal read from its status and code (peerError), and a fetch's
// failure put in the class the receiver acts on (Classify). Callers use
// errors.Is and never look at the transport's details.
var (
	// ErrRefused: the request is not allowed; the sender logs it and
	// answers 403.
	ErrRefused = errors.New("transfer refused")
	// ErrNoData: the sender has nothing to send for the allocation
	// (Source said so): no copy of its data is on that node.
	ErrNoData = model.ErrNoData
	// ErrResumeRefused: the sender will not resume from the token (it does
	// not match what it sends now, or zfs cannot use it). The receiver
	// aborts its partial receive and asks again without one.
	ErrResumeRefused = model.ErrResumeRefused
	// ErrPeerBusy: the sender is at its limit of concurrent sends, or
	// could not check the request now; ask again later.
	ErrPeerBusy = model.ErrPeerBusy
	// ErrNoPeer: no peer to ask (the allocation's node publishes no
	// transport, or is gone).
	ErrNoPeer = errors.New("no peer to transfer from")
	// ErrNotVerified: zfs receive succeeded but the snapshot the sender
	// named is not on the target with the guid it named. Also ErrStartOver.
	ErrNotVerified = errors.New("received copy not verified")
	// ErrStartOver: the copy no longer lines up with the sender's data
	// (its base is gone there, or it changed here), or what came is not
	// what the sender named: the receiver drops it and asks from nothing.
	ErrStartOver = model.ErrStartOver
	// ErrNotFilesystem: the sender's stream is not of a filesystem (a
	// volume's): no copy of it can be a slot.
	ErrNotFilesystem = model.ErrNotFilesystem
)

// The pull's own decisions are taken on these (model.DecidePullMove):
// the model names them, and the transport returns them.

// Classify is err, a fetch's failure, with the class the receiver acts on
// added (ErrStartOver, ErrNotFilesystem) and its text as it was; nil for
// nil. Client.Fetch returns every failure through it; another Fetcher (a
// test's, below the seam) may too.
func Classify(err error) error {
	var kind error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zfs.ErrDestinationModified), errors.Is(err, zfs.ErrIncrementalMismatch), errors.Is(err, ErrNotVerified):
		kind = ErrStartOver
	case errors.Is(err, zfs.ErrWrongType):
		kind = ErrNotFilesystem
	default:
		return err
	}
	return &classified{kind: kind, err: err}
}

// classified is an error with a class added: its text is the error's.
type classified struct{ kind, err error }

func (c *classified) Error() string   { return c.err.Error() }
func (c *classified) Unwrap() []error { return []error{c.kind, c.err} }

// errorCodes map the sender's refusals onto status codes and the
// receiver's errors.
var errorCodes = map[string]struct {
	status int
	err    error
}{
	"refused":        {http.StatusForbidden, ErrRefused},
	"no_data":        {http.StatusNotFound, ErrNoData},
	"resume_refused": {http.StatusConflict, ErrResumeRefused},
	"busy":           {http.StatusServiceUnavailable, ErrPeerBusy},
	"bad_request":    {http.StatusBadRequest, nil},
	"internal":       {http.StatusInternalServerError, nil},
}

// PeerError is a sender's refusal as the receiver sees it.
type PeerError struct {
	Peer    string
	Status  int
	Code    string
	Message string
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("peer %s: %s (%d %s)", e.Peer, e.Message, e.Status, e.Code)
}

// Unwrap yields the code's sentinel.
func (e *PeerError) Unwrap() error { return errorCodes[e.Code].err }

// peerError reads a refusal: its status and body, {"code", "error"}. A
// body that is not one, or a code this node does not know, is "internal".
func peerError(peer string, status int, body []byte) *PeerError {
	var eb errorBody
	if json.Unmarshal(body, &eb) != nil || eb.Code == "" {
		eb = errorBody{Code: "internal", Error: strings.TrimSpace(string(body))}
	}
	if _, known := errorCodes[eb.Code]; !known {
		eb.Code = "internal"
	}
	return &PeerError{Peer: peer, Status: status, Code: eb.Code, Message: eb.Error}
}

type errorBody struct {
	Code  string `json:"code"`
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code string, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(errorCodes[code].status)
	_ = json.NewEncoder(w).Encode(errorBody{Code: code, Error: err.Error()})
}
