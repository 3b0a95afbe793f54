// Package transfer moves an allocation's data between the plugins of two
// nodes: the node where allocation A ran sends a zfs send stream of A's
// data, the node where Nomad placed A's replacement B receives it into
// zfs receive -s. It is the transport only; when to transfer, what to
// snapshot, and what the received copy becomes are the lifecycle's.
//
// Layers, top to bottom:
//
//   - Client.Fetch (receiving side) and Server (sending side): one HTTP/2
//     request per stream over mutual TLS (Go's crypto/tls and net/http),
//     the stream as the response body, its result as a trailer
//     (protocol.go). Both stream through zfs.Client's Send and Receive: no
//     more of the data in memory than a few buffers, whatever its size.
//   - The sender's seams: Authorizer (may this peer have A's data?),
//     Source (what to send for it: the lifecycle's), zfs.CheckResumeToken
//     (does a token from the peer resume exactly that?).
//   - The receiver's seam: Locator (where is A's node's plugin?).
//   - Nomad: the lookups both ask of their own agent's API. APINomad
//     implements it with nomad/api; NomadAuthorizer and NomadLocator are
//     the rules over it.
//
// # Authentication
//
// Both ends present the certificate an operator already has for Nomad
// (`nomad tls cert create -client`, signed by the agent CA) and accept
// only a chain to that CA naming client.<region>.nomad or
// server.<region>.nomad, as Nomad's RPC accepts a client agent's. TLS 1.3
// only. The files are read again at each connection, so a rotated
// certificate needs no restart.
//
// # Authorization: which node is asking
//
// A certificate made with `nomad tls cert create -client` is the same for
// every client of a region: it proves the requester is an agent of the
// cluster, not which node. The sender therefore trusts no claim of the
// requester about itself. It asks its own Nomad API about the two
// allocations the request names and allows the request only if A runs on
// the sender's node, B's previous allocation is A (same job and group), B
// is still to run, and the connection comes from one of the addresses
// Nomad lists for the node B is placed on (Decide). A replica's pull
// (KindReplica, issue 30) names no B: it is allowed only while A runs on
// the sender's node and from an address of a node that keeps A's
// replicas, as the sender's own plugin chooses them from Nomad's node
// list for the slot's class (DecideReplica, replica_authz.go; the list
// kept NodeListTTL). Every other request is refused with 403 and logged.
//
// The address check was chosen over the alternatives because it needs
// nothing more from the operator:
//
//   - Dialling B's node back (the sender connects to the address Nomad
//     gives for B's node) proves the same thing, an address Nomad lists
//     for B's node, at the cost of a listener on both sides and a second
//     connection; it is no stronger against an attacker on the path.
//   - A certificate per node (a SAN naming the node) proves the node
//     cryptographically, but `nomad tls cert create` makes none by
//     default, and every operator would have to issue and rotate one per
//     node. It is therefore an option, Config.RequireNodeIdentity
//     (identity.go): the address rule, and the certificate naming B's
//     node as <node name>.<region>.nomad.
//
// One replacement is admitted without the link: Nomad 1.6.2 places the
// replacement of an allocation lost with its node under
// stop_after_client_disconnect as a new allocation, B naming no
// predecessor and A no replacement (model.LostPredecessor). Decide then
// asks, instead of the link, that the servers stopped A as lost with its
// node (desired status stop, desired description "alloc is lost since
// its node is down"), that A names no replacement, that B has A's
// namespace, job, group and name ("<job>.<group>[<index>]") and was
// created after A; B to run and the address of B's node as for a link.
// What this admits beyond the link: any allocation that Nomad places
// under A's name after A's loss, while it runs, may have A's last data,
// which is what its job asked for (the same group's sticky data); the
// replacement Nomad places in A's index is exactly such an allocation.
// What it does not: another job's or group's allocation, another index,
// an allocation placed before A, or data of an allocation that ended by
// itself or was stopped by an operator or an update. If A's index is
// filled twice in turn (B lost as well, then C), A's node may send A's
// data to C while it keeps it (sticky_wait): C's own plugin asks for the
// newest of its predecessors it knows of, and the data stays in the job.
//
// What the address check alone leaves open: an attacker that holds an
// agent's certificate and key (a compromised client; the CLI's
// certificate, cli.<region>.nomad, is refused) and can send from B's
// node's address, that is, runs on B's node or sits on the path with its
// address. Such an attacker can already read B's data once it arrives
// there. With node identity it also needs B's node's own key.
//
// The sender authorizes on the request's headers before reading its body
// (a refused peer holds no handler while it sends), keeps each decision a
// few seconds and rate-limits the Nomad lookups behind them
// (decisions.go).
//
// # Resume tokens
//
// A partial receive leaves a receive_resume_token on the receiving side,
// which the receiver sends back to resume. zfs send -t sends whatever a
// token names, decrypted unless it says rawok (OpenZFS #14153), so the
// sender decodes it with its own zfs (send -n -v -P -t) and resumes only a
// token that names exactly what its Source says to send now (Send,
// zfs.CheckResumeToken); a raw send also passes -w, which zfs honours over
// the token.
//
// # Discovery
//
// Each plugin publishes its port (and its address, if it listens on one)
// as the attributes AttrPort and AttrAddress of its device groups, which
// any token with node:read reads through the Nomad API; the receiver finds
// A's node from A (Allocation → Node). No list of peers is kept.
package transfer
