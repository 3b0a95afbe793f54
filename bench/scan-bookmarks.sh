#!/bin/sh
# scan-bookmarks.sh - in the e2e VM (busybox sh): what listing bookmarks
# adds to the plugin's scan (zfs.ListArgs lists filesystems, snapshots and
# bookmarks). N slots under tank/s, each with a @pristine snapshot (one
# recursive snapshot) and no bookmark, listed with the scan's columns as
# filesystem,snapshot and as filesystem,snapshot,bookmark, alternately,
# ROUNDS times each; prints each time (centiseconds, /proc/uptime) and the
# medians. From the host:
#   NDZ_VM_POOL=tank NDZ_VM_POOL_SIZE=4G e2e/vm/run-in-vm.sh "$PWD" 'N=300 sh bench/scan-bookmarks.sh'
set -eu
N=${N:-300}
ROUNDS=${ROUNDS:-7}
cols=name,type,used,available,referenced,mountpoint,mounted,quota,refquota,reservation,compression,compressratio,recordsize,encryption,origin,guid,nomad-device-zfs:owner,nomad-device-zfs:state,nomad-device-zfs:holder,nomad-device-zfs:generation,nomad-device-zfs:since,nomad-device-zfs:holder_index,nomad-device-zfs:outcome,nomad-device-zfs:retain_as,nomad-device-zfs:expires
zfs create tank/s
i=1
while [ "$i" -le "$N" ]; do
	zfs create -o nomad-device-zfs:owner=tank/s/s-$i -o nomad-device-zfs:state=ready tank/s/s-$i
	i=$((i + 1))
done
zfs snapshot -r tank/s@pristine
cs() { cut -d' ' -f1 /proc/uptime | tr -d .; }
time_list() {
	t0=$(cs)
	zfs list -H -p -r -t "$1" -o "$cols" tank/s >/dev/null
	echo $(($(cs) - t0))
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
a="" b=""
r=1
while [ "$r" -le "$ROUNDS" ]; do
	a="$a $(time_list filesystem,snapshot)"
	b="$b $(time_list filesystem,snapshot,bookmark)"
	r=$((r + 1))
done
echo "scan-bookmarks slots=$N without_cs=[$a ] with_cs=[$b ]"
ma=$(echo $a | tr ' ' '\n' | median) mb=$(echo $b | tr ' ' '\n' | median)
echo "scan-bookmarks slots=$N median_without_ms=$((ma * 10)) median_with_ms=$((mb * 10))"
