package zfsexec

import "syscall"

// widen sets the capacity of the pipe f is an end of to streamPipe.
func widen(f rawConner) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		_, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETPIPE_SZ, streamPipe)
		if errno != 0 {
			serr = errno
		}
	}); err != nil {
		return err
	}
	return serr
}
