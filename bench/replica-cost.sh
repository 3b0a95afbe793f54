#!/usr/bin/env bash
# replica-cost.sh - what a replica costs the holder's node, on the
# three-agent cluster in the e2e VM (e2e/replica_cost_test.go;
# docs/node-loss.md, "What it costs"): for each change of A's slot on
# node 1 (64 MiB once, then 4 MiB five times, of random bytes), the bytes
# node 1's transfer server sent for it (nomad_device_zfs_transfer_sent_bytes_total)
# against the bytes changed, node 1's plugin CPU with its zfs children,
# the same with no node pulling, and a 32 MiB increment whose stream is
# cut by killing node 1's plugin. Prints the "replica-cost ..." lines,
# with the commit and the time; the full log and the agents' logs go to
# $out. Fails when no increment comes or the bytes on the wire pass
# 2 x the bytes changed + 1 MiB. Not in CI, nor in make test or make e2e.
#
# usage: bench/replica-cost.sh   (about 10 minutes on a quiet host)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${NDZ_BENCH_OUT:-bench/out}
mkdir -p "$out"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
log=$out/replica-cost-$stamp.log
export NDZ_E2E_LOG_DIR=${NDZ_E2E_LOG_DIR:-$out/replica-cost-$stamp.agents}
dirty=$(git diff --quiet HEAD -- . ':!docs' 2>/dev/null || echo "+changes")
echo "replica-cost run $stamp commit $(git rev-parse --short HEAD)$dirty host_load $(cut -d' ' -f1-3 /proc/loadavg)"
NDZ_VM_TIMEOUT=${NDZ_VM_TIMEOUT:-3600} scripts/e2e.sh -test.run '^TestReplicaCost$' -test.timeout 50m -ndz.replica-cost >"$log" 2>&1 ||
	{ tail -n 60 "$log" >&2; grep '^replica-cost ' "$log" || true; echo "FAIL; full log: $log" >&2; exit 1; }
grep '^replica-cost ' "$log"
echo "full log: $log; agents' logs: $NDZ_E2E_LOG_DIR" >&2
