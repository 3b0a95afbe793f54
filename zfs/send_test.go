package zfs

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestSendReceiveArgv(t *testing.T) {
	cases := []struct {
		name string
		args func() ([]string, error)
		want []string
	}{
		{
			name: "full send",
			args: func() ([]string, error) { return SendArgs(SendOptions{Snapshot: "tank/a@s1"}) },
			want: []string{"send", "tank/a@s1"},
		},
		{
			name: "incremental from a snapshot",
			args: func() ([]string, error) { return SendArgs(SendOptions{Snapshot: "tank/a@s2", From: "tank/a@s1"}) },
			want: []string{"send", "-i", "tank/a@s1", "tank/a@s2"},
		},
		{
			name: "incremental from a bookmark",
			args: func() ([]string, error) { return SendArgs(SendOptions{Snapshot: "tank/a@s2", From: "tank/a#b1"}) },
			want: []string{"send", "-i", "tank/a#b1", "tank/a@s2"},
		},
		{
			name: "with intermediate snapshots",
			args: func() ([]string, error) {
				return SendArgs(SendOptions{Snapshot: "tank/a@s3", From: "tank/a@s1", Intermediates: true})
			},
			want: []string{"send", "-I", "tank/a@s1", "tank/a@s3"},
		},
		{
			name: "every stream flag, in a fixed order",
			args: func() ([]string, error) {
				return SendArgs(SendOptions{Snapshot: "tank/a@s1", Raw: true, Compressed: true, LargeBlocks: true, Embedded: true, Props: true})
			},
			want: []string{"send", "-L", "-c", "-e", "-p", "-w", "tank/a@s1"},
		},
		{
			name: "raw incremental",
			args: func() ([]string, error) {
				return SendArgs(SendOptions{Snapshot: "tank/enc@s2", From: "tank/enc@s1", Raw: true})
			},
			want: []string{"send", "-w", "-i", "tank/enc@s1", "tank/enc@s2"},
		},
		{
			name: "estimate",
			args: func() ([]string, error) {
				return SendEstimateArgs(SendOptions{Snapshot: "tank/a@s2", From: "tank/a#b1", Compressed: true})
			},
			want: []string{"send", "-n", "-v", "-P", "-c", "-i", "tank/a#b1", "tank/a@s2"},
		},
		{
			name: "resume",
			args: func() ([]string, error) { return SendResumeArgs("1-991bdc0d9-c0-789c6360", false) },
			want: []string{"send", "-t", "1-991bdc0d9-c0-789c6360"},
		},
		{
			name: "resume raw: -w over the token",
			args: func() ([]string, error) { return SendResumeArgs("1-991bdc0d9-c0-789c6360", true) },
			want: []string{"send", "-w", "-t", "1-991bdc0d9-c0-789c6360"},
		},
		{
			name: "decode a token",
			args: func() ([]string, error) { return SendResumeEstimateArgs("1-991bdc0d9-c0-789c6360") },
			want: []string{"send", "-n", "-v", "-P", "-t", "1-991bdc0d9-c0-789c6360"},
		},
		{
			name: "resumable unmounted receive with the plugin's properties",
			args: func() ([]string, error) {
				return ReceiveArgs(ReceiveOptions{Target: "tank/nomad/pg/incoming-1", Resumable: true, NoMount: true,
					Props:   map[string]string{"nomad-device-zfs:owner": "tank/nomad/pg/incoming-1", "canmount": "noauto"},
					Exclude: []string{"mountpoint", "b:x", "mountpoint"}})
			},
			want: []string{"receive", "-s", "-u", "-o", "canmount=noauto", "-o", "nomad-device-zfs:owner=tank/nomad/pg/incoming-1",
				"-x", "b:x", "-x", "mountpoint", "tank/nomad/pg/incoming-1"},
		},
		{
			name: "plain receive",
			args: func() ([]string, error) { return ReceiveArgs(ReceiveOptions{Target: "tank/b"}) },
			want: []string{"receive", "tank/b"},
		},
		{
			name: "abort",
			args: func() ([]string, error) { return ReceiveAbortArgs("tank/b") },
			want: []string{"receive", "-A", "tank/b"},
		},
		{
			name: "bookmark",
			args: func() ([]string, error) { return BookmarkArgs("tank/a@s1", "tank/a#s1") },
			want: []string{"bookmark", "tank/a@s1", "tank/a#s1"},
		},
		{
			name: "destroy a bookmark",
			args: func() ([]string, error) { return DestroyArgs("tank/a#s1", DestroyOptions{}) },
			want: []string{"destroy", "tank/a#s1"},
		},
		{
			name: "one resume token",
			args: func() ([]string, error) { return ResumeTokensArgs("tank/b", false) },
			want: []string{"list", "-H", "-p", "-t", "filesystem", "-o", "name,receive_resume_token", "tank/b"},
		},
		{
			name: "resume tokens below a parent",
			args: func() ([]string, error) { return ResumeTokensArgs("tank/nomad", true) },
			want: []string{"list", "-H", "-p", "-r", "-t", "filesystem", "-o", "name,receive_resume_token", "tank/nomad"},
		},
		{
			name: "bookmarks",
			args: func() ([]string, error) { return ListBookmarksArgs("tank/nomad") },
			want: []string{"list", "-H", "-p", "-r", "-t", "bookmark", "-o", "name,guid,createtxg", "tank/nomad"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.args()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestSendReceiveArgvRefuse(t *testing.T) {
	cases := []struct {
		name    string
		args    func() ([]string, error)
		wantErr string
	}{
		{"send of a filesystem", func() ([]string, error) { return SendArgs(SendOptions{Snapshot: "tank/a"}) }, "not a snapshot name"},
		{"send of a flag", func() ([]string, error) { return SendArgs(SendOptions{Snapshot: "-R@x"}) }, "must start with a letter"},
		{"source of another filesystem", func() ([]string, error) {
			return SendArgs(SendOptions{Snapshot: "tank/a@s2", From: "tank/b@s1"})
		}, "not of \"tank/a@s2\"'s filesystem"},
		{"source is the snapshot", func() ([]string, error) {
			return SendArgs(SendOptions{Snapshot: "tank/a@s2", From: "tank/a@s2"})
		}, "is the snapshot sent"},
		{"short source", func() ([]string, error) { return SendArgs(SendOptions{Snapshot: "tank/a@s2", From: "@s1"}) }, "empty name component"},
		{"-I from a bookmark", func() ([]string, error) {
			return SendArgs(SendOptions{Snapshot: "tank/a@s3", From: "tank/a#b1", Intermediates: true})
		}, "not a bookmark"},
		{"-I without a source", func() ([]string, error) {
			return SendArgs(SendOptions{Snapshot: "tank/a@s3", Intermediates: true})
		}, "need an incremental source"},
		{"token with a flag", func() ([]string, error) { return SendResumeArgs("-R", false) }, "resume token"},
		{"token with a space", func() ([]string, error) { return SendResumeArgs("1-ab-c0 x-789c", false) }, "holds"},
		{"token with upper case", func() ([]string, error) { return SendResumeArgs("1-AB-c0-789c", false) }, "holds"},
		{"empty token", func() ([]string, error) { return SendResumeEstimateArgs("") }, "empty resume token"},
		{"receive into a snapshot", func() ([]string, error) { return ReceiveArgs(ReceiveOptions{Target: "tank/b@s"}) }, "snapshot name"},
		{"property both set and excluded", func() ([]string, error) {
			return ReceiveArgs(ReceiveOptions{Target: "tank/b", Props: map[string]string{"canmount": "noauto"}, Exclude: []string{"canmount"}})
		}, "both set (-o) and excluded (-x)"},
		{"bad excluded property", func() ([]string, error) {
			return ReceiveArgs(ReceiveOptions{Target: "tank/b", Exclude: []string{"-F"}})
		}, "must start with a letter"},
		{"property value with a newline", func() ([]string, error) {
			return ReceiveArgs(ReceiveOptions{Target: "tank/b", Props: map[string]string{"a:b": "x\ny"}})
		}, "tab or newline"},
		{"bookmark of another filesystem", func() ([]string, error) { return BookmarkArgs("tank/a@s1", "tank/b#s1") }, "not of"},
		{"bookmark without #", func() ([]string, error) { return BookmarkArgs("tank/a@s1", "tank/a@s1") }, "not a bookmark name"},
		{"abort of a flag", func() ([]string, error) { return ReceiveAbortArgs("-F") }, "must start with a letter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.args()
			if err == nil {
				t.Fatalf("built %q, want an error", got)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q does not say %q", err, tc.wantErr)
			}
		})
	}
}

func TestClassifyReplicationErrors(t *testing.T) {
	cases := []struct {
		capture string
		want    error
	}{
		{"err-recv-interrupted", ErrInterrupted},
		{"err-recv-interrupted-incr", ErrInterrupted},
		{"err-recv-interrupted-raw", ErrInterrupted},
		{"err-recv-sender-killed", ErrInterrupted},
		{"err-recv-empty", ErrInterrupted},
		{"err-recv-exists", ErrExists},
		{"err-recv-partial-exists", ErrExists},
		{"bookmark-exists", ErrExists},
		{"err-recv-modified", ErrDestinationModified},
		{"err-recv-incr-mismatch2", ErrIncrementalMismatch},
		{"err-send-bad-from", ErrIncrementalMismatch},
		{"err-recv-incr-mismatch", ErrNotExist}, // the incremental's target does not exist
		{"err-recv-no-parent", ErrNoParent},
		{"err-recv-nospace", ErrNoSpace},
		{"err-send-token-corrupt", ErrBadResumeToken},
		{"err-send-token-garbage", ErrBadResumeToken},
		{"err-send-token-gone", ErrBadResumeToken},
		{"err-send-token-replaced", ErrBadResumeToken},
		{"err-send-no-snap", ErrNotExist},
		{"err-send-from-missing", ErrNotExist},
		{"err-recv-abort-none", ErrNotExist},
		{"err-recv-abort-missing", ErrNotExist},
		{"err-send-enc-unloaded", ErrKeyUnavailable},
		{"err-recv-plain-onto-raw", ErrKeyUnavailable},
		{"err-recv-raw-o-encryption", ErrInvalid},
		{"err-recv-garbage", ErrInvalid},
		{"err-send-token-with-i", ErrInvalid},
		{"err-recv-volume-o", ErrWrongType},
	}
	kinds := []error{ErrNotExist, ErrExists, ErrNoParent, ErrNoSpace, ErrInvalid, ErrInterrupted, ErrDestinationModified,
		ErrIncrementalMismatch, ErrBadResumeToken, ErrKeyUnavailable, ErrWrongType}
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
}

func TestParseSendEstimate(t *testing.T) {
	cases := []struct {
		capture string
		want    SendEstimate
	}{
		{"send-dry-full", SendEstimate{Full: true, To: "tank/xfer/src@s1", Size: 8416880}},
		{"send-dry-incr", SendEstimate{From: "tank/xfer/src@s1", To: "tank/xfer/src@s2", Size: 2109424}},
		{"send-dry-bookmark", SendEstimate{From: "tank/xfer/src#b1", To: "tank/xfer/src@s2", Size: 2109424}},
		{"send-dry-intermediate", SendEstimate{From: "s2", To: "tank/xfer/src@s3", Size: 3168288}},
		{"send-dry-raw", SendEstimate{Full: true, To: "tank/xfer/enc@s1", Size: 4253552}},
	}
	for _, tc := range cases {
		t.Run(tc.capture, func(t *testing.T) {
			got, err := ParseSendEstimate(readCapture(t, tc.capture).stdout)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	for _, bad := range []string{"", "full\ttank/a@s\n", "size\tmany\n", "total estimated size is 5.27M\nsize\t1\n"} {
		if _, err := ParseSendEstimate([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParseBookmarksAndTokens(t *testing.T) {
	marks, err := ParseBookmarks(readCapture(t, "list-bookmarks").stdout)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Bookmark{{Name: "tank/xfer/src#b1", GUID: 2904051388168125192, CreateTxg: 11}}; !reflect.DeepEqual(marks, want) {
		t.Fatalf("bookmarks %+v, want %+v", marks, want)
	}
	// A partial receive's token, where the others have none ("-").
	out := selectColumns(readCapture(t, "list-partial").stdout, "0,4")
	states, err := ParseResumeTokens(out)
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, s := range states {
		tokens[s.Dataset] = s.Token
	}
	if tokens["tank/xfer/dst"] != "" || !strings.HasPrefix(tokens["tank/xfer/part"], "1-") {
		t.Fatalf("tokens %q", tokens)
	}
	if _, err := ParseResumeTokens([]byte("tank/a\t1-x y\n")); err == nil {
		t.Fatal("a malformed token was read")
	}
}
