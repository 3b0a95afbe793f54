#!/usr/bin/env bash
# vm.sh - the real-OpenZFS figures of docs/performance.md: in the e2e VM,
# with a real Nomad agent, for each slot count: time to the first offered
# device and to all, the plugin's scan against a bare `zfs list -o name`,
# and release latency p50/p99 (e2e/scale_test.go) for a class of the given
# release policy. Prints the "scale ..." lines; the full log goes to $out.
#
# usage: bench/vm.sh [SLOTS [RELEASES [POLICY]]]   default: 1,100,1000, 20, destroy
set -euo pipefail
cd "$(dirname "$0")/.."
slots=${1:-1,100,1000}
releases=${2:-20}
policy=${3:-destroy}
out=${NDZ_BENCH_OUT:-bench/out}
mkdir -p "$out"
log=$out/vm-$(date -u +%Y%m%dT%H%M%SZ).log
NDZ_VM_TIMEOUT=${NDZ_VM_TIMEOUT:-5400} scripts/e2e.sh -test.run '^TestScale$' -test.timeout 85m \
	-ndz.scale "$slots" -ndz.releases "$releases" -ndz.policy "$policy" >"$log" 2>&1 || { tail -n 40 "$log" >&2; exit 1; }
grep '^scale ' "$log"
echo "full log: $log" >&2
