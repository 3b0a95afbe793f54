package zfs

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel kinds. Every failed command is returned as an *Error whose Unwrap
// yields one of these (or nil for an unclassified failure), so callers test
// with errors.Is and never look at stderr themselves.
var (
	// ErrNotExist: the dataset, snapshot or pool does not exist.
	ErrNotExist = errors.New("does not exist")
	// ErrExists: the dataset or snapshot already exists.
	ErrExists = errors.New("already exists")
	// ErrBusy: mounted and in use, or a held snapshot.
	ErrBusy = errors.New("busy")
	// ErrPermission: the caller may not do this (not root, no delegation).
	ErrPermission = errors.New("permission denied")
	// ErrHasChildren: destroy without -r of a dataset with children.
	ErrHasChildren = errors.New("has children")
	// ErrHasClones: destroy of a snapshot that clones depend on.
	ErrHasClones = errors.New("has dependent clones")
	// ErrNewerSnapshots: rollback to a snapshot that is not the latest.
	ErrNewerSnapshots = errors.New("more recent snapshots exist")
	// ErrNoParent: create of a dataset whose parent does not exist.
	ErrNoParent = errors.New("parent does not exist")
	// ErrInvalid: an invalid property name or value, or a bad name.
	ErrInvalid = errors.New("invalid argument")
	// ErrNoSpace: the pool or a quota is out of space.
	ErrNoSpace = errors.New("out of space")
	// ErrTimeout: the command did not finish before its deadline.
	ErrTimeout = errors.New("timed out")
	// ErrMounted: mount of a filesystem that is already mounted.
	ErrMounted = errors.New("already mounted")
	// ErrNotFound: the zfs or zpool executable itself is missing.
	ErrNotFound = errors.New("command not found")

	// Replication (zfs send and receive; testdata/openzfs-2.1.11/capture-send.sh).

	// ErrInterrupted: a stream did not arrive whole, because its sending
	// side stopped, the reader or writer on the way failed, or the command
	// was cancelled. A resumable receive (-s) kept what came, and the
	// target's receive_resume_token resumes it.
	ErrInterrupted = errors.New("stream interrupted")
	// ErrDestinationModified: an incremental receive into a filesystem
	// changed since its newest snapshot.
	ErrDestinationModified = errors.New("destination modified since its most recent snapshot")
	// ErrIncrementalMismatch: an incremental stream whose source is not the
	// target's newest snapshot, or a send from a source that is not older.
	ErrIncrementalMismatch = errors.New("incremental source does not match")
	// ErrBadResumeToken: zfs cannot resume from the token: corrupt, or the
	// snapshots it names are gone or are no longer the same. The receiving
	// side aborts its partial receive (receive -A) and starts again.
	ErrBadResumeToken = errors.New("unusable resume token")
	// ErrKeyUnavailable: an encrypted dataset's key is not loaded where it
	// is needed (a non-raw send, a non-raw stream onto a raw copy).
	ErrKeyUnavailable = errors.New("encryption key not loaded")
	// ErrWrongType: a property given does not apply to the dataset's type;
	// for a receive, the stream is not of a filesystem (a volume's stream
	// refused for a filesystem-only property set with -o; with -x, zfs
	// only warns).
	ErrWrongType = errors.New("property does not apply to the dataset's type")
)

// Error is a failed zfs or zpool command: what ran, what it said, and the
// classified kind.
type Error struct {
	// Cmd is "zfs" or "zpool".
	Cmd string
	// Args are the arguments after Cmd.
	Args []string
	// Stderr is the command's standard error, trimmed.
	Stderr string
	// ExitCode is the exit status, or -1 if the command did not exit.
	ExitCode int
	// Kind is the classified sentinel, nil when unknown.
	Kind error
	// Cause is the underlying error (exec, context), if any.
	Cause error
}

// NewError classifies a finished command's failure. Fakes use it too, so a
// fake's failures are classified exactly like real ones.
func NewError(cmd string, args []string, stderr string, exitCode int) *Error {
	stderr = strings.TrimSpace(stderr)
	return &Error{Cmd: cmd, Args: args, Stderr: stderr, ExitCode: exitCode, Kind: classify(stderr)}
}

func (e *Error) Error() string {
	msg := e.Stderr
	if msg == "" && e.Cause != nil {
		msg = e.Cause.Error()
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i] // the first line says it; the rest lists datasets
	}
	return fmt.Sprintf("%s %s: %s", e.Cmd, strings.Join(e.Args, " "), msg)
}

// Unwrap lets errors.Is match both the kind and the cause.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

// classifications maps stderr fragments of OpenZFS 2.x (C locale) to kinds.
// Order matters: the first match wins, and "cannot unmount ... busy" must be
// read as busy before anything else. See testdata/openzfs-2.1.11/err-*.
var classifications = []struct {
	fragment string
	kind     error
}{
	{"pool or dataset is busy", ErrBusy},
	{"dataset is busy", ErrBusy},
	{"target is busy", ErrBusy},
	{"unable to restore to destination", ErrNoParent}, // receive: "cannot open '<parent>': dataset does not exist" first
	{"dataset does not exist", ErrNotExist},
	{"no such pool", ErrNotExist},
	{"could not find any snapshots to destroy", ErrNotExist},
	{"no such tag on this dataset", ErrNotExist},
	{"filesystem already mounted", ErrMounted},
	{"dataset already exists", ErrExists},
	{"tag already exists on this dataset", ErrExists},
	{"parent does not exist", ErrNoParent},
	{"filesystem has children", ErrHasChildren},
	{"has children", ErrHasChildren},
	{"snapshot has dependent clones", ErrHasClones},
	{"more recent snapshots or bookmarks exist", ErrNewerSnapshots},
	{"permission denied", ErrPermission},
	{"must be superuser", ErrPermission},
	{"out of space", ErrNoSpace},
	{"quota exceeded", ErrNoSpace},
	{"does not apply to datasets of this type", ErrWrongType},
	{"invalid property", ErrInvalid},
	{"invalid numeric suffix", ErrInvalid},
	{"must be one of", ErrInvalid},
	{"bad numeric value", ErrInvalid},
	{"invalid character", ErrInvalid},
	{"invalid dataset name", ErrInvalid},
	{"invalid option", ErrInvalid},
	// Replication. "out of space" above comes first: a receive that ran
	// out of space is a full pool before it is an interrupted stream.
	{"checksum mismatch or incomplete stream", ErrInterrupted},
	{"failed to read from stream", ErrInterrupted},
	{"must specify -f to overwrite it", ErrExists}, // "destination 'x' exists"
	{"bookmark exists", ErrExists},
	{"has been modified since most recent snapshot", ErrDestinationModified},
	{"does not match incremental source", ErrIncrementalMismatch},
	{"not an earlier snapshot from the same fs", ErrIncrementalMismatch},
	{"resume token is corrupt", ErrBadResumeToken},
	{"used in the initial send no longer exists", ErrBadResumeToken},
	{"is no longer the same snapshot used in the initial send", ErrBadResumeToken},
	{"no longer exists", ErrBadResumeToken}, // "incremental source 0x... no longer exists"
	{"does not have any resumable receive state to abort", ErrNotExist},
	{"contains partially-complete state", ErrBusy}, // an incremental onto an interrupted one: resume or abort it
	{"does not exist", ErrNotExist},                // "destination 'x' does not exist"
	{"key must be loaded", ErrKeyUnavailable},
	{"cannot be set or excluded for raw streams", ErrInvalid},
	{"invalid stream", ErrInvalid},
	{"invalid flags combined with -t", ErrInvalid},
}

// classify matches the fragments against stderr with its whitespace
// folded: zfs wraps a long message ("... does not\nmatch incremental
// source").
func classify(stderr string) error {
	s := strings.ToLower(strings.Join(strings.Fields(stderr), " "))
	for _, c := range classifications {
		if strings.Contains(s, c.fragment) {
			return c.kind
		}
	}
	return nil
}
