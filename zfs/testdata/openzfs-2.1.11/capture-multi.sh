#!/bin/sh
# capture-multi.sh - several snapshots in one zfs release / zfs destroy
# (tank/b/d@x,y), and several properties in one zfs set: what OpenZFS
# 2.1.11 does when one of them has no hold, is missing or is held. Run in
# the VM on a fresh pool tank (e2e/vm/run-in-vm.sh DIR "sh capture-multi.sh"),
# as capture.sh; replayed against the fake by zfs/zfstest TestCaptureSeveralSnapshots.
set +e
O=${O:-$PWD/out}; mkdir -p $O
run() { name=multi-$1; shift; { echo "\$ $*"; "$@" >$O/$name.stdout 2>$O/$name.stderr; echo $? > $O/$name.rc; } ; }
P=${NDZ_VM_POOL:-tank}
zfs create $P/b
zfs create $P/b/d
zfs snapshot $P/b/d@a; zfs snapshot $P/b/d@b; zfs snapshot $P/b/d@c
zfs hold nomad-device-zfs $P/b/d@a; zfs hold nomad-device-zfs $P/b/d@b
# several props in one set
run set-multi zfs set nomad-device-zfs:state=releasing nomad-device-zfs:holder=x nomad-device-zfs:retain_as=$P/b/e $P/b/d
run get-multi zfs get -H -p -o name,property,value,source nomad-device-zfs:state,nomad-device-zfs:holder,nomad-device-zfs:retain_as $P/b/d
# release several: all held
run release-multi zfs release nomad-device-zfs $P/b/d@a $P/b/d@b
run holds-after-release zfs holds -H $P/b/d@a $P/b/d@b
# release several: the first not held, the second held: is the second released?
zfs hold nomad-device-zfs $P/b/d@c
run release-multi-first-unheld zfs release nomad-device-zfs $P/b/d@a $P/b/d@c
run holds-after-first-unheld zfs holds -H $P/b/d@c
# release several: first missing snapshot, second held
zfs hold nomad-device-zfs $P/b/d@a
run release-multi-first-missing zfs release nomad-device-zfs $P/b/d@nope $P/b/d@a
run holds-after-first-missing zfs holds -H $P/b/d@a
run release-multi-none-held zfs release nomad-device-zfs $P/b/d@b $P/b/d@c
# destroy a,b,c while b is held (another tag): atomic?
zfs hold keep $P/b/d@b
run destroy-multi-one-held zfs destroy $P/b/d@a,b,c
run list-after-one-held zfs list -H -o name -t snapshot -r $P/b/d
zfs release keep $P/b/d@b
# destroy with a missing one among existing ones
run destroy-multi-one-missing zfs destroy $P/b/d@a,nope
run list-after-one-missing zfs list -H -o name -t snapshot -r $P/b/d
# destroy all missing
run destroy-multi-all-missing zfs destroy $P/b/d@nope,nope2
# destroy several that exist
zfs snapshot $P/b/d@x; zfs snapshot $P/b/d@y
run destroy-multi zfs destroy $P/b/d@b,c,x
run list-after-multi zfs list -H -o name -t snapshot -r $P/b/d
run destroy-multi-no-dataset zfs destroy $P/b/nods@a,b
run release-multi-no-dataset zfs release nomad-device-zfs $P/b/nods@a $P/b/nods@b
cd $O && for f in multi-*.rc; do n=${f%.rc}; printf '%-32s rc=%s  out=%s err=%s\n' "$n" "$(cat $f)" "$(head -c 200 $n.stdout | tr '\n' '|')" "$(head -c 200 $n.stderr | tr '\n' ' ')"; done
