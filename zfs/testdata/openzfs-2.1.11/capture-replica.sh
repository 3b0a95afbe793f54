# capture-replica.sh - a replica's flow on OpenZFS 2.1.11 (issue 30): the
# holder bookmarks each snapshot it sent and destroys the snapshot (its
# blocks freed), then sends the next increment from the bookmark; raw sends
# of encrypted data from a bookmark; an increment from a bookmark cut and
# resumed; a replica claimed by rename; the errors of bookmarks.
# capture.sh runs it after capture-send.sh; alone, on a fresh pool tank:
#   NDZ_VM_POOL=tank e2e/vm/run-in-vm.sh DIR 'sh capture-replica.sh'
# For each NAME: NAME.stdout, NAME.stderr, NAME.rc; for a pipe also
# NAME.send.stderr and NAME.send.rc (the sending side).
set +e
O=${O:-$PWD/out}; mkdir -p "$O"
run() { name=$1; shift; "$@" >"$O/$name.stdout" 2>"$O/$name.stderr"; echo $? >"$O/$name.rc"; }
pipe() {
	name=$1 filter=$2; shift 2
	send=""; while [ "$1" != -- ]; do send="$send $1"; shift; done; shift
	{ zfs $send 2>"$O/$name.send.stderr"; echo $? >"$O/$name.send.rc"; } | sh -c "$filter" |
		zfs "$@" >"$O/$name.stdout" 2>"$O/$name.stderr"; echo $? >"$O/$name.rc"
}
token() { zfs get -H -o value receive_resume_token "$1"; }

zfs create tank/rep
zfs create tank/rep/class
zfs create tank/rep/slot
dd if=/dev/urandom of=/tank/rep/slot/a bs=1M count=8 2>/dev/null

# The first copy: a whole stream, received unmounted with canmount=noauto;
# the snapshot bookmarked, then destroyed on the holder.
zfs snapshot tank/rep/slot@replica-1
run rep-bookmark-1 zfs bookmark tank/rep/slot@replica-1 tank/rep/slot#replica-1
pipe rep-recv-full cat send tank/rep/slot@replica-1 -- receive -s -u -o canmount=noauto -o nomad-device-zfs:state=replica tank/rep/class/replica-a-pg-1
run rep-destroy-snap-1 zfs destroy tank/rep/slot@replica-1
run rep-list-holder-1 zfs list -H -p -r -t filesystem,snapshot,bookmark -o name,type,guid,createtxg tank/rep/slot
run rep-list-bookmarks-1 zfs list -H -p -r -t bookmark -o name,guid,createtxg tank/rep/slot

# The next increments, each from the bookmark of the last one sent; the
# snapshot the bookmark was made of no longer exists.
dd if=/dev/urandom of=/tank/rep/slot/b bs=1M count=2 2>/dev/null
zfs snapshot tank/rep/slot@replica-2
run rep-send-dry-incr zfs send -nvP -i tank/rep/slot#replica-1 tank/rep/slot@replica-2
pipe rep-recv-incr cat send -i tank/rep/slot#replica-1 tank/rep/slot@replica-2 -- receive -s -u tank/rep/class/replica-a-pg-1
zfs bookmark tank/rep/slot@replica-2 tank/rep/slot#replica-2
zfs destroy tank/rep/slot@replica-2
run rep-destroy-bookmark-1 zfs destroy tank/rep/slot#replica-1
run err-rep-destroy-bookmark-gone zfs destroy tank/rep/slot#replica-1
run err-rep-bookmark-no-snap zfs bookmark tank/rep/slot@replica-9 tank/rep/slot#replica-9
run rep-list-replica zfs list -H -p -r -t filesystem,snapshot -o name,type,guid,mounted,canmount,nomad-device-zfs:state tank/rep/class

# An increment from a bookmark cut and resumed: the token names the
# bookmark's guid as its base.
dd if=/dev/urandom of=/tank/rep/slot/c bs=1M count=4 2>/dev/null
zfs snapshot tank/rep/slot@replica-3
run err-rep-send-from-gone-bookmark zfs send -i tank/rep/slot#replica-1 tank/rep/slot@replica-3
pipe err-rep-recv-interrupted 'head -c 1000000' send -i tank/rep/slot#replica-2 tank/rep/slot@replica-3 -- receive -s -u tank/rep/class/replica-a-pg-1
T=$(token tank/rep/class/replica-a-pg-1)
run rep-send-dry-token zfs send -nvP -t "$T"
pipe rep-recv-resume cat send -t "$T" -- receive -s -u tank/rep/class/replica-a-pg-1
run rep-list-resumed zfs list -H -p -r -t filesystem,snapshot -o name,type,guid,receive_resume_token tank/rep/class/replica-a-pg-1

# An increment whose base the replica does not hold (it missed one).
zfs bookmark tank/rep/slot@replica-3 tank/rep/slot#replica-3
echo more >/tank/rep/slot/d; zfs snapshot tank/rep/slot@replica-4
zfs bookmark tank/rep/slot@replica-4 tank/rep/slot#replica-4
echo more >/tank/rep/slot/e; zfs snapshot tank/rep/slot@replica-5
pipe err-rep-recv-wrong-base cat send -i tank/rep/slot#replica-4 tank/rep/slot@replica-5 -- receive -s -u tank/rep/class/replica-a-pg-1

# Encrypted data, sent raw: from a bookmark too (OpenZFS keeps the ivset
# guid in bookmarks made since 2.0, which a raw increment needs).
printf 'correct horse battery staple\n' >/tmp/rep.key
zfs create -o encryption=on -o keyformat=passphrase -o keylocation=file:///tmp/rep.key tank/rep/enc
dd if=/dev/urandom of=/tank/rep/enc/a bs=1M count=4 2>/dev/null
zfs snapshot tank/rep/enc@replica-1
zfs bookmark tank/rep/enc@replica-1 tank/rep/enc#replica-1
pipe rep-recv-raw cat send -w tank/rep/enc@replica-1 -- receive -s -u -o canmount=noauto tank/rep/class/replica-e-pg-1
zfs destroy tank/rep/enc@replica-1
echo more >/tank/rep/enc/b; zfs snapshot tank/rep/enc@replica-2
pipe rep-recv-raw-incr cat send -w -i tank/rep/enc#replica-1 tank/rep/enc@replica-2 -- receive -s -u tank/rep/class/replica-e-pg-1
run rep-list-raw zfs list -H -p -r -t filesystem,snapshot -o name,type,guid,encryption,keystatus tank/rep/class/replica-e-pg-1

# The claim: the replica renamed to parked data's name, canmount back
# (set: canmount cannot be inherited).
run rep-rename zfs rename tank/rep/class/replica-a-pg-1 tank/rep/class/parked-a-pg-1
run err-rep-inherit-canmount zfs inherit canmount tank/rep/class/parked-a-pg-1
run rep-set-canmount zfs set canmount=on tank/rep/class/parked-a-pg-1
run rep-list-claimed zfs list -H -p -r -t filesystem,snapshot -o name,type,guid,canmount,mounted tank/rep/class/parked-a-pg-1
run rep-read-claimed sh -c 'zfs mount tank/rep/class/parked-a-pg-1 && sha256sum /tank/rep/class/parked-a-pg-1/a /tank/rep/slot/a'

cd "$O" && for f in rep-*.rc err-rep-*.rc; do n=${f%.rc}; printf '%-32s rc=%s  %s\n' "$n" "$(cat "$f")" "$(head -c 150 "$n.stderr" | tr '\n' ' ')"; done
