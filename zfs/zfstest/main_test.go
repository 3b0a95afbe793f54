package zfstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfsexec"
)

// TestMain lets this test binary be the zfs and zpool executables of
// TestExecutables and TestExecRunner.
func TestMain(m *testing.M) {
	ImpersonateIfCalled()
	os.Exit(m.Run())
}

// captureTime is when capture.sh ran (creation of slot-1 in get-all-slot1).
var captureTime = time.Unix(1795241309, 0)

const captureDir = "../testdata/openzfs-2.1.11"

// capture is one command's output in the real captures.
type capture struct {
	stdout, stderr string
	rc             int
}

func readCapture(t *testing.T, name string) capture {
	t.Helper()
	read := func(ext string) string {
		b, err := os.ReadFile(filepath.Join(captureDir, name+"."+ext))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var c capture
	c.stdout, c.stderr = read("stdout"), read("stderr")
	if _, err := fmt.Sscan(read("rc"), &c.rc); err != nil {
		t.Fatalf("%s.rc: %v", name, err)
	}
	return c
}

// newFake is a fake with pool tank (1 GiB, like the capture VM's) and a
// fixed clock.
func newFake(t *testing.T) *Fake {
	t.Helper()
	f := New(Options{MountRoot: t.TempDir(), Now: func() time.Time { return captureTime }})
	if err := f.AddPool("tank", 1006632960); err != nil {
		t.Fatal(err)
	}
	return f
}

// mustRun runs a command that must succeed and returns its stdout.
func mustRun(t *testing.T, f *Fake, cmd string, args ...string) string {
	t.Helper()
	r := f.Exec(context.Background(), cmd, args...)
	if r.ExitCode != 0 || r.Err != nil {
		t.Fatalf("%s %s: rc=%d err=%v\n%s", cmd, strings.Join(args, " "), r.ExitCode, r.Err, r.Stderr)
	}
	return r.Stdout
}

func try(f *Fake, cmd string, args ...string) Result {
	return f.Exec(context.Background(), cmd, args...)
}

// root is the fake's MountRoot.
func root(f *Fake) string { return f.st.MountRoot }

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// captureScenario replays capture.sh up to its first "run": tank/nomad
// with a quota, scratch owned, three slots, slot-1 with 4 MiB of data and
// a held snapshot, a clone of tank/golden@seed. The VM's tank had a local
// mountpoint (get-all-slot1 says "inherited from tank"); so does this one.
func captureScenario(t *testing.T) *Fake {
	t.Helper()
	f := newFake(t)
	mustRun(t, f, "zfs", "set", "mountpoint=/tank", "tank")
	mustRun(t, f, "zfs", "create", "-o", "compression=lz4", "-o", "quota=67108864", "tank/nomad")
	mustRun(t, f, "zfs", "create", "-o", "nomad-device-zfs:owner=demo", "tank/nomad/scratch")
	for i := 1; i <= 3; i++ {
		mustRun(t, f, "zfs", "create", "-o", "refquota=33554432", "-o", "recordsize=16384",
			"-o", "nomad-device-zfs:state=ready", "-o", "nomad-device-zfs:owner=demo", fmt.Sprintf("tank/nomad/scratch/slot-%d", i))
	}
	writeFile(t, filepath.Join(root(f), "tank/nomad/scratch/slot-1/f"), strings.Repeat("x", 4<<20))
	mustRun(t, f, "zfs", "snapshot", "tank/nomad/scratch/slot-1@pristine")
	mustRun(t, f, "zfs", "create", "tank/golden")
	writeFile(t, filepath.Join(root(f), "tank/golden/seed"), "seed\n")
	mustRun(t, f, "zfs", "snapshot", "tank/golden@seed")
	mustRun(t, f, "zfs", "clone", "-o", "nomad-device-zfs:owner=demo", "tank/golden@seed", "tank/nomad/scratch/clone-1")
	mustRun(t, f, "zfs", "hold", "keep", "tank/nomad/scratch/slot-1@pristine")
	return f
}

// captureCols are the columns of list-tree and list-tree-human.
const captureCols = "name,type,used,available,referenced,mountpoint,mounted,quota,refquota,reservation,compression," +
	"compressratio,recordsize,encryption,origin,guid,createtxg,written,logicalused,usedbydataset," +
	"nomad-device-zfs:owner,nomad-device-zfs:state"

// TestExecutables runs the fake as real child processes: the zfs and zpool
// links to this test binary, found on PATH by a shell.
func TestExecutables(t *testing.T) {
	f := newFake(t)
	mustRun(t, f, "zfs", "create", "tank/pre")
	e := InstallExecutables(t, f)
	f.Inject(Fault{ArgsContain: []string{"destroy", "tank/pre"}, Stderr: "cannot destroy 'tank/pre': injected\n", ExitCode: 4})
	f.Inject(Fault{Match: func([]string) bool { return true }, Stderr: "in-process only\n"})

	sh := func(script string) (string, string, int) {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Env = e.Environ()
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return out.String(), errb.String(), cmd.ProcessState.ExitCode()
	}
	tests := []struct {
		name, script, out, err string
		rc                     int
	}{
		{"create from a child", "zfs create -o x:y=1 tank/child", "", "", 0},
		{"list sees it", "zfs list -H -o name,x:y -r tank", "tank\t-\ntank/child\t1\ntank/pre\t-\n", "", 0},
		{"zpool", "zpool list -H -o name,health", "tank\tONLINE\n", "", 0},
		{"errors and exit codes", "zfs destroy tank/nope", "", "cannot open 'tank/nope': dataset does not exist\n", 1},
		{"usage is rc 2", "zfs list -Q", "", "invalid option 'Q'\nusage:", 2},
		{"declarative faults apply", "zfs destroy tank/pre", "", "cannot destroy 'tank/pre': injected\n", 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, rc := sh(tc.script)
			if out != tc.out || !strings.HasPrefix(errOut, tc.err) || rc != tc.rc || tc.err == "" && errOut != "" {
				t.Errorf("rc=%d stdout=%q stderr=%.100q; want rc=%d %q %q", rc, out, errOut, tc.rc, tc.out, tc.err)
			}
		})
	}

	// The in-process fault applies to the Fake itself, which sees what the
	// children did.
	if r := try(f, "zfs", "list"); r.Stderr != "in-process only\n" {
		t.Errorf("in-process fault: %+v", r)
	}
	f.ClearFaults()
	if mp := f.Mountpoint("tank/child"); mp == "" || !exists(mp) {
		t.Errorf("child's dataset not mounted in the parent's view: %q", mp)
	}
	calls := f.Calls()
	if want := []string{"zfs", "create", "-o", "x:y=1", "tank/child"}; len(calls) < 2 || !reflect.DeepEqual(calls[1], want) {
		t.Errorf("calls %v, want %v second", calls, want)
	}
	if err := f.Reload(); err != nil {
		t.Error(err)
	}
	g, err := Load(e.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, g, "zfs", "list", "-H", "-o", "name", "tank/child"); got != "tank/child\n" {
		t.Errorf("Load: %q", got)
	}
}

// TestExecRunner drives the executables through zfsexec.Runner, the
// production runner, including a hang cut by its timeout.
func TestExecRunner(t *testing.T) {
	f := newFake(t)
	t.Run("installed", func(t *testing.T) {
		e := InstallExecutables(t, f)
		r := &zfsexec.Runner{Paths: e.Paths, Timeout: 2 * time.Second}
		t.Setenv(StateEnv, e.StateFile)
		t.Setenv("GORACE", "atexit_sleep_ms=0")
		ctx := context.Background()
		if _, err := r.Run(ctx, "zfs", "create", "tank/a"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Run(ctx, "zfs", "list", "tank/nope"); !errors.Is(err, zfs.ErrNotExist) {
			t.Errorf("missing dataset: %v", err)
		}
		f.Inject(Fault{Cmd: "zfs", ArgsContain: []string{"destroy"}, Hang: true})
		start := time.Now()
		if _, err := r.Run(ctx, "zfs", "destroy", "tank/a"); !errors.Is(err, zfs.ErrTimeout) {
			t.Errorf("hang: %v", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("hang took %v", d)
		}
	})
	// Back in memory once the test that installed it ended, state kept.
	if f.file != "" {
		t.Error("still bound to the state file")
	}
	f.ClearFaults()
	if got := mustRun(t, f, "zfs", "list", "-H", "-o", "name", "tank/a"); got != "tank/a\n" {
		t.Errorf("after the subtest: %q", got)
	}
}

// TestDetachSaveTo: a detached fake works in memory, leaving the state file
// as it was, until SaveTo writes it for another reader.
func TestDetachSaveTo(t *testing.T) {
	f := newFake(t)
	e := InstallExecutables(t, f)
	g, err := Load(e.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	g.Detach()
	mustRun(t, g, "zfs", "create", "tank/mem")
	if r := try(f, "zfs", "list", "tank/mem"); r.ExitCode == 0 {
		t.Fatalf("the state file shows a detached fake's dataset before SaveTo: %+v", r)
	}
	if err := g.SaveTo(e.StateFile); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, f, "zfs", "list", "-H", "-o", "name", "tank/mem"); got != "tank/mem\n" {
		t.Errorf("after SaveTo: %q", got)
	}
}
