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
//   - source, the seam: the calls of internal/nomadapi's Client, the
//     project's one Nomad API client, which builds the requests, re-reads
//     Config.TokenFile on 401/403 and classifies errors once (a definite
//     "alloc not found", a definite "unknown allocation" on the client,
//     nomadapi.ErrPermissionDenied). Tests answer from a script instead.
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
// What Nomad answers to each request, seen on a real agent (nomad_test.go
// here holds it), is listed in internal/nomadapi's doc.go.
package allocwatch
