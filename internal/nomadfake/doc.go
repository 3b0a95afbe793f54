// Package nomadfake is one Nomad agent (server and client in one process)
// seen through its HTTP API, below the seam (internal/nomadapi) the
// plugin's allocation watcher (allocwatch), the operator CLI and their
// tests talk through. It answers the endpoints they call with the status
// codes, headers and bodies a real Nomad 1.11.3 agent gives, so the real
// nomad/api client, decoding and error classification run on top of it:
//
//	GET /v1/node/<id>/allocations   blocking on ?index= and ?wait=
//	GET /v1/node/<id>, /v1/nodes
//	GET /v1/allocation/<id>, /v1/allocations
//	GET /v1/client/allocation/<id>/stats
//	GET /v1/agent/self, /v1/acl/token/self, /v1/namespaces, /v1/status/leader
//
// Files:
//
//   - server.go: the Server, its routes, request counts, the injected
//     faults (no leader, a reset connection, an answer without index), and
//     the meta headers (X-Nomad-Index, -KnownLeader, -LastContact) and error
//     bodies of every answer.
//   - cluster.go: what the servers and the client know (allocations, the
//     node, the raft index), the writes that change it, and the node and
//     agent endpoints.
//   - allocs.go: the allocation endpoints and the blocking query.
//   - acl.go: tokens and their rights per endpoint, /v1/acl/token/self and
//     /v1/namespaces.
//   - conformance_test.go holds the fake to a real agent: one table of
//     requests and tokens, run against both; nomadfake_test.go tests what an
//     idle agent does not show (blocking queries woken by writes, faults).
//
// Every answer restates one seen on a real agent (allocwatch/nomad_test.go,
// cli/nomad_fakezfs_test.go, and this package's conformance test), or, where
// no test provokes it (a leader election, a client that dropped an
// allocation the servers still know), Nomad's source: each handler's doc
// comment says which. What it leaves out (jitter on blocking waits,
// every field of a real Node or Allocation, the answer order Nomad's memdb
// indexes give) no caller reads.
//
//	n := nomadfake.New(t, nodeID)
//	n.SetTokens(map[string]nomadfake.Token{"s3cret": {Node: true, ReadJob: []string{"default"}}})
//	n.Upsert(&api.Allocation{ID: id, ClientStatus: "running", ...})
//	w, _ := allocwatch.New(allocwatch.Config{Config: nomadapi.Config{Address: n.URL(), Token: "s3cret"}}, nil)
package nomadfake
