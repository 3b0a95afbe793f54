#!/usr/bin/env bash
# build-docker.sh - build (or reuse) the docker variant of the e2e guest
# image: the base initramfs (build-image.sh) with a Docker engine added.
#
# Result: $NDZ_VM_CACHE/docker/initrd.img (+ stamp), used by run-in-vm.sh
# when NDZ_VM_DOCKER=1, with the base image's kernel.
#
# The variant is the base initramfs with a second cpio archive appended (the
# kernel unpacks concatenated archives in order), so it never rebuilds the
# base image and follows it: the stamp covers the base image's stamp and
# this script. What it adds, all from Debian bookworm packages (downloaded,
# not installed), under /opt/docker so that Nomad's exec driver, which
# copies /usr and /lib into every task's chroot, does not copy 140 MB of it:
#   /opt/docker/bin   dockerd (docker.io), containerd, containerd-shim-runc-v2
#                     (containerd), runc; no docker CLI (the tests speak the
#                     Engine API on the socket)
#   /usr/lib/...      the shared libraries they need beyond the base image's,
#                     copied from the host (bookworm too, as for the base)
#   /opt/docker/busybox-rootfs.tar   a root filesystem of busybox-static for
#                     `docker import`: there is no registry to pull from
# The guest starts no daemon by itself: the e2e tests start dockerd (see
# e2e/docker_test.go for the flags: vfs storage, no bridge, no iptables).
#
# Env: NDZ_CACHE, XDG_CACHE_HOME   as for build-image.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${NDZ_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nomad-device-zfs}/vm
"$here/build-image.sh"
base=$cache/img
out=$cache/docker
stamp=$({ cat "$base/stamp" "$here/build-docker.sh"; } | sha256sum | cut -c1-16)
uptodate() { [ -s "$out/initrd.img" ] && [ "$(cat "$out/stamp" 2>/dev/null)" = "$stamp" ]; }
uptodate && exit 0

log() { echo "build-docker: [${SECONDS}s] $*" >&2; }
[ "$(id -u)" = 0 ] || { log "the image in $out is missing or stale and building it needs root (apt)"; exit 1; }
mkdir -p "$cache"
exec 9>"$cache/.docker.lock"
flock 9 # one build at a time
uptodate && exit 0
log "building the docker variant of the guest image in $out (stamp $stamp)"

debs=$cache/docker-debs
if [ ! -f "$debs/.done" ]; then
	rm -rf "$debs"; mkdir -p "$debs"
	(cd "$debs" && apt-get -q -o APT::Sandbox::User=root download docker.io containerd runc busybox-static >/dev/null </dev/null) ||
		{ log "apt-get download failed (apt-get update may be needed)"; exit 1; }
	touch "$debs/.done"
	log "  downloaded $(du -sh "$debs" | cut -f1)"
fi

t=$cache/docker-build
rm -rf "$t"; mkdir -p "$t/pkg" "$t/root/opt/docker/bin" "$t/root/usr/lib/x86_64-linux-gnu" "$t/rootfs/bin"
for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$t/pkg"; done
bins="$t/pkg/usr/sbin/dockerd $t/pkg/usr/bin/containerd $t/pkg/usr/bin/containerd-shim-runc-v2 $t/pkg/usr/sbin/runc"
# shellcheck disable=SC2086 # (word splitting wanted)
cp $bins "$t/root/opt/docker/bin/"
# shellcheck disable=SC2086
for l in $(ldd $bins | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u); do
	case ${l##*/} in libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.*) continue ;; esac # in the base
	cp -L "$l" "$t/root/usr/lib/x86_64-linux-gnu/"
done

# busybox root filesystem: the static binary and a link per applet.
cp "$t/pkg/bin/busybox" "$t/rootfs/bin/"
for a in $("$t/rootfs/bin/busybox" --list); do [ -e "$t/rootfs/bin/$a" ] || ln -s busybox "$t/rootfs/bin/$a"; done
mkdir -p "$t/rootfs"/{tmp,etc,proc,sys,dev}
tar -C "$t/rootfs" --owner=0 --group=0 --numeric-owner -cf "$t/root/opt/docker/busybox-rootfs.tar" .
dpkg-deb -f "$debs"/busybox-static_*.deb Version | sed 's/^[0-9]*://; s/-.*//' >"$t/root/opt/docker/busybox-version"

rm -rf "$out.tmp"; mkdir -p "$out.tmp"
(cd "$t/root" && find . | LC_ALL=C sort | "$t/pkg/bin/busybox" cpio -o -H newc 2>/dev/null) >"$t/docker.cpio"
cat "$base/initrd.img" "$t/docker.cpio" >"$out.tmp/initrd.img"
{
	echo "stamp=$stamp"
	for p in docker.io containerd runc; do echo "$p=$(dpkg-deb -f "$debs/${p}"_*.deb Version)"; done
} >"$out.tmp/info"
echo "$stamp" >"$out.tmp/stamp"
rm -rf "$t" "$out"; mv "$out.tmp" "$out"
log "docker image ready: $out/initrd.img ($(du -h "$out/initrd.img" | cut -f1))"
