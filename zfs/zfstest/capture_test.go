package zfstest

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// shape reduces a -p value to what must match the real one whatever the
// sizes: "-", "0", "N" for another integer, else the value itself.
func shape(v string) string {
	if v == "-" || v == "0" {
		return v
	}
	if _, err := strconv.ParseUint(v, 10, 64); err == nil {
		return "N"
	}
	return v
}

func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

func TestCaptureListTree(t *testing.T) {
	f := captureScenario(t)
	want := lines(readCapture(t, "list-tree").stdout)
	got := lines(strings.ReplaceAll(mustRun(t, f, "zfs", "list", "-H", "-p", "-r", "-t", "filesystem,snapshot", "-o", captureCols, "tank/nomad"), root(f), ""))
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	cols := strings.Split(captureCols, ",")
	for i := range want {
		w, g := strings.Split(want[i], "\t"), strings.Split(got[i], "\t")
		if len(g) != len(w) {
			t.Fatalf("row %d: %d columns, want %d: %q", i, len(g), len(w), got[i])
		}
		for j, col := range cols {
			if col == "guid" || col == "createtxg" {
				if shape(g[j]) != "N" {
					t.Errorf("%s %s = %q, want an integer", w[0], col, g[j])
				}
				continue
			}
			if shape(g[j]) != shape(w[j]) {
				t.Errorf("%s %s = %q, want like %q", w[0], col, g[j], w[j])
			}
		}
		// available is what the refquota leaves, as on the real pool.
		if w[8] != "0" && w[8] != "-" {
			rq, _ := strconv.ParseUint(g[8], 10, 64)
			ref, _ := strconv.ParseUint(g[4], 10, 64)
			if avail, _ := strconv.ParseUint(g[3], 10, 64); avail != rq-ref {
				t.Errorf("%s available = %d, want refquota-referenced = %d", w[0], avail, rq-ref)
			}
		}
	}
}

func TestCaptureListTreeHuman(t *testing.T) {
	f := captureScenario(t)
	want := lines(readCapture(t, "list-tree-human").stdout)
	got := lines(mustRun(t, f, "zfs", "list", "-r", "-t", "all", "-o", captureCols, "tank/nomad"))
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d", len(got), len(want))
	}
	// The header is the same but for the width of MOUNTPOINT (our paths
	// are longer by the MountRoot).
	cut := func(h string) (string, string) {
		return h[:strings.Index(h, "MOUNTPOINT")], h[strings.Index(h, "MOUNTED"):]
	}
	wb, wa := cut(want[0])
	gb, ga := cut(got[0])
	if gb != wb || ga != wa {
		t.Errorf("header:\n got %q\nwant %q", got[0], want[0])
	}
	// Non-size columns, by fields: name type mountpoint mounted quota
	// refquota reserv compress ratio recsize encryption origin ... owner state.
	for i := 1; i < len(want); i++ {
		w, g := strings.Fields(want[i]), strings.Fields(strings.ReplaceAll(got[i], root(f), ""))
		if len(g) != len(w) {
			t.Fatalf("line %d: %d fields, want %d:\n%s", i, len(g), len(w), got[i])
		}
		for _, j := range []int{0, 1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 20, 21} {
			if g[j] != w[j] {
				t.Errorf("%s field %d = %q, want %q", w[0], j, g[j], w[j])
			}
		}
	}
}

func TestCaptureGetAll(t *testing.T) {
	f := captureScenario(t)
	want := lines(readCapture(t, "get-all-slot1").stdout)
	got := lines(strings.ReplaceAll(mustRun(t, f, "zfs", "get", "-H", "-p", "-o", "name,property,value,source", "all", "tank/nomad/scratch/slot-1"), root(f), ""))
	if len(got) != len(want) {
		t.Fatalf("got %d properties, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	computed := map[string]bool{"creation": true, "used": true, "available": true, "referenced": true, "guid": true,
		"createtxg": true, "objsetid": true, "usedbydataset": true, "logicalused": true, "logicalreferenced": true}
	for i := range want {
		w, g := strings.Split(want[i], "\t"), strings.Split(got[i], "\t")
		if g[0] != w[0] || g[1] != w[1] || g[3] != w[3] {
			t.Errorf("line %d = %q, want %q", i, got[i], want[i])
		}
		if !computed[w[1]] && g[2] != w[2] {
			t.Errorf("%s = %q, want %q", w[1], g[2], w[2])
		}
		if computed[w[1]] && shape(g[2]) != shape(w[2]) {
			t.Errorf("%s = %q, want like %q", w[1], g[2], w[2])
		}
	}
	if g := strings.Split(got[1], "\t"); g[2] != strconv.FormatInt(captureTime.Unix(), 10) {
		t.Errorf("creation = %s, want the clock's %d", g[2], captureTime.Unix())
	}
}

func TestCaptureExact(t *testing.T) {
	tests := []struct {
		name, capture string
		cmd           []string
	}{
		{"get user props with -s local", "get-user-props", []string{"zfs", "get", "-H", "-p", "-r", "-s", "local", "-o", "name,property,value,source", "nomad-device-zfs:owner,nomad-device-zfs:state", "tank/nomad"}},
		{"version", "zfs-version", []string{"zfs", "version"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := captureScenario(t)
			want := readCapture(t, tc.capture)
			r := try(f, tc.cmd[0], tc.cmd[1:]...)
			if r.Stdout != want.stdout || r.Stderr != want.stderr || r.ExitCode != want.rc {
				t.Errorf("got rc=%d\n%s%s\nwant rc=%d\n%s%s", r.ExitCode, r.Stdout, r.Stderr, want.rc, want.stdout, want.stderr)
			}
		})
	}
}

func TestCaptureHolds(t *testing.T) {
	f := captureScenario(t)
	want := readCapture(t, "holds").stdout
	got := mustRun(t, f, "zfs", "holds", "-H", "tank/nomad/scratch/slot-1@pristine")
	// The timestamp is local time to the minute: same format, our clock.
	re := regexp.MustCompile(`^(\S+)\t(\S+)\t(\w{3} \w{3} [ \d]\d \d\d:\d\d \d{4})\n$`)
	w, g := re.FindStringSubmatch(want), re.FindStringSubmatch(got)
	if w == nil || g == nil {
		t.Fatalf("got %q, want like %q", got, want)
	}
	if g[1] != w[1] || g[2] != w[2] {
		t.Errorf("got %q, want %q", got, want)
	}
	at, err := time.ParseInLocation("Mon Jan _2 15:04 2006", g[3], time.Local)
	if err != nil || !at.Equal(captureTime.Truncate(time.Minute)) {
		t.Errorf("timestamp %q (%v), want %v", g[3], err, captureTime)
	}
}

func TestCaptureZpool(t *testing.T) {
	f := captureScenario(t)
	got := mustRun(t, f, "zpool", "list", "-H", "-p", "-o", "name,size,allocated,free,health,capacity,fragmentation,readonly")
	w, g := strings.Split(lines(readCapture(t, "zpool-list").stdout)[0], "\t"), strings.Split(lines(got)[0], "\t")
	if len(g) != len(w) {
		t.Fatalf("got %q", got)
	}
	for i := range w {
		if shape(g[i]) != shape(w[i]) {
			t.Errorf("column %d = %q, want like %q", i, g[i], w[i])
		}
	}
	if err := f.AddPool("mir", 256<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.SetPoolHealth("mir", "DEGRADED"); err != nil {
		t.Fatal(err)
	}
	if got, want := mustRun(t, f, "zpool", "list", "-H", "-p", "-o", "name,health"), readCapture(t, "zpool-list-degraded").stdout; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// zpool get all: the same properties in the same order; the altroot is
	// ours (MountRoot, local).
	want := lines(readCapture(t, "zpool-get").stdout)
	all := lines(mustRun(t, f, "zpool", "get", "-H", "-p", "all", "tank"))
	if len(all) != len(want) {
		t.Fatalf("got %d properties, want %d", len(all), len(want))
	}
	for i := range want {
		w, g := strings.Split(want[i], "\t"), strings.Split(all[i], "\t")
		if g[1] != w[1] || g[1] != "altroot" && (g[3] != w[3] || shape(g[2]) != shape(w[2]) && !strings.Contains(g[1], "guid")) {
			t.Errorf("got %q, want like %q", all[i], want[i])
		}
	}
}

// TestCaptureErrors replays the error half of capture.sh, in its order.
func TestCaptureErrors(t *testing.T) {
	f := captureScenario(t)
	tests := []struct {
		name  string
		setup func()
		cmd   []string
	}{
		{"err-not-exist", nil, []string{"zfs", "list", "-H", "-p", "-o", "name", "tank/nomad/nope"}},
		{"err-destroy-not-exist", nil, []string{"zfs", "destroy", "tank/nomad/nope"}},
		{"err-create-exists", nil, []string{"zfs", "create", "tank/nomad/scratch/slot-2"}},
		{"err-create-no-parent", nil, []string{"zfs", "create", "tank/nomad/missing/child"}},
		{"err-bad-prop-value", nil, []string{"zfs", "create", "-o", "compression=bogus", "tank/nomad/x"}},
		{"err-bad-prop-name", nil, []string{"zfs", "create", "-o", "bogusprop=1", "tank/nomad/x"}},
		{"err-bad-quota", nil, []string{"zfs", "create", "-o", "quota=12QB", "tank/nomad/x"}},
		{"err-bad-name", nil, []string{"zfs", "create", "tank/nomad/bad name"}},
		{"err-dash-name", nil, []string{"zfs", "create", "tank/nomad/-o"}},
		{"err-destroy-has-children", nil, []string{"zfs", "destroy", "tank/nomad/scratch"}},
		{"err-destroy-held-snap", nil, []string{"zfs", "destroy", "tank/nomad/scratch/slot-1@pristine"}},
		{"err-destroy-snap-clones", nil, []string{"zfs", "destroy", "tank/golden@seed"}},
		{"err-rollback-not-latest", func() {
			mustRun(t, f, "zfs", "snapshot", "tank/nomad/scratch/slot-2@a")
			mustRun(t, f, "zfs", "snapshot", "tank/nomad/scratch/slot-2@b")
		}, []string{"zfs", "rollback", "tank/nomad/scratch/slot-2@a"}},
		{"err-destroy-busy", func() {
			if err := f.SetBusy("tank/nomad/scratch/slot-3", true); err != nil {
				t.Fatal(err)
			}
		}, []string{"zfs", "destroy", "tank/nomad/scratch/slot-3"}},
		{"err-unmount-busy", nil, []string{"zfs", "unmount", "tank/nomad/scratch/slot-3"}},
		{"err-pool-missing", nil, []string{"zfs", "list", "-H", "tank2/x"}},
		{"err-zpool-missing", nil, []string{"zpool", "list", "-H", "-p", "-o", "health", "nopool"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
			}
			want := readCapture(t, tc.name)
			r := try(f, tc.cmd[0], tc.cmd[1:]...)
			got := strings.ReplaceAll(r.Stderr, root(f), "")
			if tc.name == "err-destroy-has-children" {
				// Real zfs lists dependents in on-disk hash order.
				got, want.stderr = sortTail(got, 2), sortTail(want.stderr, 2)
			}
			if r.ExitCode != want.rc || got != want.stderr || r.Stdout != want.stdout {
				t.Errorf("rc=%d stderr:\n%s\nwant rc=%d stderr:\n%s", r.ExitCode, got, want.rc, want.stderr)
			}
		})
	}
}

// sortTail sorts the lines of s after the first n.
func sortTail(s string, n int) string {
	l := lines(s)
	sort.Strings(l[n:])
	return strings.Join(l, "\n") + "\n"
}
