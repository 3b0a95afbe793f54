#!/usr/bin/env bash
# scan-columns.sh - where the plugin's scan spends beyond a bare
# `zfs list -o name`, column by column, on real OpenZFS in the e2e VM
# (bench/scancols; docs/performance.md). Prints the "scancols ..." lines.
#
# usage: bench/scan-columns.sh [SLOTS [ROUNDS]]   default: 1000 and 7 (about 20 min)
set -euo pipefail
cd "$(dirname "$0")/.."
slots=${1:-1000}
rounds=${2:-7}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
CGO_ENABLED=0 go build -o "$dir/scancols" ./bench/scancols
NDZ_VM_POOL=tank NDZ_VM_TIMEOUT=${NDZ_VM_TIMEOUT:-5400} e2e/vm/run-in-vm.sh "$dir" ./scancols tank "$slots" "$rounds"
