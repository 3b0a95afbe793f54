// Package allocwatch watches the allocations of this Nomad node through the
// local agent's HTTP API, so the plugin can release a slot once the
// allocation holding it has ended. Nomad's device API has no release call.
//
// Layers, top to bottom:
//
//   - Watcher: Run blocks on GET /v1/node/<id>/allocations and hands every
//     changed answer to a callback as a full Snapshot. Refresh, Lookup and
//     RunningLocally are the one-shot queries the lifecycle uses to
//     cross-check before it destroys anything.
//   - Pure rules, each with table tests: the blocking-query index rules of
//     consul-template's watch/view.go (nextWaitIndex), the jittered backoff,
//     the delivery decision (first answer, changed content, resync), and the
//     conversion of api.Allocation into Alloc.
//   - source, the seam: nomadSource implements it with
//     github.com/hashicorp/nomad/api and classifies errors once (a definite
//     "alloc not found", a definite "unknown allocation" on the client,
//     ErrPermissionDenied). It re-reads Config.TokenFile on 401/403.
//
// What an answer means. Every successful answer is a complete list of the
// node's allocations that the token can see. An error is never read as
// "no allocations". But a successful answer can still omit live
// allocations: GET /v1/node/<id>/allocations silently drops allocations in
// namespaces where the token lacks read-job, and it answers 200 with an
// empty list for a node ID that is not registered. The watcher therefore
// confirms the node exists (GET /v1/node/<id>) before its first query, and
// the lifecycle must cross-check with Lookup before destroying data.
//
// Behaviour of Nomad 1.11.3 seen on a real agent (see nomad_test.go):
//
//   - GET /v1/allocation/<unknown or GC'd id>: 404 "alloc not found".
//   - GET /v1/allocation/<id> with a token lacking read-job in the
//     allocation's namespace: 500 `Unknown allocation "<id>"`, not 403.
//     Lookup reports it as ErrPermissionDenied.
//   - GET /v1/client/allocation/<id>/stats for an allocation the local
//     client does not have: 404 `Unknown allocation "<id>"`. Without
//     read-job: 403 "Permission denied". For an allocation that has
//     finished but is not yet garbage-collected by the servers it is still
//     200 (the client keeps its alloc runner, even after a client-side GC).
package allocwatch
