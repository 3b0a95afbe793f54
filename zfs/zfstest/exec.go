package zfstest

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StateEnv names the state file a zfs or zpool executable of this package
// works on.
const StateEnv = "ZFSTEST_STATE"

// Main runs one command as the zfs or zpool executable would: args is the
// whole argv (args[0] names the command, by its base name), the state is
// the file named by $ZFSTEST_STATE, loaded and saved under an exclusive
// lock. It returns the exit status. A command made to hang sleeps until
// the process is killed. zfs receive reads its stream from stdin first,
// up to its end or a failed read (a sender gone), before taking the lock.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	path := os.Getenv(StateEnv)
	if path == "" || len(args) == 0 {
		fmt.Fprintf(stderr, "zfstest: $%s is not set\n", StateEnv)
		return 127
	}
	var input []byte
	if readsStream(args[1:]) {
		input, _ = readAll(stdin)
	}
	var res Result
	var hang bool
	err := withStateFile(path, func(st *state) error {
		res, hang = runCommand(st, time.Now(), nil, filepath.Base(args[0]), args[1:], input)
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "zfstest: %v\n", err)
		return 127
	}
	for hang {
		time.Sleep(time.Hour)
	}
	_, _ = io.WriteString(stdout, res.Stdout)
	_, _ = io.WriteString(stderr, res.Stderr)
	return res.ExitCode
}

// ImpersonateIfCalled makes a test binary act as zfs or zpool when it was
// started under that name (through the links InstallExecutables makes)
// with $ZFSTEST_STATE set, and exits. Call it first in TestMain:
//
//	func TestMain(m *testing.M) { zfstest.ImpersonateIfCalled(); os.Exit(m.Run()) }
func ImpersonateIfCalled() {
	if base := filepath.Base(os.Args[0]); (base == "zfs" || base == "zpool") && os.Getenv(StateEnv) != "" {
		os.Exit(Main(os.Args, os.Stdin, os.Stdout, os.Stderr))
	}
}

// Executables are zfs and zpool commands backed by a Fake's state file.
type Executables struct {
	// BinDir holds the zfs and zpool links; put it first in PATH.
	BinDir string
	// StateFile is the fake's state; $ZFSTEST_STATE must name it.
	StateFile string
	// Env is what a child process needs: PATH=BinDir:$PATH,
	// ZFSTEST_STATE=StateFile, and GORACE without the exit delay.
	Env []string
	// Paths maps "zfs" and "zpool" to the links, for zfsexec.Runner.Paths.
	Paths map[string]string
}

// Environ is os.Environ() with Env applied.
func (e *Executables) Environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, StateEnv+"=") && !strings.HasPrefix(kv, "GORACE=") {
			out = append(out, kv)
		}
	}
	return append(out, e.Env...)
}

// InstallExecutables links zfs and zpool to the running test binary (whose
// TestMain must call ImpersonateIfCalled) and moves f's state into a state
// file. From then on f and every child process share that file: f reads
// what the children did on its next call. When the test ends f goes back
// to memory, keeping the last state.
func InstallExecutables(t testing.TB, f *Fake) *Executables {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("zfstest: %v", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatalf("zfstest: %v", err)
	}
	e := &Executables{BinDir: bin, StateFile: filepath.Join(dir, "state.json"), Paths: map[string]string{}}
	for _, name := range []string{"zfs", "zpool"} {
		link := filepath.Join(bin, name)
		if err := os.Symlink(exe, link); err != nil {
			t.Fatalf("zfstest: %v", err)
		}
		e.Paths[name] = link
	}
	e.Env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), StateEnv + "=" + e.StateFile,
		// A -race test binary sleeps a second at every clean exit.
		"GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")}

	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st
	if err := withStateFile(e.StateFile, func(fileSt *state) error { *fileSt = *st; return nil }); err != nil {
		t.Fatalf("zfstest: %v", err)
	}
	f.file = e.StateFile
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if st, err := readState(e.StateFile); err == nil {
			f.st = st
		}
		f.file = ""
	})
	return e
}

// Load opens a state file written by InstallExecutables, as a Fake bound
// to it.
func Load(path string) (*Fake, error) {
	st, err := readState(path)
	if err != nil {
		return nil, err
	}
	return &Fake{st: st, file: path, matchers: map[int]func([]string) bool{}, now: time.Now}, nil
}

// Detach keeps f's state in memory from now on: its calls no longer read
// and write the state file. With SaveTo, a process runs the fake at memory
// speed and still lets another read what it did (the churn benchmark's
// plugin: a file read and written per command cost more than the plugin).
func (f *Fake) Detach() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.file = ""
}

// SaveTo writes f's state to path under the file's lock, as the state file
// that Load and the executables read.
func (f *Fake) SaveTo(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return withStateFile(path, func(st *state) error { *st = *f.st; return nil })
}

// Reload reads the state file again. Calls on an installed Fake already
// do; Reload is for saying so in a test, and reports a broken file.
func (f *Fake) Reload() error {
	return f.with(func(*state) error { return nil })
}

// withStateFile loads path (an empty or missing file is an empty state),
// runs fn and saves the result atomically, all under an exclusive flock of
// path.lock.
func withStateFile(path string, fn func(st *state) error) error {
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	st, err := readState(path)
	if os.IsNotExist(err) {
		st, err = newState("", "", 0), nil
	}
	if err != nil {
		return err
	}
	if err := fn(st); err != nil {
		return err
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readState(path string) (*state, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	st := newState("", "", 0)
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	for _, d := range st.Datasets {
		if d.Props == nil {
			d.Props = map[string]string{}
		}
	}
	return st, nil
}
