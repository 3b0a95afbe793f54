package nomadtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// process is one run of the agent binary.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // cmd.Wait's result; read only after done is closed
}

// launch starts one run of the agent, its output appended to the log file.
func (a *Agent) launch() error {
	f, err := os.OpenFile(a.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err == nil {
		a.mu.Lock()
		a.runStart = fi.Size()
		a.mu.Unlock()
	}
	fmt.Fprintf(f, "==== nomadtest %s: %s agent -config %s\n", time.Now().Format(time.RFC3339Nano), a.cfg.Binary, a.configPath)
	cmd := exec.Command(a.cfg.Binary, "agent", "-config", a.configPath)
	// Plugins and executors inherit the working directory, which lets
	// cleanup recognise leftovers by it.
	cmd.Dir = a.cfg.DataDir
	cmd.Env = append(os.Environ(), a.cfg.Env...)
	cmd.SysProcAttr = procAttr()
	if a.cfg.LogWriter != nil {
		w := io.MultiWriter(f, a.cfg.LogWriter)
		cmd.Stdout, cmd.Stderr = w, w
		cmd.WaitDelay = 5 * time.Second // a plugin may hold the pipe open
	} else {
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting %s: %w", a.cfg.Binary, err)
	}
	proc := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		proc.err = cmd.Wait()
		f.Close()
		close(proc.done)
	}()
	a.mu.Lock()
	a.proc = proc
	a.mu.Unlock()
	return nil
}

// stop interrupts the agent and waits for it to exit; an error means it had
// to be killed.
func (a *Agent) stop() error {
	a.mu.Lock()
	p := a.proc
	a.proc = nil
	a.frozen = false
	a.mu.Unlock()
	if p == nil {
		return nil
	}
	// A frozen agent (Freeze) would not act on SIGINT until resumed.
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(os.Interrupt)
	// A slow machine stretches the agent's shutdown too: killed halfway,
	// it may leave its client state behind half-written for the restart.
	grace := NewDeadline(stopGrace, a.cfg.Slowness)
	for !grace.Passed() {
		select {
		case <-p.done:
			return nil
		case <-time.After(pollInterval):
		}
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("agent did not exit within %s of SIGINT; killed it", grace)
}

// note records a start-up remark; logNotes passes them to the test log.
func (a *Agent) note(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.notes = append(a.notes, s)
}

func (a *Agent) logNotes(t testing.TB) {
	t.Helper()
	a.mu.Lock()
	notes := a.notes
	a.notes = nil
	a.mu.Unlock()
	for _, n := range notes {
		t.Logf("nomadtest: %s", n)
	}
}

func (a *Agent) running() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.proc != nil
}

// exitError reports why the current process exited, or nil while it runs
// (or when no process was started).
func (a *Agent) exitError() error {
	a.mu.Lock()
	p := a.proc
	a.mu.Unlock()
	if p == nil {
		return errors.New("agent is stopped")
	}
	select {
	case <-p.done:
		if p.err == nil {
			return errors.New("exit status 0")
		}
		return p.err
	default:
		return nil
	}
}

// sleep waits d, returning early if the agent exits.
func (a *Agent) sleep(d time.Duration) {
	a.mu.Lock()
	p := a.proc
	a.mu.Unlock()
	var done <-chan struct{}
	if p != nil {
		done = p.done
	}
	select {
	case <-time.After(d):
	case <-done:
	}
}

// cleanup runs at the end of the test that started the agent.
func (a *Agent) cleanup(t testing.TB) {
	var dumped bool
	if t.Failed() {
		t.Logf("nomadtest: last %d lines of the agent log %s:\n%s", cleanupTail, a.logPath, a.tail(cleanupTail))
		dumped = a.dumpGoroutines()
	}
	if err := a.stop(); err != nil && !dumped {
		t.Logf("nomadtest: cleanup: %v", err)
	}
	if dumped {
		t.Logf("nomadtest: the agent's goroutines (SIGQUIT) are at the end of %s", a.logPath)
	}
	for _, msg := range reapUnder(a.cfg.DataDir) {
		t.Logf("nomadtest: cleanup: %s", msg)
	}
	if err := unmountUnder(a.cfg.DataDir); err != nil {
		t.Logf("nomadtest: cleanup: %v", err)
	}
}

// dumpGoroutines makes a running agent print every goroutine's stack to its
// log and exit (Go's default for SIGQUIT, which Nomad does not catch): what a
// task stuck in its start was waiting on, for a failed test. It reports
// whether the agent exited so.
func (a *Agent) dumpGoroutines() bool {
	a.mu.Lock()
	p := a.proc
	a.mu.Unlock()
	if p == nil || a.signal(syscall.SIGCONT) != nil || a.signal(syscall.SIGQUIT) != nil {
		return false
	}
	select {
	case <-p.done:
		return true
	case <-time.After(30 * time.Second):
		return false
	}
}

// fatalf fails the test. The agent log's tail follows from cleanup, which
// prints it for every failed test, so it is not repeated here.
func (a *Agent) fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatalf("nomadtest: %s (agent log: %s; its tail is printed at cleanup)", fmt.Sprintf(format, args...), a.logPath)
}
