// Package zfstest is a stateful fake of the zfs and zpool commands of
// OpenZFS 2.1, below the zfs.Runner seam: it takes argv and answers with
// the stdout, stderr and exit status the real commands print (captured in
// ../testdata/openzfs-2.1.11), so the zfs package's argv builders, parsers
// and error classification are tested against real behaviour, not against
// themselves.
//
// Use it in process as a zfs.Runner:
//
//	f := zfstest.New(zfstest.Options{MountRoot: t.TempDir()})
//	f.AddPool("tank", 1<<30)
//	out, err := f.Run(ctx, "zfs", "list", "-H", "-p", "-o", "name", "tank")
//
// or as executables for a child process (a plugin started by a real Nomad
// agent): TestMain calls ImpersonateIfCalled, InstallExecutables links zfs
// and zpool to the test binary and moves the state into a JSON file shared
// under a flock; the Fake then sees what the children did.
//
// Datasets have real directories: MountRoot acts as every pool's altroot,
// a mounted filesystem's files are in its mountpoint, an unmounted one's
// are kept aside, a snapshot is a copy, so rollback restores files exactly
// and a clone starts with the snapshot's files. Space (used, referenced,
// written, available...) is computed from the files' sizes.
//
// Emulated: zfs list, get, create, destroy, snapshot, rollback, clone,
// rename, set, inherit, mount, unmount, hold, release, holds, version,
// bookmark, send and receive (Stream, the zfs.Streamer: one snapshot, full
// or incremental from a snapshot or bookmark, -s partial state with its
// receive_resume_token, -t resume, -A abort, -n -v -P estimates and token
// contents, -o/-x/-u; EncodeResumeToken makes the tokens a hostile
// receiver would forge, StreamWithProps and StreamWithFile the streams a
// hostile sender would); zpool list and get. Property inheritance and sources, validation of
// names and values with libzfs's messages, dependents and clones, holds,
// busy mounts (SetBusy), pool health, fault injection (Inject, Hang) and a
// log of calls (Calls).
//
// The fake's send stream is its own format (stream.go), not OpenZFS's:
// an incremental carries every file of its snapshot, -w -c -L -e are only
// recorded, and the fake holds a stream in memory.
//
// Not emulated: volumes, encryption (raw sends are recorded as such),
// receive -F/-d/-e, replication (-R) and -I streams, promote,
// diff, allow, userspace, quotas enforced on writes (available only goes
// to 0), compression (ratios are 1.00), received properties, zpool status
// and pool creation commands, snapshot ranges (a%b) and recursive snapshot
// renames, listsnapshots=on, list by mountpoint path, mount options, the
// kernel's 1 MiB recordsize limit (16M is accepted). Mounting over a
// non-empty directory fails (as with overlay=off) instead of hiding it.
// Dependents are listed in name order, where real zfs uses on-disk hash
// order.
package zfstest
