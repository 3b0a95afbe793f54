#!/usr/bin/env bash
# e2e.sh - run the end-to-end tests (e2e/, build tag e2e) in one throw-away
# QEMU VM with real OpenZFS and a real Nomad agent.  `make e2e` runs it.
#
# usage: scripts/e2e.sh [TEST-BINARY-FLAG...]   e.g. scripts/e2e.sh -test.run 'Quota|Pool'
#
# Builds the test binary and the plugin on the host (static, so they run in
# the guest), copies the Nomad binary (tools/nomad-bin.sh) next to them in a
# work dir shared into the VM, and runs the test binary once in the VM with
# -test.v.  Its output streams as it runs; the exit status is the test
# binary's (125: the VM failed, see e2e/vm/README.md).
#
# Env: NOMAD_BIN         an agent binary to test against (default: Nomad 1.6.2, tools/nomad-bin.sh)
#      NDZ_VM_DOCKER     1 (default): boot the docker variant of the guest image
#                        (e2e/vm/build-docker.sh), where the TestDocker* tests run and
#                        must pass; 0: the base image, where they are skipped
#      NDZ_VM_*           the VM's settings (e2e/vm/README.md)
#      NDZ_E2E_LOG_DIR   if set, each test's Nomad agent log is copied there
#      NDZ_VM_DISKS      blank virtio disks (default 1, 2G: NDZ_VM_DISK_SIZE); the first is
#                        NDZ_E2E_DISK=/dev/vda, TestStickyHandoverTimeIndependentOfSize's pool
#      NDZ_E2E_PARALLEL  how many tests run at once (default 8; more runs the 2 GiB guest out of memory)
#      NDZ_E2E_*         passed into the guest
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
t0=$SECONDS
log() { printf 'e2e: [%3ds] %s\n' "$((SECONDS - t0))" "$*" >&2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ndz-e2e.XXXXXX")
vm=
# shellcheck disable=SC2317 # (run by the EXIT trap)
cleanup() { [ -z "$vm" ] || kill "$vm" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "building the test binary, the plugin and Nomad (cached)"
export CGO_ENABLED=0
go test -c -tags e2e -o "$work/e2e.test" ./e2e
mkdir "$work/plugins"
go build -trimpath -o "$work/plugins/nomad-device-zfs" ./cmd/nomad-device-zfs
# The operator CLI beside it: the tests run status and gc (the guest stages
# it outside the agent's plugin_dir, where Nomad 1.6 would try to launch it).
go build -trimpath -o "$work/plugins/nomad-device-zfs-ctl" ./cmd/nomad-device-zfs-ctl
cp "$(tools/nomad-bin.sh)" "$work/nomad" # NOMAD_BIN picks another agent
log "$("$work/nomad" version | head -n1)"

# Quote each argument for the guest's sh (run-in-vm.sh joins them with spaces).
# The tests run in parallel: most of their time is spent waiting on Nomad
# (a node's first heartbeat, device updates, task starts), so all five at
# once took 63 s where one after the other took 214 s.  Arguments given
# here come later and win, e.g. -test.parallel 1.
q() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }
args=" -test.parallel ${NDZ_E2E_PARALLEL:-8}"
for a in "$@"; do args="$args $(q "$a")"; done

# The guest writes the test output into the shared dir, and tail shows it
# here as it comes (run-in-vm.sh would only replay it once the VM stopped).
: >"$work/e2e.log"
export NDZ_E2E_NOMAD=$work/nomad NDZ_E2E_PLUGIN_DIR=$work/plugins
export NDZ_VM_DOCKER=${NDZ_VM_DOCKER:-1} && export NDZ_E2E_DOCKER=$NDZ_VM_DOCKER
# One blank virtio disk (a sparse file on this host's disk) for the test that
# writes a gigabyte: the guest's /tmp is its memory.
export NDZ_VM_DISKS=${NDZ_VM_DISKS:-1} NDZ_VM_DISK_SIZE=${NDZ_VM_DISK_SIZE:-2G} NDZ_E2E_DISK=/dev/vda
logs=${NDZ_E2E_LOG_DIR:-}
if [ -n "$logs" ]; then
	mkdir -p "$logs" "$work/logs"
	export NDZ_E2E_LOG_DIR=$work/logs # the guest writes into the share
fi
# Backstops against a hang, not expectations: about 4 minutes idle, but
# beside a second run on the same cores each test's waits stretch (see
# e2e/pace_test.go) and the suite took over 20 minutes.
export NDZ_VM_TIMEOUT=${NDZ_VM_TIMEOUT:-3600}
log "booting the VM and running the tests"
t1=$SECONDS
e2e/vm/run-in-vm.sh "$work" "./e2e.test -test.v -test.timeout 55m$args >>e2e.log 2>&1" &
vm=$!
tail -n +1 -f --pid="$vm" "$work/e2e.log"
rc=0
wait "$vm" || rc=$?
vm=
if [ -n "$logs" ]; then cp "$work"/logs/* "$logs"/ 2>/dev/null || true; log "agent logs in $logs"; fi
if [ "$rc" = 0 ]; then result=PASS; else result="FAIL (exit status $rc)"; awk -f scripts/fail-summary.awk "$work/e2e.log" || true; fi
log "$result: VM run $((SECONDS - t1)) s, total $((SECONDS - t0)) s"
exit "$rc"
