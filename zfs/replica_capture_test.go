package zfs

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A replica's flow on real OpenZFS 2.1.11 (testdata/openzfs-2.1.11/
// capture-replica.sh, issue 30): the holder bookmarks each replica
// snapshot and destroys it, then sends the next increment from the
// bookmark.

// guidOf finds name's guid in a `zfs list -H -p -o name,<type>,guid,...`
// capture (the guid in its third column).
func guidOf(t *testing.T, out []byte, name string) uint64 {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Split(l, "\t"); len(f) > 2 && f[0] == name {
			g, err := strconv.ParseUint(f[2], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
	}
	t.Fatalf("%s not listed in %q", name, out)
	return 0
}

// TestReplicaCapturesBookmarks: a bookmark is its snapshot's guid, which
// the receiver's copy of the snapshot keeps; an increment is sent from it
// once the snapshot is gone; and a resume token of such an increment names
// that guid as its base, which CheckResumeToken accepts for that send.
func TestReplicaCapturesBookmarks(t *testing.T) {
	marks, err := ParseBookmarks(readCapture(t, "rep-list-bookmarks-1").stdout)
	if err != nil {
		t.Fatal(err)
	}
	if len(marks) != 1 || marks[0].Name != "tank/rep/slot#replica-1" {
		t.Fatalf("bookmarks %+v", marks)
	}
	replica := readCapture(t, "rep-list-replica").stdout
	if g := guidOf(t, replica, "tank/rep/class/replica-a-pg-1@replica-1"); g != marks[0].GUID {
		t.Errorf("the replica's @replica-1 has guid %d, the holder's bookmark %d", g, marks[0].GUID)
	}
	holder := readCapture(t, "rep-list-holder-1").stdout
	if strings.Contains(string(holder), "@replica-1") || guidOf(t, holder, "tank/rep/slot#replica-1") != marks[0].GUID {
		t.Errorf("the holder after the first copy: %q, want its bookmark and no snapshot", holder)
	}
	for _, name := range []string{"rep-destroy-snap-1", "rep-recv-incr", "rep-destroy-bookmark-1", "rep-recv-resume",
		"rep-recv-raw-incr", "rep-rename", "rep-set-canmount"} {
		if c := readCapture(t, name); c.rc != 0 {
			t.Errorf("%s: exit %d: %s", name, c.rc, c.stderr)
		}
	}

	est, err := ParseSendEstimate(readCapture(t, "rep-send-dry-incr").stdout)
	if err != nil {
		t.Fatal(err)
	}
	if est.Full || est.From != "tank/rep/slot#replica-1" || est.To != "tank/rep/slot@replica-2" || est.Size < 2<<20 {
		t.Errorf("estimate %+v, want the increment of 2 MiB from the bookmark", est)
	}

	tok, err := ParseResumeToken(readCapture(t, "rep-send-dry-token").stdout)
	if err != nil {
		t.Fatal(err)
	}
	resumed := readCapture(t, "rep-list-resumed").stdout
	base := guidOf(t, resumed, "tank/rep/class/replica-a-pg-1@replica-2")
	to := guidOf(t, resumed, "tank/rep/class/replica-a-pg-1@replica-3")
	if tok.FromGUID != base || tok.ToGUID != to || tok.ToName != "tank/rep/slot@replica-3" {
		t.Errorf("token %+v, want from %d (the bookmark #replica-2) to %d", tok, base, to)
	}
	o := SendOptions{Snapshot: "tank/rep/slot@replica-3", From: "tank/rep/slot#replica-2"}
	if err := CheckResumeToken(tok, ExpectFor(o, to, base, false)); err != nil {
		t.Errorf("the token of an increment from a bookmark, refused for that send: %v", err)
	}
	if _, err := SendArgs(o); err != nil {
		t.Errorf("SendArgs from a bookmark: %v", err)
	}

	// The claim keeps every snapshot and the data.
	claimed := readCapture(t, "rep-list-claimed").stdout
	if g := guidOf(t, claimed, "tank/rep/class/parked-a-pg-1@replica-3"); g != to {
		t.Errorf("the claimed copy's @replica-3 guid %d, want %d", g, to)
	}
	sums := strings.Fields(string(readCapture(t, "rep-read-claimed").stdout))
	if len(sums) != 4 || sums[0] != sums[2] {
		t.Errorf("the claimed copy's data differs from the holder's: %q", sums)
	}
}

// TestReplicaCapturesErrors: the failures of a replica's flow classify to
// the kinds callers test with errors.Is. canmount cannot be inherited: the
// claim sets it back, and the error is none of the known kinds (never
// read as "absent").
func TestReplicaCapturesErrors(t *testing.T) {
	cases := []struct {
		capture string
		want    error
	}{
		{"err-rep-destroy-bookmark-gone", ErrNotExist},
		{"err-rep-bookmark-no-snap", ErrNotExist},
		{"err-rep-send-from-gone-bookmark", ErrNotExist},
		{"err-rep-recv-wrong-base", ErrIncrementalMismatch},
		{"err-rep-recv-interrupted", ErrInterrupted},
		{"err-rep-inherit-canmount", nil},
	}
	kinds := []error{ErrNotExist, ErrExists, ErrBusy, ErrIncrementalMismatch, ErrInterrupted, ErrInvalid, ErrBadResumeToken}
	for _, tc := range cases {
		t.Run(tc.capture, func(t *testing.T) {
			c := readCapture(t, tc.capture)
			if c.rc == 0 {
				t.Fatalf("capture %s exited 0", tc.capture)
			}
			err := NewError("zfs", []string{"x"}, string(c.stderr), c.rc)
			for _, k := range kinds {
				if got := errors.Is(err, k); got != (k == tc.want) {
					t.Errorf("errors.Is(%v, %v) = %v", err, k, got)
				}
			}
		})
	}
	// Destroying a bookmark already gone is success, as any destroy.
	c := readCapture(t, "err-rep-destroy-bookmark-gone")
	r := &recordingRunner{err: NewError("zfs", nil, string(c.stderr), c.rc)}
	if err := NewClient(r).Destroy(t.Context(), "tank/rep/slot#replica-1", DestroyOptions{}); err != nil {
		t.Errorf("destroying a bookmark already gone: %v", err)
	}
}

func TestCommandArgs(t *testing.T) {
	cases := []struct {
		name string
		cmd  Command
		want []string
		bad  bool
	}{
		{name: "bookmark", cmd: Command{Verb: VerbBookmark, Name: "tank/a/s-1@replica-3", Arg: "tank/a/s-1#replica-3"},
			want: []string{"bookmark", "tank/a/s-1@replica-3", "tank/a/s-1#replica-3"}},
		{name: "bookmark of another filesystem", cmd: Command{Verb: VerbBookmark, Name: "tank/a@s", Arg: "tank/b#s"}, bad: true},
		{name: "bookmark of a filesystem, not a snapshot", cmd: Command{Verb: VerbBookmark, Name: "tank/a", Arg: "tank/a#s"}, bad: true},
		{name: "destroy a bookmark", cmd: Command{Verb: VerbDestroy, Name: "tank/a#replica-1"},
			want: []string{"destroy", "tank/a#replica-1"}},
		{name: "receive -A", cmd: Command{Verb: VerbReceiveAbort, Name: "tank/a"}, want: []string{"receive", "-A", "tank/a"}},
		{name: "an unknown verb", cmd: Command{Verb: "send", Name: "tank/a@s"}, bad: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cmd.Args()
			if (err != nil) != tc.bad {
				t.Fatalf("err %v, want an error: %v", err, tc.bad)
			}
			if !tc.bad && !slices.Equal(got, tc.want) {
				t.Errorf("argv %q, want %q", got, tc.want)
			}
		})
	}
}
