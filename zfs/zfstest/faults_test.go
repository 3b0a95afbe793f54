package zfstest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// TestRunnerErrors: failures come back as *zfs.Error classified from the
// emulated stderr, exactly as zfsexec.Runner would return them.
func TestRunnerErrors(t *testing.T) {
	f := captureScenario(t)
	mustRun(t, f, "zfs", "snapshot", "tank/nomad/scratch/slot-2@a")
	mustRun(t, f, "zfs", "snapshot", "tank/nomad/scratch/slot-2@b")
	if err := f.SetBusy("tank/nomad/scratch/slot-3", true); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		kind error
	}{
		{"not exist", []string{"zfs", "list", "tank/nope"}, zfs.ErrNotExist},
		{"no pool", []string{"zpool", "list", "nopool"}, zfs.ErrNotExist},
		{"exists", []string{"zfs", "create", "tank/nomad"}, zfs.ErrExists},
		{"no parent", []string{"zfs", "create", "tank/x/y"}, zfs.ErrNoParent},
		{"children", []string{"zfs", "destroy", "tank/nomad"}, zfs.ErrHasChildren},
		{"clones", []string{"zfs", "destroy", "tank/golden@seed"}, zfs.ErrHasClones},
		{"held", []string{"zfs", "destroy", "tank/nomad/scratch/slot-1@pristine"}, zfs.ErrBusy},
		{"busy", []string{"zfs", "destroy", "tank/nomad/scratch/slot-3"}, zfs.ErrBusy},
		{"newer snapshots", []string{"zfs", "rollback", "tank/nomad/scratch/slot-2@a"}, zfs.ErrNewerSnapshots},
		{"invalid value", []string{"zfs", "set", "compression=bogus", "tank/nomad"}, zfs.ErrInvalid},
		{"invalid option", []string{"zfs", "list", "-Q"}, zfs.ErrInvalid},
		{"missing snapshot", []string{"zfs", "destroy", "tank/nomad@nope"}, zfs.ErrNotExist},
		{"unknown tag", []string{"zfs", "release", "nope", "tank/nomad/scratch/slot-1@pristine"}, zfs.ErrNotExist},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := f.Run(context.Background(), tc.args[0], tc.args[1:]...)
			var ze *zfs.Error
			if out != nil || !errors.As(err, &ze) || !errors.Is(err, tc.kind) {
				t.Fatalf("Run = %q, %v; want a %v *zfs.Error", out, err, tc.kind)
			}
			if ze.Cmd != tc.args[0] || !reflect.DeepEqual(ze.Args, tc.args[1:]) || ze.ExitCode == 0 {
				t.Errorf("error %+v", ze)
			}
		})
	}
	out, err := f.Run(context.Background(), "zfs", "list", "-H", "-o", "name", "tank/nomad")
	if err != nil || string(out) != "tank/nomad\n" {
		t.Errorf("success: %q, %v", out, err)
	}
}

func TestFaults(t *testing.T) {
	tests := []struct {
		name  string
		fault Fault
		// results of three runs of "zfs destroy tank/a" then "zfs list tank"
		wantRC []int
	}{
		{"once", Fault{Cmd: "zfs", ArgsContain: []string{"destroy"}, Stderr: "cannot destroy 'tank/a': dataset is busy\n", Times: 1}, []int{1, 0, 0}},
		{"always", Fault{ArgsContain: []string{"tank/a", "destroy"}, Stderr: "boom\n", ExitCode: 3}, []int{3, 3, 0}},
		{"by function", Fault{Match: func(a []string) bool { return a[0] == "list" }, Stderr: "no\n", Times: 2}, []int{0, 1, 1}},
		{"other command", Fault{Cmd: "zpool", Stderr: "no\n"}, []int{0, 1, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			mustRun(t, f, "zfs", "create", "tank/a")
			f.Inject(tc.fault)
			var got []int
			got = append(got, try(f, "zfs", "destroy", "tank/a").ExitCode)
			got = append(got, try(f, "zfs", "destroy", "tank/a").ExitCode)
			got = append(got, try(f, "zfs", "list", "tank").ExitCode)
			if tc.name == "other command" {
				got[1] = try(f, "zpool", "list").ExitCode
			}
			if !reflect.DeepEqual(got, tc.wantRC) {
				t.Errorf("exit codes %v, want %v", got, tc.wantRC)
			}
			f.ClearFaults()
			if r := try(f, "zfs", "list", "tank"); r.ExitCode != 0 {
				t.Errorf("after ClearFaults: %+v", r)
			}
		})
	}
}

func TestHang(t *testing.T) {
	f := newFake(t)
	f.Hang(func(args []string) bool { return args[0] == "destroy" })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := f.Run(ctx, "zfs", "destroy", "tank/a")
		done <- err
	}()
	// Other commands go on while one hangs.
	for i := 0; i < 3; i++ {
		if _, err := f.Run(context.Background(), "zfs", "list", "tank"); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if !errors.Is(err, zfs.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("hung Run = %v, want a timeout", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
	if _, err := f.Run(ctx, "zfs", "list"); !errors.Is(err, zfs.ErrTimeout) {
		t.Errorf("Run with a done context = %v", err)
	}
}

func TestCalls(t *testing.T) {
	f := newFake(t)
	f.Inject(Fault{ArgsContain: []string{"get"}, Stderr: "x\n"})
	try(f, "zfs", "list", "-H", "tank")
	try(f, "zfs", "get", "all", "tank")
	try(f, "zpool", "list")
	want := [][]string{{"zfs", "list", "-H", "tank"}, {"zfs", "get", "all", "tank"}, {"zpool", "list"}}
	if got := f.Calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("Calls() = %v, want %v", got, want)
	}
	f.ResetCalls()
	if got := f.Calls(); len(got) != 0 {
		t.Errorf("after ResetCalls: %v", got)
	}
}

// TestConcurrent runs commands from many goroutines (go test -race).
func TestConcurrent(t *testing.T) {
	f := newFake(t)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("tank/c%d", i)
			for _, args := range [][]string{{"create", name}, {"snapshot", name + "@s"}, {"list", "-r", "tank"}, {"destroy", "-r", name}} {
				if _, err := f.Run(context.Background(), "zfs", args...); err != nil {
					t.Error(err)
				}
			}
			_ = f.SetBusy("tank", i%2 == 0)
			_ = f.Calls()
		}()
	}
	wg.Wait()
	if got := len(f.Calls()); got != 32 {
		t.Errorf("%d calls, want 32", got)
	}
}
