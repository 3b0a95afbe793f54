package plugin

import (
	"os"
	"runtime/debug"

	hclog "github.com/hashicorp/go-hclog"
)

// LimitMemory makes the process that manages slots give the Go runtime a
// soft memory limit scaled to the configured slots (MemoryLimit) and
// collect after each scan (collectAfterScans), unless GOMEMLIMIT is set in
// its environment (the agent's), which then decides.
// The plugin binary's main sets it; tests, which host the plugin in their
// own process, leave it off.
//
// Why: with the default GOGC alone, Go lets the heap grow to twice what was
// live after the last collection before it collects again, and a scan or
// a Stats response at 10,000 slots is a burst of short-lived garbage on top
// of the two views live during a scan, so the resident set kept the
// bursts' size. The limit makes Go collect sooner and return the pages.
var LimitMemory bool

// The soft memory limit is 8 MiB for the runtime, gRPC and Nomad's
// packages, plus 600 bytes a slot: 13.7 MiB at 10,000 slots, where the two
// views of a scan alone hold about 11 MB. Soft: while more is live (a
// scan's peak at 10,000 slots, or a Stats response in Nomad's conversion),
// Go exceeds it and collects more often meanwhile (the runtime caps its
// collector at half the CPU). docs/performance.md has the measured cost.
const (
	memoryLimitBase    = 8 << 20
	memoryLimitPerSlot = 600
)

// MemoryLimit is the soft memory limit for a process managing slots.
func MemoryLimit(slots int) int64 {
	return memoryLimitBase + memoryLimitPerSlot*int64(slots)
}

// limitMemory applies MemoryLimit for slots when LimitMemory is set and
// the environment does not set GOMEMLIMIT (Go reads that itself at start),
// and says whether it did: the plugin then also collects after each scan
// (collectAfterScans). With GOMEMLIMIT set, Go's own settings decide
// alone; GOMEMLIMIT=off turns both off.
func limitMemory(slots int, logger hclog.Logger) bool {
	if !LimitMemory {
		return false
	}
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		logger.Debug("soft memory limit from the environment", "GOMEMLIMIT", v)
		return false
	}
	limit := MemoryLimit(slots)
	debug.SetMemoryLimit(limit)
	logger.Debug("soft memory limit", "bytes", limit, "slots", slots)
	return true
}
