package zfsexec

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// TestMain lets the test binary impersonate a zfs executable (the os/exec
// tests' helper-process pattern): with ZFS_TEST_HELPER set it prints its
// arguments on stdout, the given text on stderr, and exits as told.
func TestMain(m *testing.M) {
	if mode := os.Getenv("ZFS_TEST_STREAM"); mode != "" {
		os.Exit(streamHelper(mode))
	}
	if os.Getenv("ZFS_TEST_HELPER") == "nice" {
		// Print this process's niceness once it is no longer the parent's
		// (Run lowers it just after the start), or after 5 s.
		parent, _ := strconv.Atoi(os.Getenv("ZFS_TEST_PARENT_NICE"))
		n := niceness()
		for deadline := time.Now().Add(5 * time.Second); n == parent && time.Now().Before(deadline); n = niceness() {
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Println(n)
		os.Exit(0)
	}
	if os.Getenv("ZFS_TEST_HELPER") == "1" {
		fmt.Fprintln(os.Stdout, strings.Join(os.Args[1:], " ")+"\tLC_ALL="+os.Getenv("LC_ALL"))
		fmt.Fprint(os.Stderr, os.Getenv("ZFS_TEST_STDERR"))
		if d, _ := time.ParseDuration(os.Getenv("ZFS_TEST_SLEEP")); d > 0 {
			time.Sleep(d)
		}
		rc, _ := strconv.Atoi(os.Getenv("ZFS_TEST_RC"))
		os.Exit(rc)
	}
	os.Exit(m.Run())
}

func TestRunner(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		stderr     string
		rc         string
		sleep      string
		timeout    time.Duration
		path       string
		wantOut    string
		wantKind   error
		wantStderr string
	}{
		{name: "success keeps stderr out of stdout", stderr: "a warning", rc: "0", wantOut: "list -H tank\tLC_ALL=C\n"},
		{name: "failure is classified", stderr: "cannot open 'tank/x': dataset does not exist\n", rc: "1",
			wantKind: zfs.ErrNotExist, wantStderr: "cannot open 'tank/x': dataset does not exist"},
		{name: "unclassified failure has no kind", stderr: "something odd", rc: "3", wantStderr: "something odd"},
		{name: "deadline", rc: "0", sleep: "5s", timeout: 200 * time.Millisecond, wantKind: zfs.ErrTimeout},
		{name: "missing executable", path: "/nonexistent/zfs", wantKind: zfs.ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ZFS_TEST_HELPER", "1")
			t.Setenv("ZFS_TEST_STDERR", tc.stderr)
			t.Setenv("ZFS_TEST_RC", tc.rc)
			t.Setenv("ZFS_TEST_SLEEP", tc.sleep)
			path := self
			if tc.path != "" {
				path = tc.path
			}
			r := &Runner{Timeout: tc.timeout, Paths: map[string]string{"zfs": path}}
			out, err := r.Run(t.Context(), "zfs", "list", "-H", "tank")
			if tc.wantKind == nil && tc.wantStderr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if string(out) != tc.wantOut {
					t.Fatalf("stdout %q, want %q", out, tc.wantOut)
				}
				return
			}
			var e *zfs.Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want *zfs.Error", err)
			}
			if tc.wantKind != nil && !errors.Is(err, tc.wantKind) {
				t.Errorf("kind: got %v, want %v", e.Kind, tc.wantKind)
			}
			if tc.wantKind == nil && e.Kind != nil {
				t.Errorf("kind: got %v, want none", e.Kind)
			}
			if e.Stderr != tc.wantStderr {
				t.Errorf("stderr %q, want %q", e.Stderr, tc.wantStderr)
			}
			if e.Cmd != "zfs" || strings.Join(e.Args, " ") != "list -H tank" {
				t.Errorf("command recorded as %s %q", e.Cmd, e.Args)
			}
		})
	}
}

// TestBackgroundRunsAtLowestPriority: a command whose context is marked
// zfs.Background runs at nice 19; any other at the plugin's own.
func TestBackgroundRunsAtLowestPriority(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("priorities are lowered on Linux only")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := niceness()
	t.Setenv("ZFS_TEST_HELPER", "nice")
	t.Setenv("ZFS_TEST_PARENT_NICE", strconv.Itoa(parent))
	r := &Runner{Paths: map[string]string{"zfs": self}}
	out, err := r.Run(zfs.Background(t.Context()), "zfs", "list")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "19" {
		t.Errorf("a background command ran at nice %s, want 19", got)
	}
	t.Setenv("ZFS_TEST_PARENT_NICE", "-100") // never seen: print at once
	out, err = r.Run(t.Context(), "zfs", "list")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(parent) {
		t.Errorf("a command ran at nice %s, want the plugin's %d", got, parent)
	}
}

// niceness is this process's nice value.
func niceness() int {
	// getpriority(2) returns 20 - nice, so that it is never negative.
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return -100
	}
	return 20 - p
}
