#!/usr/bin/env bash
# run-in-vm.sh - run a command inside a throw-away QEMU VM with real OpenZFS.
#
# usage: run-in-vm.sh DIR CMD [ARG...]
#   DIR is shared read-write into the guest (9p) at the same absolute path and
#   is the command's working directory.  CMD ARG... are joined with spaces and
#   run by the guest's /bin/sh (busybox ash), as root, like `ssh host CMD...`.
#   The guest has zfs/zpool (OpenZFS 2.1, zfs.ko loaded), busybox, glibc, and
#   /tmp on tmpfs; no network.  Host-built programs (Go test binaries, Nomad,
#   the plugin; static or glibc-linked) run as they are: keep them in DIR.
#   The command's stdout/stderr are replayed on this script's stdout/stderr once
#   the VM has stopped, and its exit status becomes this script's exit status
#   (125: the VM did not report one; the tail of the console log is printed).
#
# Env: NDZ_VM_POOL       if set, create this pool (mounted at /NAME) before CMD
#      NDZ_VM_POOL_SIZE  its size (default 1G): a sparse file /tmp/NAME.img in
#                        the guest, or the first virtio disk if NDZ_VM_DISKS > 0
#      NDZ_VM_DISKS      number of blank virtio disks /dev/vda.. (default 0)
#      NDZ_VM_DISK_SIZE  their size (default NDZ_VM_POOL_SIZE)
#      NDZ_VM_DOCKER=1   boot the docker variant of the image (build-docker.sh):
#                        dockerd, containerd, runc in /opt/docker/bin; RAM default 3072
#      NDZ_VM_MEM        guest RAM in MiB (default 2048; 3072 with docker)   NDZ_VM_CPUS (default 2)
#      NDZ_VM_TIMEOUT    seconds before the VM is killed (default 1800)
#      NDZ_VM_KVM=1      use KVM if /dev/kvm can be opened (default: TCG)
#      NDZ_VM_VERBOSE=1  also print the guest console log
#      NDZ_E2E_*         passed through into the command's environment
#      NDZ_CACHE         cache root (see build-image.sh; the image is built on first use)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { sed -n '3,13s/^# \{0,1\}//p' "$0" >&2; exit 2; }
dir=$(cd "$1" && pwd -P); shift
[ "$dir" != / ] || { echo "run-in-vm: DIR must not be /" >&2; exit 2; }
img=${NDZ_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nomad-device-zfs}/vm/img
"$here/build-image.sh" # a no-op while the image is up to date
initrd=$img/initrd.img mem=${NDZ_VM_MEM:-2048}
if [ "${NDZ_VM_DOCKER:-}" = 1 ]; then
	"$here/build-docker.sh" # the same with a Docker engine (about 140 MB more)
	initrd=${img%/img}/docker/initrd.img mem=${NDZ_VM_MEM:-3072}
fi
if ! command -v qemu-system-x86_64 >/dev/null; then # e.g. CI with a restored cache
	echo "run-in-vm: installing qemu-system-x86" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 \
		--no-install-recommends --no-upgrade qemu-system-x86 </dev/null >/dev/null
fi

# Single-quote a value for the guest's sh.
q() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ndz-vm.XXXXXX")
ctl=$tmp/ctl # 9p-shared with the guest: env, cmd in; stdout, stderr, rc out
mkdir "$ctl"
qpid=
# shellcheck disable=SC2317 # (run by the EXIT trap)
cleanup() { [ -z "$qpid" ] || kill "$qpid" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
printf '%s\n' "$*" >"$ctl/cmd"
{
	echo "NDZ_VM_DIR=$(q "$dir")"
	echo "NDZ_VM_POOL=$(q "${NDZ_VM_POOL:-}")"
	echo "NDZ_VM_POOL_SIZE=$(q "${NDZ_VM_POOL_SIZE:-1G}")"
	for v in $(compgen -e); do
		case $v in NDZ_E2E_*) echo "export $v=$(q "${!v}")" ;; esac
	done
} >"$ctl/env"
disks=()
for ((i = 0; i < ${NDZ_VM_DISKS:-0}; i++)); do
	truncate -s "${NDZ_VM_DISK_SIZE:-${NDZ_VM_POOL_SIZE:-1G}}" "$tmp/disk$i.raw" # sparse
	disks+=(-drive "file=$tmp/disk$i.raw,if=virtio,format=raw,cache=unsafe")
done

# TCG by default: on the machines this was built on, /dev/kvm exists but cannot
# boot a standard kernel (see README.md).  NDZ_VM_KVM=1 opts in elsewhere.
accel=tcg
if [ "${NDZ_VM_KVM:-}" = 1 ]; then
	if { : <>/dev/kvm; } 2>/dev/null; then accel=kvm; else echo "run-in-vm: /dev/kvm unusable, using TCG" >&2; fi
fi
[ "${NDZ_VM_VERBOSE:-}" != 1 ] || echo "run-in-vm: booting ($accel, ${NDZ_VM_CPUS:-2} vCPU, $mem MiB, $(grep ^kver= "$img/info"))" >&2

rc=0
timeout -k 10 "${NDZ_VM_TIMEOUT:-1800}" qemu-system-x86_64 \
	-M q35 -accel "$accel" -cpu max -smp "${NDZ_VM_CPUS:-2}" -m "$mem" \
	-nodefaults -no-user-config -display none -no-reboot \
	-serial "file:$tmp/console.log" \
	-kernel "$img/kernel" -initrd "$initrd" \
	-append "console=ttyS0 quiet panic=-1" \
	-virtfs "local,path=$ctl,mount_tag=ndzctl,security_model=none" \
	-virtfs "local,path=$dir,mount_tag=work,security_model=none" \
	"${disks[@]}" </dev/null &
qpid=$!
wait "$qpid" || rc=$?
qpid=

[ -f "$ctl/stdout" ] && cat "$ctl/stdout"
[ -f "$ctl/stderr" ] && cat "$ctl/stderr" >&2
if [ "${NDZ_VM_VERBOSE:-}" = 1 ] || [ ! -s "$ctl/rc" ]; then
	why="qemu exit status $rc"
	[ "$rc" != 124 ] || why="timed out after ${NDZ_VM_TIMEOUT:-1800} s"
	echo "--- ndz-vm guest console ($why) ---" >&2
	tr -d '\r' <"$tmp/console.log" | tail -n 60 >&2
fi
[ -s "$ctl/rc" ] || exit 125
exit "$(cat "$ctl/rc")"
