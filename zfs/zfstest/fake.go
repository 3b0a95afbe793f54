package zfstest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/zfs"
)

// Options configure a Fake.
type Options struct {
	// MountRoot plays the altroot of every pool: pool "tank" is mounted at
	// MountRoot/tank and every mountpoint shown is below it. Required;
	// t.TempDir() is the usual value.
	MountRoot string
	// StoreDir keeps snapshot copies and the files of unmounted
	// filesystems. Default MountRoot/.zfstest, on the same filesystem so
	// that mounting and unmounting are renames.
	StoreDir string
	// Now is the clock for creation times and holds. Default time.Now.
	Now func() time.Time
	// RandomGUIDs makes guids differ from run to run. By default they are
	// a fixed sequence, so tests can compare output.
	RandomGUIDs bool
	// GUIDSeed, if set, starts the fixed sequence elsewhere: fakes that
	// exchange streams (two nodes of a simulation) need guids that differ
	// from each other's, as real ones do, and still replay.
	GUIDSeed uint64
}

// Fake emulates the zfs and zpool commands of OpenZFS 2.1. It is safe for
// concurrent use; commands run one at a time, like under a pool's lock.
type Fake struct {
	mu sync.Mutex
	st *state
	// file is the state file while installed as executables; every call
	// then loads it and saves it back, under its lock.
	file string
	// matchers are the in-process Fault.Match functions, by fault id.
	matchers map[int]func(args []string) bool
	now      func() time.Time
}

var _ zfs.Runner = (*Fake)(nil)

// New returns a Fake with no pools.
func New(o Options) *Fake {
	if o.MountRoot == "" {
		panic("zfstest: Options.MountRoot is required")
	}
	root, err := filepath.Abs(o.MountRoot)
	if err != nil {
		panic(err)
	}
	store := o.StoreDir
	if store == "" {
		store = filepath.Join(root, ".zfstest")
	}
	seed := o.GUIDSeed
	if o.RandomGUIDs {
		var b [8]byte
		_, _ = rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:])
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	_ = os.MkdirAll(store, 0o755)
	return &Fake{st: newState(root, store, seed), matchers: map[int]func([]string) bool{}, now: now}
}

// Result is what one command printed and how it exited.
type Result struct {
	Stdout, Stderr string
	ExitCode       int
	// Err is set when the command did not exit: its context ended while
	// it hung, or the state file could not be used.
	Err error
}

// Run implements zfs.Runner: stdout on success, else the *zfs.Error that
// zfsexec.Runner would return for the same exit.
func (f *Fake) Run(ctx context.Context, cmd string, args ...string) ([]byte, error) {
	r := f.Exec(ctx, cmd, args...)
	switch {
	case r.Err != nil && ctx.Err() != nil:
		e := zfs.NewError(cmd, args, r.Stderr, -1)
		e.Kind, e.Cause = zfs.ErrTimeout, ctx.Err()
		return nil, e
	case r.Err != nil:
		return nil, &zfs.Error{Cmd: cmd, Args: args, ExitCode: -1, Cause: r.Err}
	case r.ExitCode != 0:
		return nil, zfs.NewError(cmd, args, r.Stderr, r.ExitCode)
	}
	return []byte(r.Stdout), nil
}

// Exec runs one command and returns exactly what the real one would print.
// A hanging command (Hang) blocks until ctx is done.
func (f *Fake) Exec(ctx context.Context, cmd string, args ...string) Result {
	return f.exec(ctx, cmd, args, nil, false)
}

// exec is Exec with what the command reads on stdin. afterEnd runs it even
// if ctx has ended: a receive killed mid-stream still keeps what came.
func (f *Fake) exec(ctx context.Context, cmd string, args []string, stdin []byte, afterEnd bool) Result {
	if err := ctx.Err(); err != nil && !afterEnd {
		return Result{ExitCode: -1, Err: err}
	}
	var res Result
	var hang bool
	err := f.with(func(st *state) error {
		res, hang = runCommand(st, f.now(), f.matchers, cmd, args, stdin)
		return nil
	})
	switch {
	case err != nil:
		return Result{ExitCode: -1, Err: err}
	case hang:
		<-ctx.Done()
		return Result{ExitCode: -1, Err: ctx.Err()}
	}
	return res
}

// runCommand records the call, applies a matching fault or runs the
// emulation. matchers is nil in a child process: faults with a Match
// function then do not apply.
func runCommand(st *state, now time.Time, matchers map[int]func([]string) bool, cmd string, args []string, stdin []byte) (Result, bool) {
	st.Calls = append(st.Calls, append([]string{cmd}, args...))
	if fe := st.matchFault(cmd, args, matchers); fe != nil {
		if fe.Hang {
			return Result{}, true
		}
		rc := fe.ExitCode
		if rc == 0 {
			rc = 1
		}
		return Result{Stderr: fe.Stderr, ExitCode: rc}, false
	}
	s := &sess{st: st, now: now, stdin: stdin}
	rc := s.run(cmd, args)
	return Result{Stdout: s.out.String(), Stderr: s.err.String(), ExitCode: rc}, false
}

// with runs fn on the state under the lock; while installed as
// executables it loads the state file first and saves it after.
func (f *Fake) with(fn func(st *state) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.file == "" {
		return fn(f.st)
	}
	return withStateFile(f.file, func(st *state) error {
		f.st = st
		return fn(st)
	})
}

// AddPool creates pool name of size bytes, its root filesystem mounted at
// MountRoot/name, like "zpool create -R MountRoot name".
func (f *Fake) AddPool(name string, size uint64) error {
	return f.with(func(st *state) error {
		if name == "" || !(name[0] >= 'a' && name[0] <= 'z' || name[0] >= 'A' && name[0] <= 'Z') || strings.ContainsAny(name, "/@# ") {
			return fmt.Errorf("zfstest: invalid pool name %q", name)
		}
		if st.Pools[name] != nil {
			return fmt.Errorf("zfstest: pool %q exists", name)
		}
		st.Pools[name] = &pool{Name: name, Size: size, Health: "ONLINE", GUID: st.nextGUID()}
		d := st.newDataset(name, false, f.now().Unix())
		st.Txg++
		if err := os.MkdirAll(st.parkedDir(d), 0o755); err != nil {
			return err
		}
		return st.mountFS(d)
	})
}

// SetPoolHealth sets what zpool list shows as health: "ONLINE",
// "DEGRADED", "FAULTED"... "SUSPENDED" also makes every change to the
// pool's datasets fail with "pool I/O is currently suspended".
func (f *Fake) SetPoolHealth(name, health string) error {
	return f.with(func(st *state) error {
		p := st.Pools[name]
		if p == nil {
			return fmt.Errorf("zfstest: no pool %q", name)
		}
		p.Health = health
		return nil
	})
}

// RemovePool exports pool name: its datasets and their files are gone.
func (f *Fake) RemovePool(name string) error {
	return f.with(func(st *state) error {
		if st.Pools[name] == nil {
			return fmt.Errorf("zfstest: no pool %q", name)
		}
		list := st.subtree(name)
		for i := len(list) - 1; i >= 0; i-- {
			st.forget(list[i])
		}
		delete(st.Pools, name)
		return nil
	})
}

// SetBusy marks filesystem name as in use, like a process with its working
// directory inside: unmount, destroy and rename then fail with "pool or
// dataset is busy" unless forced.
func (f *Fake) SetBusy(name string, busy bool) error {
	return f.with(func(st *state) error {
		d := st.Datasets[name]
		if d == nil || d.Snap {
			return fmt.Errorf("zfstest: no filesystem %q", name)
		}
		d.Busy = busy
		return nil
	})
}

// Mountpoint is where filesystem name is mounted, "" if it is not.
func (f *Fake) Mountpoint(name string) string {
	var mp string
	_ = f.with(func(st *state) error {
		if d := st.Datasets[name]; d != nil && d.Mounted {
			mp = st.mountpoint(d)
		}
		return nil
	})
	return mp
}

// DataDir is where the files of filesystem or snapshot name are now,
// mounted or not (a harness reads what a snapshot holds there); "" if it
// does not exist.
func (f *Fake) DataDir(name string) string {
	var dir string
	_ = f.with(func(st *state) error {
		if d := st.Datasets[name]; d != nil {
			dir = st.dataDir(d)
		}
		return nil
	})
	return dir
}

// Calls returns every command run so far, each with its command ("zfs",
// "zpool") as element 0, including those of child processes.
func (f *Fake) Calls() [][]string {
	var out [][]string
	_ = f.with(func(st *state) error {
		for _, c := range st.Calls {
			out = append(out, append([]string(nil), c...))
		}
		return nil
	})
	return out
}

// ResetCalls forgets the recorded calls.
func (f *Fake) ResetCalls() {
	_ = f.with(func(st *state) error {
		st.Calls = nil
		return nil
	})
}

// Fault makes matching commands fail (or hang) instead of running, for
// tests of error paths.
type Fault struct {
	// Cmd is "zfs" or "zpool"; empty matches both.
	Cmd string
	// ArgsContain lists arguments that must all appear in the command's
	// arguments, in any order, e.g. {"destroy", "tank/nomad/slot-1"}. It
	// also works for the executables, unlike Match.
	ArgsContain []string
	// Match, if set, must also accept the arguments (without the command).
	// It is a function of this process: child processes skip such faults.
	Match func(args []string) bool
	// Stderr is printed instead of running the command, e.g.
	// "cannot open 'tank': pool I/O is currently suspended\n".
	Stderr string
	// ExitCode is the exit status; 0 means 1.
	ExitCode int
	// Times is how many commands fail; 0 means all from now on.
	Times int
	// Hang makes the command block until its context is done (in a child
	// process: until it is killed). Stderr and ExitCode are then unused.
	Hang bool
}

// faultEntry is a Fault as the state (and so the state file) keeps it.
type faultEntry struct {
	ID          int      `json:"id"`
	Cmd         string   `json:"cmd,omitempty"`
	ArgsContain []string `json:"args_contain,omitempty"`
	HasMatch    bool     `json:"has_match,omitempty"`
	Stderr      string   `json:"stderr,omitempty"`
	ExitCode    int      `json:"exit_code,omitempty"`
	Times       int      `json:"times,omitempty"`
	Hang        bool     `json:"hang,omitempty"`
}

// Inject adds a fault; faults are tried in the order they were added.
func (f *Fake) Inject(ft Fault) {
	_ = f.with(func(st *state) error {
		st.NextFaultID++
		e := &faultEntry{ID: st.NextFaultID, Cmd: ft.Cmd, ArgsContain: ft.ArgsContain, HasMatch: ft.Match != nil,
			Stderr: ft.Stderr, ExitCode: ft.ExitCode, Times: ft.Times, Hang: ft.Hang}
		if ft.Match != nil {
			f.matchers[e.ID] = ft.Match
		}
		st.Faults = append(st.Faults, e)
		return nil
	})
}

// Hang makes every command whose arguments match block until its context
// is done. A nil match hangs every command.
func (f *Fake) Hang(match func(args []string) bool) {
	f.Inject(Fault{Match: match, Hang: true})
}

// ClearFaults removes every fault.
func (f *Fake) ClearFaults() {
	_ = f.with(func(st *state) error {
		st.Faults = nil
		clear(f.matchers)
		return nil
	})
}

// matchFault returns the first fault for cmd args, using one of its Times.
func (st *state) matchFault(cmd string, args []string, matchers map[int]func([]string) bool) *faultEntry {
	for i, e := range st.Faults {
		if e.Cmd != "" && e.Cmd != cmd || !containsAll(args, e.ArgsContain) {
			continue
		}
		if e.HasMatch {
			m := matchers[e.ID]
			if m == nil || !m(args) {
				continue
			}
		}
		if e.Times > 0 {
			e.Times--
			if e.Times == 0 {
				st.Faults = append(st.Faults[:i:i], st.Faults[i+1:]...)
			}
		}
		return e
	}
	return nil
}

func containsAll(args, want []string) bool {
	for _, w := range want {
		if !contains(args, w) {
			return false
		}
	}
	return true
}
