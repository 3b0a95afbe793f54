#!/usr/bin/env bash
# build-image.sh - build (or reuse) the e2e guest image: a Debian bookworm
# kernel plus an initramfs with a real OpenZFS 2.1 (kernel module + CLI).
#
# Result: $NDZ_VM_CACHE/img/{kernel,initrd.img,info,stamp}, used by run-in-vm.sh.
#   NDZ_VM_CACHE = ${NDZ_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nomad-device-zfs}/vm
# Idempotent: exits at once when img/stamp matches the sha256 of this script,
# guest-init.sh and NDZ_VM_KVER.  The slow step, the OpenZFS module build, is
# cached per guest kernel ABI under work/<kver>/zfs-ko (the .debs under
# work/<kver>/debs), so editing the scripts only reassembles the initramfs.
#
# Why a VM at all: the host kernel cannot load modules, so zfs.ko runs in a
# QEMU guest (TCG).  Everything comes from Debian bookworm packages; nothing is
# loaded into the host kernel and the guest packages are never installed:
#   guest kernel     linux-image-<kver>          (downloaded and unpacked)
#   module build     linux-headers-<kver> + zfs-dkms source (unpacked), host gcc-12
#   guest userland   zfsutils-linux + libzfs & co. (unpacked), busybox-static,
#                    plus the host's own glibc (the host is bookworm too)
# Installed on the host with apt: qemu-system-x86, gcc-12, make, xz-utils.
# zfs-dkms and zfsutils-linux are in 'contrib', which is enabled in the apt
# sources only when a build is actually needed.  Building needs root.
#
# Env: NDZ_CACHE, XDG_CACHE_HOME   see above
#      NDZ_VM_KVER   guest kernel ABI, e.g. 6.1.0-56-amd64 (default: linux-image-amd64's)
#      NDZ_VM_JOBS   parallel make jobs (default: nproc)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${NDZ_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nomad-device-zfs}/vm
img=$cache/img
stamp=$({ cat "$here/build-image.sh" "$here/guest-init.sh"; echo "kver=${NDZ_VM_KVER:-}"; } | sha256sum | cut -c1-16)
uptodate() { [ -s "$img/initrd.img" ] && [ -s "$img/kernel" ] && [ "$(cat "$img/stamp" 2>/dev/null)" = "$stamp" ]; }
uptodate && exit 0

log() { echo "build-image: [${SECONDS}s] $*" >&2; }
step_start=0
step() { step_start=$SECONDS; log "$*"; }
step_done() { log "  ... done in $((SECONDS - step_start)) s${1:+ ($1)}"; }
[ "$(id -u)" = 0 ] || { log "the image in $img is missing or stale and building it needs root (apt)"; exit 1; }
mkdir -p "$cache"
exec 9>"$cache/.lock"
if ! flock -n 9; then # one build at a time (parallel test runs, CI jobs)
	log "waiting for another build (lock $cache/.lock)"
	flock 9
fi
uptodate && { log "image built by another process meanwhile"; exit 0; }
log "building the guest image in $cache (stamp $stamp)"

# --- 1. apt: enable contrib, install the host tools ------------------------------
step "apt: host tools (qemu-system-x86, gcc-12, make, xz-utils)"
export DEBIAN_FRONTEND=noninteractive
apt_get() {
	apt-get -q -o DPkg::Lock::Timeout=600 -o APT::Sandbox::User=root \
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@" </dev/null
}
# On failure (typically 404s from stale package lists) refresh and retry once.
apt_retry() { apt_get "$@" || { log "apt-get $1 failed; apt-get update and retry"; apt_get update >/dev/null && apt_get "$@"; }; }
enable_contrib() {
	local src=/etc/apt/sources.list.d/debian.sources
	if [ -f "$src" ]; then # deb822 (the bookworm default): the first "Components: main" is the main archive
		grep -q '^Components:.*contrib' "$src" && return 1
		sed -i '0,/^Components: main$/s//Components: main contrib/' "$src"
	elif [ -f /etc/apt/sources.list ] && grep -qE '^deb .* bookworm main$' /etc/apt/sources.list; then
		sed -i -E 's/^(deb .* bookworm main)$/\1 contrib/' /etc/apt/sources.list
	else
		return 1
	fi
	log "enabled contrib in the apt sources"
}
updated=
if enable_contrib || ! apt-cache show zfs-dkms >/dev/null 2>&1; then
	apt_get update >/dev/null
	updated=1
fi
apt-cache show zfs-dkms >/dev/null 2>&1 || { log "zfs-dkms not found: is Debian 'contrib' in the apt sources?"; exit 1; }
# qemu for run-in-vm.sh; gcc-12/make/libc6-dev/libelf1 for the module build;
# the libraries are copied into the guest (normally all present already).
apt_retry install -y --no-install-recommends --no-upgrade qemu-system-x86 gcc-12 make libc6-dev \
	libelf1 libssl3 libblkid1 libuuid1 libudev1 libtirpc3 zlib1g xz-utils >/dev/null
step_done

kver=${NDZ_VM_KVER:-$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: linux-image-//p' | head -n1)}
[ -n "$kver" ] || { log "cannot resolve the ABI of linux-image-amd64"; exit 1; }
w=$cache/work/$kver
debs=$w/debs
mkdir -p "$w"
log "guest kernel $kver"

# --- 2. download the .debs (not installed) ---------------------------------------
if [ ! -f "$debs/.done" ]; then
	step "apt: downloading the guest kernel, headers, zfs-dkms, zfsutils, busybox-static"
	rm -rf "$debs"; mkdir -p "$debs"
	mapfile -t hdeps < <(apt-cache depends "linux-headers-$kver" | sed -n 's/^ *Depends: \(linux-\(headers\|kbuild\)-.*\)/\1/p')
	if [ ${#hdeps[@]} = 0 ] && [ -z "$updated" ]; then # an ABI the old lists do not know
		apt_get update >/dev/null; updated=1
		mapfile -t hdeps < <(apt-cache depends "linux-headers-$kver" | sed -n 's/^ *Depends: \(linux-\(headers\|kbuild\)-.*\)/\1/p')
	fi
	(cd "$debs" && apt_retry download "linux-image-$kver" "linux-headers-$kver" "${hdeps[@]}" \
		zfs-dkms zfsutils-linux libnvpair3linux libuutil3linux libzfs4linux libzpool5linux \
		busybox-static >/dev/null)
	touch "$debs/.done"
	step_done "$(du -sh "$debs" | cut -f1)"
fi
unpack() { for d in "$@"; do dpkg-deb -x "$d" "$t"; done; } # into $t

# --- 3. build the OpenZFS kernel modules against the Debian headers --------------
ko=$w/zfs-ko
if [ ! -f "$ko/zfs.ko" ]; then
	jobs=${NDZ_VM_JOBS:-$(nproc)}
	step "building the OpenZFS modules (the slow step: 3-5 min on 2 cores; make -j$jobs)"
	t=$w/build; rm -rf "$t" "$ko" "$ko.tmp"; mkdir -p "$t"
	unpack "$debs"/linux-headers-*.deb "$debs"/linux-kbuild-*.deb "$debs"/zfs-dkms_*.deb
	obj=$t/usr/src/linux-headers-$kver
	srcdir=$t$(readlink "$t/lib/modules/$kver/source") # .../linux-headers-<abi>-common
	# The arch Makefile includes the common one by absolute path: point it here.
	sed -i "s|^include /usr/src/|include $t/usr/src/|" "$obj/Makefile"
	cd "$t"/usr/src/zfs-*
	c0=$SECONDS
	./configure --with-config=kernel --with-linux="$srcdir" --with-linux-obj="$obj" >"$w/zfs-configure.log" 2>&1 ||
		{ tail -n 30 "$w/zfs-configure.log" >&2; log "configure failed, see $w/zfs-configure.log"; exit 1; }
	log "  configure: $((SECONDS - c0)) s"
	c0=$SECONDS
	make -j"$jobs" >"$w/zfs-make.log" 2>&1 ||
		{ tail -n 30 "$w/zfs-make.log" >&2; log "make failed, see $w/zfs-make.log"; exit 1; }
	log "  make: $((SECONDS - c0)) s"
	mkdir -p "$ko.tmp"
	find module -name '*.ko' -exec cp {} "$ko.tmp/" \;
	strip --strip-debug "$ko.tmp"/*.ko
	cd "$w"; rm -rf "$t"; mv "$ko.tmp" "$ko"
	step_done "$(cd "$ko" && echo *.ko)"
fi

# --- 4. assemble the initramfs ----------------------------------------------------
step "assembling the initramfs"
t=$w/image; rm -rf "$t"; mkdir -p "$t"
unpack "$debs"/linux-image-*.deb "$debs"/busybox-static_*.deb "$debs"/zfsutils-linux_*.deb "$debs"/lib*linux_*.deb
bb=$t/bin/busybox
kmods=$t/lib/modules/$kver
mkdir -p "$kmods/extra" && cp "$ko"/*.ko "$kmods/extra/"
"$bb" depmod -b "$t" "$kver"
# The modules guest-init.sh loads, plus everything they depend on (modules.dep
# lists a module's direct dependencies; follow them recursively).
mods=$(awk -v want="virtio_pci virtio_blk 9pnet_virtio 9p zfs" '
	function base(p) { sub(/.*\//, "", p); sub(/\.ko.*$/, "", p); gsub(/-/, "_", p); return p }
	function add(n,   d, k, i) {
		if ((n in seen) || !(n in path)) return
		seen[n] = 1; print path[n]
		k = split(deps[n], d, " "); for (i = 1; i <= k; i++) add(d[i])
	}
	{ sub(/:$/, "", $1); n = base($1); path[n] = $1; deps[n] = ""
	  for (i = 2; i <= NF; i++) deps[n] = deps[n] " " base($i) }
	END { k = split(want, w, " "); for (i = 1; i <= k; i++) add(w[i]) }' "$kmods/modules.dep")

r=$t/root
mkdir -p "$r"/usr/{bin,sbin,lib/x86_64-linux-gnu,lib64} "$r"/{dev,proc,sys,tmp,run,root,mnt,var/tmp,etc/zfs}
for d in bin sbin lib lib64; do ln -s "usr/$d" "$r/$d"; done # merged /usr, like the host
cp "$bb" "$r/usr/bin/"
for a in $("$bb" --list); do [ -e "$r/usr/bin/$a" ] || ln -s busybox "$r/usr/bin/$a"; done
cp -a "$t"/sbin/. "$r/usr/sbin/"                                 # zfs, zpool, zdb, mount.zfs, ...
cp -a "$t"/lib/x86_64-linux-gnu/. "$r/usr/lib/x86_64-linux-gnu/" # libzfs, libnvpair, ...
mkdir -p "$r/usr/lib/udev" && cp "$t"/lib/udev/zvol_id "$r/usr/lib/udev/" # see guest-init.sh (mdev)
for m in $mods; do mkdir -p "$r/lib/modules/$kver/${m%/*}"; cp "$kmods/$m" "$r/lib/modules/$kver/$m"; done
"$bb" depmod -b "$r" "$kver"
# Shared libraries: whatever the zfs tools need, plus the glibc pieces that
# dynamically linked host programs (cgo Go binaries: tests, Nomad, the plugin) need,
# and libgcc_s, which glibc loads for pthread_cancel: without it `zfs send -v`
# aborts ("libgcc_s.so.1 must be installed for pthread_cancel to work").
libs=$(LD_LIBRARY_PATH=$r/usr/lib/x86_64-linux-gnu ldd "$r"/usr/sbin/{zfs,zpool,zdb,zstream,mount.zfs} |
	awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }' | grep -v "^$r" | sort -u)
for l in $libs /lib/x86_64-linux-gnu/{libc.so.6,libm.so.6,libpthread.so.0,libdl.so.2,librt.so.1,libresolv.so.2,libnss_dns.so.2,libgcc_s.so.1}; do
	if [ -e "$l" ] && [ ! -e "$r$l" ]; then cp -L "$l" "$r$l"; fi
done
echo /usr/lib/x86_64-linux-gnu >"$r/etc/ld.so.conf" && ldconfig -r "$r"
# nobody/nogroup (65534): Nomad's exec driver runs tasks as nobody by default.
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$r/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
# No DNS in the guest; "ndz-vm" is the hostname guest-init.sh sets.
printf '127.0.0.1 localhost\n::1 localhost\n127.0.1.1 ndz-vm\n' >"$r/etc/hosts"
echo ndz-vm >"$r/etc/hostname"
ln -s /proc/self/mounts "$r/etc/mtab"
install -m 755 "$here/guest-init.sh" "$r/init"

rm -rf "$img.tmp"; mkdir -p "$img.tmp"
(cd "$r" && find . | LC_ALL=C sort | "$bb" cpio -o -H newc 2>/dev/null) >"$img.tmp/initrd.img"
# Boot the uncompressed ELF vmlinux (PVH entry point) rather than the bzImage:
# saves ~3 s of xz decompression per VM start under TCG.  Falls back to bzImage.
vmlinuz=$t/boot/vmlinuz-$kver
off=$(LC_ALL=C grep -obUaP -m1 '\xfd7zXZ\x00' "$vmlinuz" | cut -d: -f1 | sed -n 1p)
if [ -n "$off" ]; then # (xz stops after its stream, so tail may die of SIGPIPE)
	tail -c +$((off + 1)) "$vmlinuz" | xz -dc --single-stream >"$img.tmp/kernel" 2>/dev/null || true
fi
[ "$(head -c4 "$img.tmp/kernel" 2>/dev/null | od -An -c | tr -d ' ')" = 177ELF ] || cp "$vmlinuz" "$img.tmp/kernel"
zver=$(dpkg-deb -f "$debs"/zfsutils-linux_*.deb Version)
printf 'kver=%s\nzfs=%s\nstamp=%s\n' "$kver" "$zver" "$stamp" >"$img.tmp/info"
echo "$stamp" >"$img.tmp/stamp"
rm -rf "$t" "$img"; mv "$img.tmp" "$img"
step_done "initrd $(du -h "$img/initrd.img" | cut -f1), kernel $(du -h "$img/kernel" | cut -f1)"
log "image ready: $img (kernel $kver, zfs $zver)"
