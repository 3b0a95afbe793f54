package plugin

// CollectAfterScans makes the process that manages slots return a scan's
// garbage to the system soon after each scan (collectAfterScans), and a
// metrics scrape's once it is answered (metrics.Metrics.AfterScrape). The
// plugin binary's main sets it; tests, which host the plugin in their own
// process, leave it off: it would collect their heap.
//
// Why: a scan at 10,000 slots, and the Stats response that follows it,
// leave tens of megabytes of garbage, and then the plugin sits idle until
// the next scan. Go collects only as it allocates, so that garbage stayed
// resident for the whole scan_interval: 64 MiB at 10,000 slots, 41 with
// the collection (docs/performance.md), for no CPU the benchmark could
// measure.
//
// A soft memory limit scaled to the slots (runtime/debug.SetMemoryLimit)
// brought 10,000 slots to 38–39 MiB, but it is below what the plugin needs
// while allocations churn on a node (each Reserve decodes the node's
// allocations): the collector then ran almost without pause, and the
// plugin's CPU went from 14 % to 66 % of the agent's in the churn
// benchmark. An operator may still set GOMEMLIMIT in the agent's
// environment; Go reads it itself.
var CollectAfterScans bool
