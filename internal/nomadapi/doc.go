// Package nomadapi is the project's one client of a Nomad agent's HTTP API,
// on github.com/hashicorp/nomad/api. The allocation watcher (allocwatch),
// the transfer's sender and receiver (transfer) and the operator CLI's
// doctor and plan (cli) all reach Nomad through it.
//
// It owns:
//
//   - Config, the plugin's `nomad` block: address, token or token file, TLS,
//     region; laid over the NOMAD_* environment key by key as the nomad CLI
//     does (APIConfig), checked without the network (Validate, CheckAddress,
//     PlaintextToken).
//   - Client (New): the token goes per request, and on 401 or 403 the token
//     file is re-read and the request retried once if it changed, so a
//     rotated token is picked up without a restart. Each request has its
//     timeout; requests are counted by kind (Requests).
//   - The calls its users make: NodeAllocations (the watcher's blocking
//     query, decoded in one pass by DecodeNodeAllocations), Node,
//     AgentSelf, Allocation, AllocationStats, and Query for any other GET.
//   - Errors classified once, here: ErrPermissionDenied, ErrAllocNotFound,
//     ErrUnknownAlloc, ErrNodeNotFound, ErrNoIndex; HTTPStatus reads the
//     status and body of any other refusal. IsUUID checks an ID before it
//     goes into a request path.
//
// What Nomad answers, seen on a real agent (Nomad 1.11.3; allocwatch's
// nomad_test.go and internal/nomadfake's conformance test hold them):
//
//   - GET /v1/allocation/<unknown or GC'd id>: 404 "alloc not found".
//   - GET /v1/allocation/<id> with a token lacking read-job in the
//     allocation's namespace: 500 `Unknown allocation "<id>"`, not 403.
//     Allocation reports it as ErrPermissionDenied.
//   - GET /v1/client/allocation/<id>/stats for an allocation the local
//     client does not have: 404 `Unknown allocation "<id>"`. Without
//     read-job: 403 "Permission denied". For an allocation that has
//     finished but is not yet garbage-collected by the servers it is still
//     200 (the client keeps its alloc runner, even after a client-side GC).
//   - GET /v1/node/<id>/allocations silently drops allocations in
//     namespaces where the token lacks read-job, and answers 200 with an
//     empty list for a node ID that is not registered.
//
// The package imports nothing of the project's: it is the seam, and the
// rules above it (what an answer means for a slot) are its callers'.
package nomadapi
