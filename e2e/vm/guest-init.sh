#!/bin/sh
# guest-init.sh - PID 1 of the e2e guest (busybox ash).  build-image.sh installs
# it as /init in the initramfs; it never runs on the host.
#
# Contract with run-in-vm.sh (9p share with tag "ndzctl", mounted at /ndzvm):
#   in : /ndzvm/env   shell assignments: NDZ_VM_DIR (the host dir, 9p tag "work",
#                     mounted at the same path), NDZ_VM_POOL, NDZ_VM_POOL_SIZE,
#                     and `export NDZ_E2E_...=...` lines passed through from the host
#        /ndzvm/cmd   shell script, run by /bin/sh with cwd=$NDZ_VM_DIR, stdin=/dev/null
#   out: /ndzvm/stdout, /ndzvm/stderr, /ndzvm/rc (exit status of cmd)
# Progress lines ("ndz-vm: ...") go to the serial console (ttyS0).
# Two stages: stage 1 loads the kernel modules and moves / from the initramfs
# onto a tmpfs; stage 2 sets up the rest of the guest and runs the command.

export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp LANG=C.UTF-8

# Minimal udev stand-in: `mdev -d` (started below) re-runs this file with $MDEV
# set for every block device event.  When libzfs labels a whole disk
# (`zpool create p /dev/vda`) it waits until libudev reports the new partition
# with all its DEVLINKS present, so each device gets a udev database entry
# (/run/udev/data/b<maj>:<min>) naming one link, /dev/disk/by-id/ndzvm-<name>;
# zvols (zd*) also get their usual /dev/zvol/<dataset> link.
if [ -n "${MDEV:-}" ]; then
	devno=${MAJOR:+$MAJOR:$MINOR}
	[ -n "$devno" ] || read -r devno <"/sys/class/block/$MDEV/dev" || exit 0
	case ${ACTION:-add} in
	add | change)
		links=disk/by-id/ndzvm-$MDEV
		case $MDEV in zd*) n=$(/usr/lib/udev/zvol_id "/dev/$MDEV") && links="$links zvol/$n" ;; esac
		db=I:1
		for l in $links; do
			mkdir -p "/dev/${l%/*}" && ln -sfn "/dev/$MDEV" "/dev/$l" && db="$db
S:$l"
		done
		mkdir -p /run/udev/data && echo "$db" >"/run/udev/data/b$devno" ;;
	remove)
		rm -f "/run/udev/data/b$devno"
		find /dev/disk /dev/zvol -type l 2>/dev/null | while read -r l; do
			[ "$(readlink "$l")" = "/dev/$MDEV" ] && rm -f "$l"
		done ;;
	esac
	exit 0
fi

log() { echo "ndz-vm: [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
halt() { sync; poweroff -f; reboot -f; } # qemu runs with -no-reboot, so it exits either way

# Stage 1, on the initramfs.  pivot_root(2), which container runtimes need (the
# Nomad exec driver: "pivot_root .: invalid argument"), fails while / is the
# initramfs, because rootfs has no parent mount; and busybox df skips rootfs,
# which breaks Nomad's storage fingerprint.  So copy the initramfs (~28 MB)
# into a tmpfs and switch_root into it: that frees the initramfs and runs this
# script again as PID 1, with $1 = stage2.  The copy (~0.3 s) runs in the
# background while the kernel modules load (~1.2 s, mostly zfs.ko) on the other
# vCPU.  /proc and /dev (ash needs /dev/null for `&`) move along.
if [ "${1:-}" != stage2 ]; then
	mount -t proc proc /proc
	mount -t devtmpfs devtmpfs /dev
	mkdir /newroot && mount -t tmpfs -o mode=755 root /newroot
	set --; for f in /*; do case $f in /proc | /dev | /newroot) ;; *) set -- "$@" "$f" ;; esac; done
	cp -a "$@" /newroot/ &
	# virtio transport + 9p for the shares, virtio_blk for optional disks, then OpenZFS.
	modprobe -a virtio_pci virtio_blk 9pnet_virtio 9p || log "modprobe virtio/9p failed"
	modprobe zfs || log "modprobe zfs failed"
	wait
	mkdir /newroot/proc /newroot/dev && mount --move /proc /newroot/proc && mount --move /dev /newroot/dev
	exec switch_root /newroot /init stage2
fi

# Stage 2, on the tmpfs root.
# All modules are loaded: drop them (~10 MB), because Nomad's exec driver copies
# /lib, /usr, ... into every task directory.
rm -rf /usr/lib/modules
mount -t sysfs sysfs /sys
mount -t cgroup2 cgroup2 /sys/fs/cgroup # cgroup v2, as on systemd hosts (Nomad needs it)
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
# /tmp holds Nomad data dirs (task dirs get a copy of the chroot, ~28 MB each)
# and the scratch pool's sparse file.
mount -t tmpfs -o size=50%,mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=755 tmpfs /run
hostname ndz-vm
ip link set lo up
log "modules loaded (zfs $(cat /sys/module/zfs/version 2>/dev/null))"
echo 'SUBSYSTEM=block;.* 0:0 660 */init' >/etc/mdev.conf
mdev -s && mdev -d

p9="trans=virtio,version=9p2000.L,msize=512000,cache=mmap"
mkdir -p /ndzvm
mount -t 9p -o "$p9" ndzctl /ndzvm || { log "cannot mount the control share"; halt; }
NDZ_VM_DIR='' NDZ_VM_POOL='' NDZ_VM_POOL_SIZE=1G
# shellcheck source=/dev/null
. /ndzvm/env
[ -n "$NDZ_VM_DIR" ] || { log "no NDZ_VM_DIR in /ndzvm/env"; halt; }
mkdir -p "$NDZ_VM_DIR"
mount -t 9p -o "$p9" work "$NDZ_VM_DIR" || log "cannot mount the work share at $NDZ_VM_DIR"

# Optional scratch pool, mounted at /$NDZ_VM_POOL: on the first virtio disk if
# qemu got one, else on a sparse file in /tmp (`zpool import -d /tmp` finds it
# again after an export).  NDZ_VM_POOL_VDEV tells the command which it is.
rc=
NDZ_VM_POOL_VDEV=
if [ -n "$NDZ_VM_POOL" ]; then
	if [ -b /dev/vda ]; then NDZ_VM_POOL_VDEV=/dev/vda; else
		NDZ_VM_POOL_VDEV=/tmp/$NDZ_VM_POOL.img; truncate -s "$NDZ_VM_POOL_SIZE" "$NDZ_VM_POOL_VDEV"; fi
	zpool create -f -m "/$NDZ_VM_POOL" "$NDZ_VM_POOL" "$NDZ_VM_POOL_VDEV" \
		>/ndzvm/stdout 2>/ndzvm/stderr || rc=125
	log "pool $NDZ_VM_POOL on $NDZ_VM_POOL_VDEV (rc=${rc:-0})"
fi
export NDZ_VM_DIR NDZ_VM_POOL NDZ_VM_POOL_VDEV

if [ -z "$rc" ]; then
	log "running the command"
	(cd "$NDZ_VM_DIR" && exec sh /ndzvm/cmd) </dev/null >>/ndzvm/stdout 2>>/ndzvm/stderr
	rc=$?
fi
echo "$rc" >/ndzvm/rc
log "command exited with $rc"
halt
