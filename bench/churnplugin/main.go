//go:build bench

// Command churnplugin is the plugin for the churn benchmark
// (bench/churn_test.go): the real plugin, served to Nomad as the shipped
// binary serves it, with ZFS below the Runner seam faked in process and in
// memory (zfs/zfstest, loaded from the state file named by $ZFSTEST_STATE
// and written back to it every second, for the benchmark's check at the
// end). At hundreds of allocations a minute, a zfs executable per command,
// or the state file read and written per command, would cost more CPU than
// everything measured. Built only with the bench tag.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"
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
	go save(f, path)
	if path := os.Getenv("NDZ_BENCH_CPUPROFILE"); path != "" {
		profile(path, time.Minute)
	}
	plugins.Serve(func(logger hclog.Logger) any { return plugin.NewWithRunner(logger, f) })
}

// save writes the fake's state to path every second, forgetting the
// commands it recorded (nothing reads them here, and they would grow
// without bound), until the process ends.
func save(f *zfstest.Fake, path string) {
	for range time.Tick(time.Second) {
		f.ResetCalls()
		if err := f.SaveTo(path); err != nil {
			fmt.Fprintf(os.Stderr, "churnplugin: saving the fake ZFS state: %v\n", err)
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
