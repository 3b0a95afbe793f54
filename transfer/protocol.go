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
//	                Ndz-Kind: replica                 a replica's pull: no
//	                Ndz-Slot: <Request.Slot>          replacement, the slot
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
	hdrKind        = "Ndz-Kind"
	hdrSlot        = "Ndz-Slot"
)

// KindReplica is a replica's pull (issue 30): a node that keeps
// allocation Alloc's replicas asks for the increment of its slot Slot it
// lacks. There is no replacement: the requester is a node, authorized by
// DecideReplica (which nodes keep the replicas depends on the slot's
// class, so the slot is in the headers too). "" is a migration's pull.
const KindReplica = "replica"

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
	// Kind is "" for a migration's pull, KindReplica for a replica's.
	Kind string `json:"kind,omitempty"`
	// Alloc is A, the allocation whose data is wanted; its node sends.
	Alloc string `json:"alloc_id"`
	// Replacement is B, the allocation Nomad placed to replace A, on the
	// requesting node; "" for a replica's pull.
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

// replicaModel is a replica's request as the holder decides on it.
func (r Request) replicaModel() model.ReplicaSendRequest {
	return model.ReplicaSendRequest{Alloc: r.Alloc, Slot: r.Slot, HaveGUID: r.HaveGUID, ResumeToken: r.ResumeToken}
}

// validateIDs checks what an authorization reads, all in the headers:
// the two allocation IDs of a migration's pull; the allocation and the
// slot of a replica's.
func (r Request) validateIDs() error {
	switch r.Kind {
	case "":
	case KindReplica:
		switch {
		case !nomadapi.IsUUID(r.Alloc):
			return fmt.Errorf("alloc_id %q is not an allocation ID", r.Alloc)
		case r.Replacement != "":
			return fmt.Errorf("a replica's pull names no replacement (replacement_id %q)", r.Replacement)
		}
		return validateSlot(r.Slot)
	default:
		return fmt.Errorf("kind %q is neither a migration's pull nor %q", r.Kind, KindReplica)
	}
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
	if err := validateSlot(r.Slot); err != nil {
		return err
	}
	if r.ResumeToken != "" {
		if err := zfs.ValidateResumeToken(r.ResumeToken); err != nil {
			return fmt.Errorf("resume_token: %w", err)
		}
	}
	return nil
}

// validateSlot checks a slot's device ID.
func validateSlot(slot string) error {
	if zfs.ValidateComponent(slot) != nil || strings.ContainsAny(slot, "@#%") {
		return fmt.Errorf("slot %q is not a device ID", slot)
	}
	return nil
}

// headers are the request's headers: what its authorization reads.
func (r Request) headers(h http.Header) {
	h.Set(hdrAlloc, r.Alloc)
	if r.Kind == KindReplica {
		h.Set(hdrKind, r.Kind)
		h.Set(hdrSlot, r.Slot)
		return
	}
	h.Set(hdrReplacement, r.Replacement)
}

// claimed is the request as its headers name it.
func claimed(h http.Header) Request {
	r := Request{Kind: h.Get(hdrKind), Alloc: h.Get(hdrAlloc), Replacement: h.Get(hdrReplacement)}
	if r.Kind == KindReplica {
		r.Slot = h.Get(hdrSlot)
	}
	return r
}

// matches reports whether body names what the headers claimed (the
// request authorized): a migration's allocations, or a replica's
// allocation and slot.
func (r Request) matches(body Request) bool {
	return body.Kind == r.Kind && body.Alloc == r.Alloc && body.Replacement == r.Replacement &&
		(r.Kind != KindReplica || body.Slot == r.Slot)
}

// headerGUID reads a guid header.
func headerGUID(h http.Header, name string) (uint64, error) {
	v, err := strconv.ParseUint(h.Get(name), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("header %s = %q: not a guid", name, h.Get(name))
	}
	return v, nil
}
