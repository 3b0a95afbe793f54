# capture-bookmarks.sh - what the plugin's scan and a rollback release meet
# when a slot has a bookmark, on OpenZFS 2.1.11 (issue 30): the scan's own
# listing (zfs.ListArgs' columns, bookmarks among filesystems and
# snapshots) of a slot with a bookmark, and a rollback to @pristine past a
# newer bookmark, without and with -r.
#   NDZ_VM_POOL=tank e2e/vm/run-in-vm.sh DIR 'sh capture-bookmarks.sh'
# For each NAME: NAME.stdout, NAME.stderr, NAME.rc.
set +e
O=${O:-$PWD/out}; mkdir -p "$O"
run() { name=$1; shift; "$@" >"$O/$name.stdout" 2>"$O/$name.stderr"; echo $? >"$O/$name.rc"; }
cols=name,type,used,available,referenced,mountpoint,mounted,quota,refquota,reservation,compression,compressratio,recordsize,encryption,origin,guid,nomad-device-zfs:owner,nomad-device-zfs:state,nomad-device-zfs:holder,nomad-device-zfs:generation,nomad-device-zfs:since,nomad-device-zfs:holder_index,nomad-device-zfs:outcome,nomad-device-zfs:retain_as,nomad-device-zfs:expires

zfs create tank/bm
zfs create -o nomad-device-zfs:owner=tank/bm/slot -o nomad-device-zfs:state=held tank/bm/slot
zfs snapshot tank/bm/slot@pristine
dd if=/dev/urandom of=/tank/bm/slot/a bs=1M count=1 2>/dev/null
zfs snapshot -o nomad-device-zfs:owner=tank/bm/slot@replica-1 tank/bm/slot@replica-1
zfs bookmark tank/bm/slot@replica-1 tank/bm/slot#replica-1
zfs destroy tank/bm/slot@replica-1
run bm-scan-list zfs list -H -p -r -t filesystem,snapshot,bookmark -o "$cols" tank/bm

# A rollback to @pristine with a newer bookmark: refused without -r; -r
# destroys the bookmark too.
run bm-rollback-past-bookmark zfs rollback tank/bm/slot@pristine
run bm-rollback-r-past-bookmark zfs rollback -r tank/bm/slot@pristine
run bm-list-after-rollback-r zfs list -H -p -r -t filesystem,snapshot,bookmark -o name,type tank/bm
