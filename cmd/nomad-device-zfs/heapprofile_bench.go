//go:build bench

package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

// A bench build (GOFLAGS=-tags=bench) writes the plugin's heap profile
// and memory statistics every 10 s to $NDZ_BENCH_HEAPPROFILE.<seconds>
// and .<seconds>.txt, for the memory benchmark (bench/rss_test.go) to
// show where the heap goes. The shipped binary has none of this.
func init() {
	base := os.Getenv("NDZ_BENCH_HEAPPROFILE")
	if base == "" || os.Getenv("NOMAD_PLUGIN_MAGIC_COOKIE") == "" { // the plugin process only
		return
	}
	// A sample every 16 KiB allocated, not 512: the slots' many small
	// objects show up in proportion.
	runtime.MemProfileRate = 16 << 10
	start := time.Now()
	go func() {
		for range time.Tick(10 * time.Second) {
			name := fmt.Sprintf("%s.%03d", base, int(time.Since(start).Seconds()))
			if fh, err := os.Create(name); err == nil {
				_ = pprof.Lookup("heap").WriteTo(fh, 0)
				fh.Close()
			}
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			_ = os.WriteFile(name+".txt", fmt.Appendf(nil,
				"HeapAlloc %d\nHeapInuse %d\nHeapIdle %d\nHeapReleased %d\nStackInuse %d\nSys %d\nGCSys %d\nOtherSys %d\nNumGC %d\nNumGoroutine %d\n",
				m.HeapAlloc, m.HeapInuse, m.HeapIdle, m.HeapReleased, m.StackInuse, m.Sys, m.GCSys, m.OtherSys, m.NumGC, runtime.NumGoroutine()), 0o644)
		}
	}()
}
