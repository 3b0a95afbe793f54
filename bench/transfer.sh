#!/usr/bin/env bash
# transfer.sh - the transfer's throughput against a local `zfs send | zfs
# receive` of the same snapshot, and both ends' peak memory, on real
# OpenZFS in the e2e VM (bench/xfernode; docs/performance.md, "Moving data
# between nodes"). Two pools on two virtio disks stand for the two nodes;
# the transfer runs over TLS on loopback, each end its own process.
# Prints the "xfer ..." lines and xferprobe's "probe ..." lines (what the
# same bytes cost in TLS alone, in this guest); the full log goes to $out.
#
# usage: bench/transfer.sh [SIZES_MIB [ROUNDS]]   default: "100 1024" and 2
# (about 20 minutes: in the emulated guest the transfer moves 2-3 MiB/s)
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=${1:-100 1024}
rounds=${2:-2}
out=${NDZ_BENCH_OUT:-bench/out}
mkdir -p "$out"
log=$out/transfer-$(date -u +%Y%m%dT%H%M%SZ).log
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

CGO_ENABLED=0 go build -trimpath -o "$dir/xfernode" ./bench/xfernode
CGO_ENABLED=0 go build -trimpath -o "$dir/xferprobe" ./bench/xferprobe
# The certificates an operator makes: one CA, one client certificate (the
# same for every client of a region, as `nomad tls cert create -client`
# makes them).
nomad=$(tools/nomad-bin.sh)
(cd "$dir" && "$nomad" tls ca create >/dev/null && "$nomad" tls cert create -client >/dev/null &&
	mv nomad-agent-ca.pem ca.pem && mv global-client-nomad.pem cert.pem && mv global-client-nomad-key.pem key.pem)

# NDZ_BENCH_GODEBUG is set for both ends, e.g. cpu.aes=off: Go then
# negotiates ChaCha20-Poly1305 instead of AES-GCM, to see what the guest's
# emulated AES costs (never a setting for a real host).
cat >"$dir/run.sh" <<EOF
set -e
cd "\$NDZ_VM_DIR"
export GODEBUG=${NDZ_BENCH_GODEBUG:-}
zpool create -f -o cachefile=none -O mountpoint=/xa xa /dev/vda
zpool create -f -o cachefile=none -O mountpoint=/xb xb /dev/vdb
# Every send reads the disk, whichever runs first: no data in the ARC.
zfs create -o primarycache=metadata xa/data
zfs create xb/in
for size in $sizes; do
	zfs create xa/data/s\$size
	dd if=/dev/urandom of=/xa/data/s\$size/f bs=1M count=\$size 2>/dev/null
	zfs snapshot xa/data/s\$size@b
	sync
	for r in \$(seq $rounds); do
		# Alternate which goes first.
		for mode in \$( [ \$((r % 2)) = 1 ] && echo "pipe xfer" || echo "xfer pipe"); do
			if [ \$mode = pipe ]; then
				echo "size_mib=\$size round=\$r \$(./xfernode pipe xa/data/s\$size@b xb/in/pipe)"
				zfs destroy -r xb/in/pipe
			else
				rm -f serve.out
				./xfernode serve xa/data/s\$size@b 127.0.0.1:4680 127.0.0.2 . >serve.out 2>serve.err &
				pid=\$!
				while ! grep -q listening serve.out 2>/dev/null; do sleep 0.2; done
				if ! line=\$(./xfernode fetch 127.0.0.1:4680 127.0.0.2 xb/in/xfer .); then
					kill \$pid; exit 1
				fi
				echo "size_mib=\$size round=\$r \$line"
				wait \$pid
				echo "size_mib=\$size round=\$r \$(grep '^xfer serve bytes' serve.out)"
				zfs destroy -r xb/in/xfer
			fi
		done
	done
	zfs destroy -r xa/data/s\$size
done
# What the bytes cost besides zfs, in this guest: copies, AES-GCM, TLS.
./xferprobe 100
EOF

NDZ_VM_DISKS=2 NDZ_VM_DISK_SIZE=${NDZ_VM_DISK_SIZE:-2G} NDZ_VM_TIMEOUT=${NDZ_VM_TIMEOUT:-5400} \
	e2e/vm/run-in-vm.sh "$dir" sh run.sh >"$log" 2>&1 || { tail -n 40 "$log" >&2; exit 1; }
grep -E 'xfer |probe ' "$log"
echo "full log: $log" >&2
