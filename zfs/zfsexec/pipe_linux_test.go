package zfsexec

import (
	"io"
	"os/exec"
	"syscall"
	"testing"
)

// TestStreamPipesAreWidened: both pipes os/exec gives are ends widen can
// reach, and widen leaves each at streamPipe. A pipe left at the default
// 64 KiB still works, which is why only this test notices.
func TestStreamPipesAreWidened(t *testing.T) {
	c := exec.Command("true")
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		end  any
	}{
		{name: "stdin", end: in},
		{name: "stdout", end: out},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := tc.end.(rawConner)
			if !ok {
				t.Fatalf("%T has no SyscallConn: Stream cannot widen it", tc.end)
			}
			if err := widen(f); err != nil {
				t.Fatal(err)
			}
			rc, err := f.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			var size uintptr
			var errno syscall.Errno
			if err := rc.Control(func(fd uintptr) {
				size, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETPIPE_SZ, 0)
			}); err != nil || errno != 0 {
				t.Fatal(err, errno)
			}
			if size != streamPipe {
				t.Errorf("pipe capacity %d, want %d", size, streamPipe)
			}
		})
	}
	for _, c := range []io.Closer{in, out} {
		c.Close()
	}
}
