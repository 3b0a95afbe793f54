package zfsexec

import "syscall"

// backgroundNice is the niceness of a background command: the lowest
// priority CFS gives. Against a nice 0 process it gets about 1.5 % of a
// contended CPU, and all of an idle one.
const backgroundNice = 19

// lower gives a started command the lowest CPU priority. Linux keeps a
// niceness per thread; pid is the command's main thread, and zfs and
// zpool list on that one thread.
func lower(pid int) error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, pid, backgroundNice)
}
