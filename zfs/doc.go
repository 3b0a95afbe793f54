// Package zfs is the only code in nomad-device-zfs that runs zfs or zpool.
//
// Layers, top to bottom:
//
//   - Client: one method per operation (List, Pools, Create, Clone, Destroy,
//     Snapshot, Rollback, Set, Inherit, Rename, Hold, Release, Holds, Mount;
//     for replication Send, SendResume, Receive, ReceiveAbort, Bookmark,
//     Bookmarks, ResumeToken(s), DecodeResumeToken, SendEstimate), each
//     exactly one process. Send and Receive stream through the runner's
//     Streamer, holding no more of the data than a copy buffer.
//   - Pure argv builders (ListArgs, CreateArgs, ...) that validate every name
//     and property first, so no operand can be read as a flag, and emit
//     properties in sorted order; and parsers of `-H -p` output that check the
//     column count of every line.
//   - Runner, the seam: zfsexec.Runner (package zfs/zfsexec, apart so that
//     the model links no process code) runs the real binaries with a
//     context and a timeout, stdout and stderr kept apart, and classifies
//     failures once into an *Error whose kind callers test with errors.Is
//     (ErrNotExist, ErrBusy, ErrExists, ErrPermission, ...; for replication
//     ErrInterrupted, ErrDestinationModified, ErrIncrementalMismatch,
//     ErrBadResumeToken, ErrKeyUnavailable). An unclassified failure is never read
//     as "does not exist". zfstest.Fake emulates the CLIs below this seam.
//   - CheckResumeToken, the pure rule a sending side applies to a resume
//     token from its peer before `zfs send -t` (OpenZFS #14153).
//
// Why not only github.com/mistifyio/go-zfs/v3: it runs every command with
// exec.Command and no context or timeout (a zfs stuck on a suspended pool
// would hang Reserve forever), has no injectable runner, reads no user
// properties in bulk (one `zfs get` per dataset and property — the plugin
// scans every slot's state in one `zfs list`), has no holds, no `inherit`,
// no `create` of a filesystem with all its properties in one call, and its
// parser requires exactly its own 13 columns. It is used where it fits: its
// dataset-type and pool-health names are the ones this package reports
// (spelled as constants here, held equal to go-zfs's by a test, since go-zfs
// links os/exec and the slot model reads these types), and the e2e tests use
// it against the real OpenZFS to cross-check this package with an
// independent implementation.
//
// Captured real OpenZFS 2.1.11 output in testdata/openzfs-2.1.11 (made by
// capture.sh there, capture-send.sh for send and receive) drives the parser
// and classification tests.
package zfs
