package zfstest

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCaptureReplicaFlow replays capture-replica.sh on the fake (issue
// 30): bookmarks as the base of increments once their snapshots are gone,
// an increment from a bookmark cut and resumed, a replica claimed by
// rename; each step exits as on OpenZFS 2.1.11, each failure with its
// message, and the listings have the capture's shape.
func TestCaptureReplicaFlow(t *testing.T) {
	f := newFake(t)
	mustRun(t, f, "zfs", "set", "mountpoint=/tank", "tank")
	for _, ds := range []string{"tank/rep", "tank/rep/class", "tank/rep/slot"} {
		mustRun(t, f, "zfs", "create", ds)
	}
	slot := filepath.Join(root(f), "tank/rep/slot")
	writeFile(t, filepath.Join(slot, "a"), strings.Repeat("a", 8<<10))
	const replica = "tank/rep/class/replica-a-pg-1"
	mustRun(t, f, "zfs", "snapshot", "tank/rep/slot@replica-1")

	steps := []struct {
		name  string
		setup func()
		run   func() Result
		// out: compare stdout, with these tab-separated columns by shape.
		out   bool
		shape []int
	}{
		{name: "rep-bookmark-1", run: func() Result { return try(f, "zfs", "bookmark", "tank/rep/slot@replica-1", "tank/rep/slot#replica-1") }},
		{name: "rep-recv-full", run: func() Result {
			return receive(f, send(t, f, "tank/rep/slot@replica-1"), "-s", "-u", "-o", "canmount=noauto",
				"-o", "nomad-device-zfs:state=replica", replica)
		}},
		{name: "rep-destroy-snap-1", run: func() Result { return try(f, "zfs", "destroy", "tank/rep/slot@replica-1") }},
		{name: "rep-list-holder-1", out: true, shape: []int{2, 3}, run: func() Result {
			return try(f, "zfs", "list", "-H", "-p", "-r", "-t", "filesystem,snapshot,bookmark", "-o", "name,type,guid,createtxg", "tank/rep/slot")
		}},
		{name: "rep-list-bookmarks-1", out: true, shape: []int{1, 2}, run: func() Result {
			return try(f, "zfs", "list", "-H", "-p", "-r", "-t", "bookmark", "-o", "name,guid,createtxg", "tank/rep/slot")
		}},
		{name: "rep-recv-incr", setup: func() {
			writeFile(t, filepath.Join(slot, "b"), strings.Repeat("b", 2<<10))
			mustRun(t, f, "zfs", "snapshot", "tank/rep/slot@replica-2")
		}, run: func() Result {
			return receive(f, send(t, f, "-i", "tank/rep/slot#replica-1", "tank/rep/slot@replica-2"), "-s", "-u", replica)
		}},
		{name: "rep-destroy-bookmark-1", setup: func() {
			mustRun(t, f, "zfs", "bookmark", "tank/rep/slot@replica-2", "tank/rep/slot#replica-2")
			mustRun(t, f, "zfs", "destroy", "tank/rep/slot@replica-2")
		}, run: func() Result { return try(f, "zfs", "destroy", "tank/rep/slot#replica-1") }},
		{name: "err-rep-destroy-bookmark-gone", run: func() Result { return try(f, "zfs", "destroy", "tank/rep/slot#replica-1") }},
		{name: "err-rep-bookmark-no-snap", run: func() Result {
			return try(f, "zfs", "bookmark", "tank/rep/slot@replica-9", "tank/rep/slot#replica-9")
		}},
		{name: "rep-list-replica", out: true, shape: []int{2}, run: func() Result {
			return try(f, "zfs", "list", "-H", "-p", "-r", "-t", "filesystem,snapshot", "-o", "name,type,guid,mounted,canmount,nomad-device-zfs:state", "tank/rep/class")
		}},
		{name: "err-rep-send-from-gone-bookmark", setup: func() {
			writeFile(t, filepath.Join(slot, "c"), strings.Repeat("c", 4<<10))
			mustRun(t, f, "zfs", "snapshot", "tank/rep/slot@replica-3")
		}, run: func() Result {
			return try(f, "zfs", "send", "-i", "tank/rep/slot#replica-1", "tank/rep/slot@replica-3")
		}},
		{name: "err-rep-recv-interrupted", run: func() Result {
			s := send(t, f, "-i", "tank/rep/slot#replica-2", "tank/rep/slot@replica-3")
			return receive(f, s[:len(s)/2], "-s", "-u", replica)
		}},
		{name: "rep-recv-resume", run: func() Result {
			tok := strings.TrimSpace(mustRun(t, f, "zfs", "get", "-H", "-o", "value", "receive_resume_token", replica))
			return receive(f, send(t, f, "-t", tok), "-s", "-u", replica)
		}},
		{name: "err-rep-recv-wrong-base", setup: func() {
			mustRun(t, f, "zfs", "bookmark", "tank/rep/slot@replica-3", "tank/rep/slot#replica-3")
			writeFile(t, filepath.Join(slot, "d"), "more\n")
			mustRun(t, f, "zfs", "snapshot", "tank/rep/slot@replica-4")
			mustRun(t, f, "zfs", "bookmark", "tank/rep/slot@replica-4", "tank/rep/slot#replica-4")
			writeFile(t, filepath.Join(slot, "e"), "more\n")
			mustRun(t, f, "zfs", "snapshot", "tank/rep/slot@replica-5")
		}, run: func() Result {
			return receive(f, send(t, f, "-i", "tank/rep/slot#replica-4", "tank/rep/slot@replica-5"), "-s", "-u", replica)
		}},
		{name: "rep-rename", run: func() Result { return try(f, "zfs", "rename", replica, "tank/rep/class/parked-a-pg-1") }},
		{name: "err-rep-inherit-canmount", run: func() Result { return try(f, "zfs", "inherit", "canmount", "tank/rep/class/parked-a-pg-1") }},
		{name: "rep-set-canmount", run: func() Result { return try(f, "zfs", "set", "canmount=on", "tank/rep/class/parked-a-pg-1") }},
		{name: "rep-list-claimed", out: true, shape: []int{2}, run: func() Result {
			return try(f, "zfs", "list", "-H", "-p", "-r", "-t", "filesystem,snapshot", "-o", "name,type,guid,canmount,mounted", "tank/rep/class/parked-a-pg-1")
		}},
	}
	for _, st := range steps {
		if st.setup != nil {
			st.setup()
		}
		want := readCapture(t, st.name)
		r := st.run()
		gotErr, wantErr := tokenRE.ReplaceAllString(r.Stderr, "zfs send -t TOKEN"), tokenRE.ReplaceAllString(want.stderr, "zfs send -t TOKEN")
		if r.ExitCode != want.rc || gotErr != wantErr {
			t.Errorf("%s: rc=%d stderr:\n%s\nwant rc=%d stderr:\n%s", st.name, r.ExitCode, gotErr, want.rc, wantErr)
		}
		if st.out {
			if got, w := shapeColumns(r.Stdout, st.shape...), shapeColumns(want.stdout, st.shape...); got != w {
				t.Errorf("%s: stdout\n%s\nwant\n%s", st.name, got, w)
			}
		}
	}
}

// TestBookmarksAmongDatasets: a listing of filesystems, snapshots and
// bookmarks (the scan's, zfs.ListArgs) shows each bookmark after its
// filesystem and that filesystem's snapshots, before its children, with "-" in
// the columns a bookmark does not have; a listing with -s or -d and
// bookmarks is refused as not faked, not answered in another order.
func TestBookmarksAmongDatasets(t *testing.T) {
	f := newFake(t)
	for _, ds := range []string{"tank/c", "tank/c/s", "tank/c/s/kid", "tank/c/s-2"} {
		mustRun(t, f, "zfs", "create", ds)
	}
	mustRun(t, f, "zfs", "set", "x:owner=tank/c/s", "tank/c/s")
	for _, n := range []string{"2", "10"} {
		mustRun(t, f, "zfs", "snapshot", "tank/c/s@replica-"+n)
		mustRun(t, f, "zfs", "bookmark", "tank/c/s@replica-"+n, "tank/c/s#replica-"+n)
	}
	mustRun(t, f, "zfs", "destroy", "tank/c/s@replica-2")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{name: "recursive, by name", args: []string{"list", "-H", "-r", "-t", "filesystem,snapshot,bookmark", "-o", "name,type,used,x:owner", "tank/c"},
			want: "tank/c\tfilesystem\tUSED\t-\n" +
				"tank/c/s\tfilesystem\tUSED\ttank/c/s\n" +
				"tank/c/s@replica-10\tsnapshot\tUSED\ttank/c/s\n" +
				"tank/c/s#replica-2\tbookmark\t-\t-\n" +
				"tank/c/s#replica-10\tbookmark\t-\t-\n" +
				"tank/c/s-2\tfilesystem\tUSED\t-\n" +
				"tank/c/s/kid\tfilesystem\tUSED\ttank/c/s\n"},
		{name: "without bookmarks", args: []string{"list", "-H", "-r", "-t", "filesystem,snapshot", "-o", "name", "tank/c/s"},
			want: "tank/c/s\ntank/c/s@replica-10\ntank/c/s/kid\n"},
		{name: "one filesystem's bookmarks alone", args: []string{"list", "-H", "-t", "bookmark", "-o", "name", "tank/c/s"},
			want: "tank/c/s#replica-2\ntank/c/s#replica-10\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := try(f, "zfs", tc.args...)
			if r.ExitCode != 0 {
				t.Fatalf("rc=%d %s", r.ExitCode, r.Stderr)
			}
			var got []string
			for _, l := range lines(r.Stdout) {
				f := strings.Split(l, "\t")
				if len(f) > 2 && f[2] != "-" {
					f[2] = "USED"
				}
				got = append(got, strings.Join(f, "\t")+"\n")
			}
			if strings.Join(got, "") != tc.want {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, ""), tc.want)
			}
		})
	}
	if r := try(f, "zfs", "list", "-H", "-r", "-s", "name", "-t", "filesystem,bookmark", "tank/c"); r.ExitCode != 2 || !strings.Contains(r.Stderr, "faked") {
		t.Errorf("a sorted listing of bookmarks among datasets: rc=%d %q, want the fake's refusal", r.ExitCode, r.Stderr)
	}
}

// TestRollbackBookmarks: a rollback is refused while a bookmark is newer
// than its snapshot, as a newer snapshot refuses it (OpenZFS's
// zfs_do_rollback checks both), and -r destroys the bookmark; an older
// bookmark does not stop it.
func TestRollbackBookmarks(t *testing.T) {
	cases := []struct {
		name    string
		marks   []string // bookmarks of @b, after @a
		older   bool     // a bookmark of @a, older than @b
		args    []string
		wantRC  int
		wantErr string
		left    []string
	}{
		{name: "a newer bookmark refuses", marks: []string{"tank/s#m"}, args: []string{"rollback", "tank/s@a"}, wantRC: 1,
			wantErr: "cannot rollback to 'tank/s@a': more recent snapshots or bookmarks exist\nuse '-r' to force deletion of the following snapshots and bookmarks:\ntank/s@b\ntank/s#m\n",
			left:    []string{"tank/s#m"}},
		{name: "-r destroys it", marks: []string{"tank/s#m"}, args: []string{"rollback", "-r", "tank/s@a"}},
		{name: "an older bookmark does not stop it", older: true, args: []string{"rollback", "tank/s@b"}, left: []string{"tank/s#old"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			mustRun(t, f, "zfs", "create", "tank/s")
			mustRun(t, f, "zfs", "snapshot", "tank/s@a")
			if tc.older {
				mustRun(t, f, "zfs", "bookmark", "tank/s@a", "tank/s#old")
			}
			mustRun(t, f, "zfs", "snapshot", "tank/s@b")
			for _, m := range tc.marks {
				mustRun(t, f, "zfs", "bookmark", "tank/s@b", m)
			}
			r := try(f, "zfs", tc.args...)
			if r.ExitCode != tc.wantRC || r.Stderr != tc.wantErr {
				t.Errorf("rc=%d stderr %q, want %d %q", r.ExitCode, r.Stderr, tc.wantRC, tc.wantErr)
			}
			var left []string
			if out := try(f, "zfs", "list", "-H", "-t", "bookmark", "-o", "name", "tank/s"); out.ExitCode == 0 {
				left = lines(out.Stdout)
			}
			if strings.Join(left, ",") != strings.Join(tc.left, ",") {
				t.Errorf("bookmarks left %q, want %q", left, tc.left)
			}
		})
	}
}
