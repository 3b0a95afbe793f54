package transfer

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi"
	"github.com/nomad-device-zfs/nomad-device-zfs/model"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// The wire, over HTTP/2 and mutual TLS:
//
//	POST /v1/send   Content-Type: application/json   {Request}
//	                Ndz-Alloc: <Request.Alloc>        authorized on these
//	                Ndz-Replacement: <Request.Replacement>  before the body
//
//	204  Ndz-Complete: true                           the requester holds the final
//	                                                  copy already: nothing comes
//	200  Ndz-Snapshot: <sender's snapshot name>       the headers say what comes,
//	     Ndz-Snapshot-Guid: <decimal>                 before any of it
//	     Ndz-From-Guid: <decimal, 0 for a full stream>
//	     Ndz-Resumed: true|false
//	     body: the zfs send stream
//	     trailer Ndz-Result: "ok", or "error: <what the sender saw>"
//
//	4xx/5xx  {"code": "...", "error": "..."}  (errorCodes)
//
// The request names allocations, never datasets or snapshots: what is
// sent is the sender's decision (Source), made from its own state.

// sendPath is the one endpoint.
const sendPath = "/v1/send"

// Request headers: the allocations the body names, for the authorization
// that comes before it is read.
const (
	hdrAlloc       = "Ndz-Alloc"
	hdrReplacement = "Ndz-Replacement"
)

// Response headers and trailer.
const (
	hdrSnapshot     = "Ndz-Snapshot"
	hdrSnapshotGUID = "Ndz-Snapshot-Guid"
	hdrFromGUID     = "Ndz-From-Guid"
	hdrResumed      = "Ndz-Resumed"
	hdrComplete     = "Ndz-Complete"
	trailerResult   = "Ndz-Result"
)

// maxRequest bounds a request body: two IDs, a guid and a token (at most
// 8 KiB, zfs.ValidateResumeToken).
const maxRequest = 16 << 10

// Request asks for the data of allocation Alloc on behalf of Replacement:
// the wire form of a model.SendRequest.
type Request struct {
	// Alloc is A, the allocation whose data is wanted; its node sends.
	Alloc string `json:"alloc_id"`
	// Replacement is B, the allocation Nomad placed to replace A, on the
	// requesting node.
	Replacement string `json:"replacement_id"`
	// Slot is the device ID of A's slot whose data is wanted (A may hold
	// several), on the sending node.
	Slot string `json:"slot"`
	// HaveGUID is the guid of the newest snapshot of A's data the
	// requester already holds, the base for an incremental stream; 0 for
	// none.
	HaveGUID uint64 `json:"have_guid,omitempty"`
	// ResumeToken is the receive_resume_token of an interrupted receive of
	// this transfer, to resume it; "" for none.
	ResumeToken string `json:"resume_token,omitempty"`
}

// model is the request as the sending node decides on it.
func (r Request) model() model.SendRequest {
	return model.SendRequest{Alloc: r.Alloc, Replacement: r.Replacement, Slot: r.Slot, HaveGUID: r.HaveGUID, ResumeToken: r.ResumeToken}
}

// validateIDs checks the two allocation IDs, all an authorization needs.
func (r Request) validateIDs() error {
	switch {
	case !nomadapi.IsUUID(r.Alloc):
		return fmt.Errorf("alloc_id %q is not an allocation ID", r.Alloc)
	case !nomadapi.IsUUID(r.Replacement):
		return fmt.Errorf("replacement_id %q is not an allocation ID", r.Replacement)
	case r.Alloc == r.Replacement:
		return fmt.Errorf("alloc_id and replacement_id are both %s", r.Alloc)
	}
	return nil
}

func (r Request) validate() error {
	if err := r.validateIDs(); err != nil {
		return err
	}
	switch {
	case zfs.ValidateComponent(r.Slot) != nil || strings.ContainsAny(r.Slot, "@#%"):
		return fmt.Errorf("slot %q is not a device ID", r.Slot)
	}
	if r.ResumeToken != "" {
		if err := zfs.ValidateResumeToken(r.ResumeToken); err != nil {
			return fmt.Errorf("resume_token: %w", err)
		}
	}
	return nil
}

// headerGUID reads a guid header.
func headerGUID(h http.Header, name string) (uint64, error) {
	v, err := strconv.ParseUint(h.Get(name), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("header %s = %q: not a guid", name, h.Get(name))
	}
	return v, nil
}
