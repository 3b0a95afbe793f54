#!/usr/bin/env bash
# smoke.sh - self-test of the e2e VM harness, run on the host:
#   ./e2e/vm/smoke.sh        (builds the image first if needed; exits non-zero on any failure)
# Boot 1 runs a guest script that does what the plugin will do with real
# OpenZFS: create a pool, a dataset with a user property, list it with
# `zfs list -H -p -o name,nomad-device-zfs:owner`, write a file, destroy it,
# checking every exit code; plus pool export/import (file vdev and virtio
# disk), zvol device links, the NDZ_E2E_* pass-through and what Nomad needs
# from the guest.  Boot 2 checks run-in-vm.sh's output replay and exit status.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ndz-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT
t0=$SECONDS

# The guest has no bash: this part is POSIX sh (busybox ash).
cat >"$work/smoke-guest.sh" <<'EOF'
set -u
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
# check DESC CMD...: CMD must exit 0.
check() { d=$1; shift; if out=$("$@" 2>&1); then ok "$d"; else bad "$d (exit $?): $out"; fi; }
# refuse DESC CMD...: CMD must exit non-zero.
refuse() { d=$1; shift; if out=$("$@" 2>&1); then bad "$d: exited 0: $out"; else ok "$d (exit $?)"; fi; }
# equal DESC GOT WANT
equal() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: got [$2], want [$3]"; fi; }
tab=$(printf '\t')

# The guest environment Nomad relies on.
equal "root is a tmpfs (pivot_root works)" "$(awk '$2 == "/" { print $3 }' /proc/mounts)" tmpfs
equal "/tmp is a tmpfs" "$(awk '$2 == "/tmp" { print $3 }' /proc/mounts)" tmpfs
equal "cgroup2 at /sys/fs/cgroup" "$(awk '$2 == "/sys/fs/cgroup" { print $3 }' /proc/mounts)" cgroup2
check "nobody in /etc/passwd" grep -q '^nobody:x:65534:' /etc/passwd
case ":$PATH:" in *:/usr/sbin:*) ok "PATH has /usr/sbin" ;; *) bad "PATH=$PATH lacks /usr/sbin" ;; esac
case ":$PATH:" in *:/usr/bin:*) ok "PATH has /usr/bin" ;; *) bad "PATH=$PATH lacks /usr/bin" ;; esac
equal "NDZ_E2E_SMOKE passed through" "${NDZ_E2E_SMOKE:-unset}" "it's \"quoted\" \$HOME \`x\` ;|&"
check "work dir writable" sh -c 'echo guest >"$NDZ_VM_DIR/guest-was-here"'

# The plugin's life cycle, on a pool of its own (sparse file in /tmp).
check "truncate vdev file" truncate -s 256M /tmp/smoke.img
check "zpool create" zpool create -m /smoke smoke /tmp/smoke.img
check "zfs create with user property" zfs create -p -o nomad-device-zfs:owner=alloc-1 smoke/allocs/a1
equal "zfs list -H -p -o name,nomad-device-zfs:owner" \
	"$(zfs list -H -p -o name,nomad-device-zfs:owner smoke/allocs/a1)" "smoke/allocs/a1${tab}alloc-1"
equal "unset user property lists as -" \
	"$(zfs list -H -p -o name,nomad-device-zfs:owner smoke/allocs)" "smoke/allocs${tab}-"
check "write a file" sh -c 'echo hello >/smoke/allocs/a1/f && sync'
equal "read it back" "$(cat /smoke/allocs/a1/f)" hello
check "zfs destroy" zfs destroy smoke/allocs/a1
refuse "zfs list of the destroyed dataset fails" zfs list -H smoke/allocs/a1
refuse "zfs create in a missing parent fails" zfs create smoke/nope/x

# Export and import: the file vdev is found with -d /tmp.
check "zfs create (for export)" zfs create -o nomad-device-zfs:owner=alloc-2 smoke/a2
check "zpool export smoke" zpool export smoke
refuse "exported pool is gone" zfs list smoke/a2
check "zpool import -d /tmp smoke" zpool import -d /tmp smoke
equal "property survives export/import" "$(zfs get -H -o value nomad-device-zfs:owner smoke/a2)" alloc-2

# Zvols get /dev/zvol links (guest-init.sh's udev stand-in).
check "zfs create -V" zfs create -V 16M smoke/vol
i=0; while [ ! -e /dev/zvol/smoke/vol ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
check "/dev/zvol/smoke/vol exists" test -b /dev/zvol/smoke/vol
check "zpool destroy smoke" zpool destroy smoke

# The harness pool (NDZ_VM_POOL=tank on the virtio disk /dev/vda).
equal "harness pool vdev" "${NDZ_VM_POOL_VDEV:-}" /dev/vda
check "harness pool mounted" sh -c 'zfs get -H -o value mounted tank | grep -qx yes'
check "zpool export tank" zpool export tank
check "zpool import tank (device scan)" zpool import tank
check "tank mounted again" test -d /tank

echo "guest: $pass passed, $fail failed"
[ "$fail" = 0 ]
EOF

tricky="it's \"quoted\" \$HOME \`x\` ;|&"
echo "smoke: boot 1: guest checks" >&2
rc=0
NDZ_VM_POOL=tank NDZ_VM_DISKS=1 NDZ_E2E_SMOKE=$tricky "$here/run-in-vm.sh" "$work" 'sh ./smoke-guest.sh' || rc=$?
pass=0 fail=0
result() { if [ "$1" = "$2" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $3: got [$1], want [$2]" >&2; fi; }
result "$rc" 0 "guest checks exit status"
result "$(cat "$work/guest-was-here" 2>/dev/null)" guest "file written by the guest into DIR"

echo "smoke: boot 2: output replay and exit status" >&2
rc=0
"$here/run-in-vm.sh" "$work" 'echo out; echo err >&2; exit 7' >"$work/out" 2>"$work/err" || rc=$?
result "$rc" 7 "exit status of CMD"
result "$(cat "$work/out")" out "replayed stdout"
result "$(cat "$work/err")" err "replayed stderr"

echo "smoke: done in $((SECONDS - t0)) s" >&2
echo "smoke: $pass passed, $fail failed"
[ "$fail" = 0 ]
