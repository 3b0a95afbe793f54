//go:build bench

// Command churnplugin is the plugin for the churn benchmark
// (bench/churn_test.go): the real plugin, served to Nomad as the shipped
// binary serves it, with ZFS below the Runner seam faked in process and in
// memory (zfs/zfstest, loaded from the state file named by $ZFSTEST_STATE
// and written back to it after every change, for the benchmark's check at
// the end and for a plugin the agent starts again). At hundreds of allocations a minute, a zfs executable per command,
// or the state file read and written per command, would cost more CPU than
// everything measured. The fake's own CPU time (it walks the slots' files
// to account for space, as ZFS does in the kernel) is counted apart and
// written to $ZFSTEST_STATE.cpu every second, so the benchmark can tell the plugin's
// share without it. Built only with the bench tag.
package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins"

	"github.com/nomad-device-zfs/nomad-device-zfs/plugin"
	"github.com/nomad-device-zfs/nomad-device-zfs/zfs/zfstest"
)

func main() {
	path := os.Getenv(zfstest.StateEnv)
	f, err := zfstest.Load(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "churnplugin: the fake ZFS state ($%s): %v\n", zfstest.StateEnv, err)
		os.Exit(1)
	}
	f.Detach()
	r := &timedRunner{f: f, path: path}
	go save(r, path)
	if path := os.Getenv("NDZ_BENCH_CPUPROFILE"); path != "" {
		profile(path, time.Minute)
	}
	// As the shipped binary: the collection after each scan.
	plugin.CollectAfterScans = true
	plugins.Serve(func(logger hclog.Logger) any { return plugin.NewWithRunner(logger, r) })
}

// timedRunner runs f and adds up the CPU time its commands take, read
// from the calling thread's usage (the fake runs on the caller's
// goroutine, which stays on its thread meanwhile).
type timedRunner struct {
	f    *zfstest.Fake
	path string // the state file, saved after every change
	ns   atomic.Int64
}

func (r *timedRunner) Run(ctx context.Context, cmd string, args ...string) ([]byte, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	out, err := r.f.Run(ctx, cmd, args...)
	if len(args) > 0 && !readOnly[args[0]] {
		// A change is saved at once: the fake's mounts are real
		// directories, and a plugin killed with an older state on file
		// would leave the next one a state that disagrees with them.
		r.f.ResetCalls()
		if serr := r.f.SaveTo(r.path); serr != nil {
			fmt.Fprintf(os.Stderr, "churnplugin: saving the fake ZFS state: %v\n", serr)
		}
	}
	r.ns.Add(int64(threadCPU() - start))
	return out, err
}

// readOnly are the subcommands that change nothing.
var readOnly = map[string]bool{"list": true, "get": true, "holds": true, "version": true}

// threadCPU is the calling thread's user and system time.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// save writes the CPU seconds the fake's commands took to path.cpu every
// second, until the process ends.
func save(r *timedRunner, path string) {
	for range time.Tick(time.Second) {
		secs := strconv.FormatFloat(time.Duration(r.ns.Load()).Seconds(), 'f', 3, 64)
		if err := os.WriteFile(path+".cpu", []byte(secs), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "churnplugin: %v\n", err)
		}
	}
}

// profile writes a CPU profile of the process's first d to path, for
// finding where the plugin's share of the churn goes.
func profile(path string, d time.Duration) {
	fh, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(fh)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "churnplugin: CPU profile: %v\n", err)
		return
	}
	time.AfterFunc(d, func() {
		pprof.StopCPUProfile()
		fh.Close()
	})
}
