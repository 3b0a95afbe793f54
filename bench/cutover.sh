#!/usr/bin/env bash
# cutover.sh - the cutover of a migration on a real cluster in the e2e VM
# (e2e/migrate_cutover_test.go; docs/performance.md, "Moving data between
# nodes"): for data of each size, pre-copied to the replacement's node and
# then changed by CHANGE_MIB, the time from the old allocation's end to the
# replacement's Reserve on the other node, and beside it the same steps
# done by hand in the same guest right after (the floor: node 1's rename,
# a local zfs send -i | zfs receive of the same increment, node 2's
# rename) and the ratio. Each node's pool is on its own virtio disk.
# Prints the "cutover ..." lines; the full log and the agents' logs go to $out.
#
# usage: bench/cutover.sh [SIZES_MIB [ROUNDS [CHANGE_MIB]]]   default: 10,1024 1 10
# (about 20 minutes: in the emulated guest the pre-copy moves 2-3 MiB/s)
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=${1:-10,1024}
rounds=${2:-1}
change=${3:-10}
out=${NDZ_BENCH_OUT:-bench/out}
mkdir -p "$out"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
log=$out/cutover-$stamp.log
# The agents' logs at TRACE (each zfs command the plugins run, with its
# duration): where the cutover's time goes.
export NDZ_E2E_LOG_DIR=${NDZ_E2E_LOG_DIR:-$out/cutover-$stamp.agents} NDZ_E2E_LOG_LEVEL=${NDZ_E2E_LOG_LEVEL:-TRACE}
NDZ_VM_DISKS=2 NDZ_VM_DISK_SIZE=${NDZ_VM_DISK_SIZE:-3G} NDZ_VM_TIMEOUT=${NDZ_VM_TIMEOUT:-5400} \
	scripts/e2e.sh -test.run '^TestMigrateCutover$' -test.timeout 85m \
	-ndz.cutover "$sizes" -ndz.cutover-rounds "$rounds" -ndz.cutover-change "$change" >"$log" 2>&1 || { tail -n 40 "$log" >&2; exit 1; }
grep '^cutover ' "$log"
echo "full log: $log; agents' logs: $NDZ_E2E_LOG_DIR" >&2
