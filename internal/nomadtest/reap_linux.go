package nomadtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procAttr puts the agent in its own process group and has the kernel kill
// it if the test binary dies (a go test timeout, say) before cleanup runs.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// reapUnder kills the processes a stopped agent left behind: task executors
// (their command line names the alloc dir), tasks (working directory in the
// alloc dir) and plugins (they inherit the agent's working directory, the
// data dir). It returns one line per process killed.
func reapUnder(dir string) []string {
	dir = resolve(dir)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return []string{fmt.Sprintf("reading /proc: %v", err)}
	}
	self := os.Getpid()
	var msgs []string
	var killed []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if !bytes.Contains(cmdline, []byte(dir+"/")) && !within(cwd, dir) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			continue // already gone
		}
		killed = append(killed, pid)
		msgs = append(msgs, fmt.Sprintf("killed leftover pid %d: %.120s", pid, strings.ReplaceAll(string(cmdline), "\x00", " ")))
	}
	// Give the kernel a moment to release their mounts and files.
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range killed {
		for time.Now().Before(deadline) && alive(pid) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return msgs
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Field 3, after "pid (comm)", is the state.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// unmountUnder detaches every mount below dir, deepest first: the tmpfs
// secrets dirs (and any bind mounts) of allocs the agent did not destroy.
func unmountUnder(dir string) error {
	dir = resolve(dir)
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if mp := unescapeMount(f[4]); within(mp, dir) && mp != dir {
			mounts = append(mounts, mp)
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	var errs []string
	for _, mp := range mounts {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
			errs = append(errs, fmt.Sprintf("unmount %s: %v", mp, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

func resolve(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return dir
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}
