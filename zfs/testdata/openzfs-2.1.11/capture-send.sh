# capture-send.sh - what zfs send and zfs receive print on OpenZFS 2.1.11:
# dry-run estimates, resume tokens and their contents, the errors the
# transfer classifies. capture.sh runs it last; alone, on a fresh pool tank:
#   NDZ_VM_POOL=tank e2e/vm/run-in-vm.sh DIR 'sh capture-send.sh'
# For each NAME: NAME.stdout, NAME.stderr, NAME.rc; for a pipe also
# NAME.send.stderr and NAME.send.rc (the sending side).
set +e
O=${O:-$PWD/out}; mkdir -p "$O"
run() { name=$1; shift; "$@" >"$O/$name.stdout" 2>"$O/$name.stderr"; echo $? >"$O/$name.rc"; }
# pipe NAME FILTER SEND-ARGS -- RECEIVE-ARGS: zfs send | FILTER | zfs receive
pipe() {
	name=$1 filter=$2; shift 2
	send=""; while [ "$1" != -- ]; do send="$send $1"; shift; done; shift
	{ zfs $send 2>"$O/$name.send.stderr"; echo $? >"$O/$name.send.rc"; } | sh -c "$filter" |
		zfs "$@" >"$O/$name.stdout" 2>"$O/$name.stderr"; echo $? >"$O/$name.rc"
}
token() { zfs get -H -o value receive_resume_token "$1"; }

zfs create tank/xfer
zfs create tank/xfer/src
dd if=/dev/urandom of=/tank/xfer/src/a bs=1M count=8 2>/dev/null
zfs snapshot tank/xfer/src@s1
zfs bookmark tank/xfer/src@s1 tank/xfer/src#b1
dd if=/dev/urandom of=/tank/xfer/src/b bs=1M count=2 2>/dev/null
zfs snapshot tank/xfer/src@s2
dd if=/dev/urandom of=/tank/xfer/src/c bs=1M count=1 2>/dev/null
zfs snapshot tank/xfer/src@s3
run bookmark-exists zfs bookmark tank/xfer/src@s1 tank/xfer/src#b1
run list-bookmarks zfs list -H -p -r -t bookmark -o name,guid,createtxg tank/xfer
run list-snap-guids zfs list -H -p -r -t snapshot -o name,guid,createtxg tank/xfer

# Estimates (-nvP prints to stdout).
run send-dry-full zfs send -nvP tank/xfer/src@s1
run send-dry-incr zfs send -nvP -i tank/xfer/src@s1 tank/xfer/src@s2
run send-dry-incr-short zfs send -nvP -i @s1 tank/xfer/src@s2
run send-dry-bookmark zfs send -nvP -i tank/xfer/src#b1 tank/xfer/src@s2
run send-dry-intermediate zfs send -nvP -I @s1 tank/xfer/src@s3
run send-dry-flags zfs send -nvP -L -e -c tank/xfer/src@s1

# A full receive, unmounted, with the plugin's properties; then incrementals.
pipe recv-full cat send tank/xfer/src@s1 -- receive -s -u -o canmount=noauto -o nomad-device-zfs:owner=demo tank/xfer/dst
run get-recv-props zfs get -H -p -o name,property,value,source canmount,mounted,nomad-device-zfs:owner,receive_resume_token tank/xfer/dst
pipe recv-incr cat send -i tank/xfer/src#b1 tank/xfer/src@s2 -- receive -s -u tank/xfer/dst
run list-recv zfs list -H -p -r -t filesystem,snapshot -o name,type,guid,mounted,receive_resume_token tank/xfer/dst

# Errors of receive.
pipe err-recv-exists cat send tank/xfer/src@s1 -- receive -s -u tank/xfer/dst
pipe err-recv-incr-mismatch cat send -i tank/xfer/src@s2 tank/xfer/src@s3 -- receive -s -u tank/xfer/other-not-there
pipe recv-base-only cat send tank/xfer/src@s1 -- receive -s -u tank/xfer/dst2
pipe err-recv-incr-mismatch2 cat send -i tank/xfer/src@s2 tank/xfer/src@s3 -- receive -s -u tank/xfer/dst2
pipe err-recv-snap-exists cat send -i tank/xfer/src@s1 tank/xfer/src@s2 -- receive -s -u tank/xfer/dst
zfs mount tank/xfer/dst2; echo x >/tank/xfer/dst2/modified; zfs unmount tank/xfer/dst2
pipe err-recv-modified cat send -i tank/xfer/src@s1 tank/xfer/src@s2 -- receive -s -u tank/xfer/dst2
pipe err-recv-no-parent cat send tank/xfer/src@s1 -- receive -s -u tank/xfer/missing/child
pipe err-recv-garbage 'head -c 4096 /dev/urandom' send tank/xfer/src@s1 -- receive -s -u tank/xfer/garbage
pipe err-recv-empty 'cat >/dev/null' send tank/xfer/src@s1 -- receive -s -u tank/xfer/empty

# Errors of send.
run err-send-no-snap zfs send tank/xfer/src@nope
run err-send-no-fs zfs send tank/xfer/nope@s1
run err-send-bad-from zfs send -i @s3 tank/xfer/src@s1
run err-send-from-missing zfs send -i @nope tank/xfer/src@s2
run err-send-I-bookmark zfs send -I tank/xfer/src#b1 tank/xfer/src@s3
pipe err-send-broken-pipe 'head -c 65536 >/dev/null' send tank/xfer/src@s1 -- list -H -o name tank/xfer

# Interrupted full receive: the partial state, its token, and resuming it.
pipe err-recv-interrupted 'head -c 3000000' send tank/xfer/src@s1 -- receive -s -u -o canmount=noauto -o nomad-device-zfs:owner=demo tank/xfer/part
run list-partial zfs list -H -p -r -t all -o name,type,guid,mounted,receive_resume_token tank/xfer
run get-partial-props zfs get -H -p -o name,property,value,source canmount,nomad-device-zfs:owner,inconsistent tank/xfer/part
T=$(token tank/xfer/part)
run send-dry-token zfs send -nvP -t "$T"
run send-dry-token-verbose zfs send -nv -t "$T"
pipe err-recv-partial-exists cat send tank/xfer/src@s1 -- receive -s -u tank/xfer/part
run err-send-token-with-i zfs send -i @s1 -t "$T"
pipe recv-resume cat send -t "$T" -- receive -s -u tank/xfer/part
run list-resumed zfs list -H -p -r -t filesystem,snapshot -o name,type,guid,mounted,receive_resume_token tank/xfer/part
run get-resumed-props zfs get -H -p -o name,property,value,source canmount,nomad-device-zfs:owner tank/xfer/part

# Interrupted incremental receive, resumed; then one aborted.
pipe err-recv-interrupted-incr 'head -c 600000' send -i tank/xfer/src@s1 tank/xfer/src@s2 -- receive -s -u tank/xfer/part
run list-partial-incr zfs list -H -p -r -t all -o name,type,guid,mounted,receive_resume_token tank/xfer/part
T=$(token tank/xfer/part)
run send-dry-token-incr zfs send -nvP -t "$T"
pipe recv-resume-incr cat send -t "$T" -- receive -s -u tank/xfer/part
pipe err-recv-interrupted-incr2 'head -c 300000' send -i tank/xfer/src@s2 tank/xfer/src@s3 -- receive -s -u tank/xfer/part
run recv-abort zfs receive -A tank/xfer/part
run list-aborted zfs list -H -p -r -t all -o name,type,receive_resume_token tank/xfer/part
run err-recv-abort-none zfs receive -A tank/xfer/part
run err-recv-abort-missing zfs receive -A tank/xfer/nope
pipe err-recv-interrupted-full2 'head -c 300000' send tank/xfer/src@s1 -- receive -s -u tank/xfer/part2
run recv-abort-full zfs receive -A tank/xfer/part2
run list-aborted-full zfs list -H -p -o name tank/xfer/part2

# Tokens that are not what they say: corrupt, or naming a snapshot gone.
run err-send-token-corrupt zfs send -t 1-0123456789-40-789c
run err-send-token-garbage zfs send -nvP -t not-a-token
pipe err-recv-interrupted-s3 'head -c 300000' send tank/xfer/src@s3 -- receive -s -u tank/xfer/part3
T=$(token tank/xfer/part3)
zfs destroy tank/xfer/src@s3
run err-send-token-gone zfs send -t "$T"
zfs snapshot tank/xfer/src@s3
run err-send-token-replaced zfs send -t "$T"

# The sending side killed mid-stream (what a crashed plugin does).
mkfifo /tmp/xfer.fifo
zfs receive -s -u tank/xfer/killed </tmp/xfer.fifo >"$O/err-recv-sender-killed.stdout" 2>"$O/err-recv-sender-killed.stderr" &
rp=$!
zfs send tank/xfer/src@s1 >/tmp/xfer.fifo &
sp=$!
sleep 1; kill -9 $sp; wait $rp; echo $? >"$O/err-recv-sender-killed.rc"
run list-killed zfs list -H -p -o name,receive_resume_token tank/xfer/killed

# Out of space.
truncate -s 64M /tmp/small.img; zpool create -O mountpoint=/small small /tmp/small.img
dd if=/dev/urandom of=/tank/xfer/src/big bs=1M count=80 2>/dev/null; zfs snapshot tank/xfer/src@big
pipe err-recv-nospace cat send tank/xfer/src@big -- receive -s -u small/big
run list-nospace zfs list -H -p -r -t all -o name,receive_resume_token small
zpool destroy small

# Encryption: raw sends keep the key at home.
printf 'correct horse battery staple\n' >/tmp/xfer.key
zfs create -o encryption=on -o keyformat=passphrase -o keylocation=file:///tmp/xfer.key tank/xfer/enc
dd if=/dev/urandom of=/tank/xfer/enc/a bs=1M count=4 2>/dev/null
zfs snapshot tank/xfer/enc@s1
echo more >/tank/xfer/enc/b; zfs snapshot tank/xfer/enc@s2
run send-dry-raw zfs send -nvP -w tank/xfer/enc@s1
run send-dry-enc-plain zfs send -nvP tank/xfer/enc@s1
pipe recv-raw cat send -w tank/xfer/enc@s1 -- receive -s -u -o canmount=noauto tank/xfer/encdst
run get-raw-dst zfs get -H -p -o name,property,value,source encryption,keystatus,keyformat,keylocation,encryptionroot,canmount tank/xfer/encdst
pipe recv-raw-incr cat send -w -i @s1 tank/xfer/enc@s2 -- receive -s -u tank/xfer/encdst
pipe err-recv-plain-onto-raw cat send -i @s1 tank/xfer/enc@s2 -- receive -s -u tank/xfer/encdst
pipe err-recv-interrupted-raw 'head -c 500000' send -w tank/xfer/enc@s1 -- receive -s -u tank/xfer/encpart
T=$(token tank/xfer/encpart)
run send-dry-token-raw zfs send -nvP -t "$T"
pipe recv-resume-raw-w cat send -w -t "$T" -- receive -s -u tank/xfer/encpart
run get-raw-resumed zfs get -H -p -o name,property,value encryption,keystatus tank/xfer/encpart
run load-key-dst zfs load-key -L file:///tmp/xfer.key tank/xfer/encdst
run mount-dst zfs mount tank/xfer/encdst
run read-dst sha256sum /tank/xfer/encdst/a /tank/xfer/enc/a
zfs unmount tank/xfer/enc; zfs unload-key tank/xfer/enc
run err-send-enc-unloaded zfs send tank/xfer/enc@s1
run send-dry-raw-unloaded zfs send -nvP -w tank/xfer/enc@s1
pipe err-recv-raw-o-encryption cat send -w tank/xfer/enc@s1 -- receive -s -u -o encryption=off tank/xfer/encdst2

# A volume's stream: excluding a property only a filesystem has (-x
# canmount -x mountpoint, as the transfer always does) only warns, and the
# volume is received; setting one (-o quota, as a class may) refuses the
# stream before anything is written.
zfs create -V 4M tank/xfer/vol
zfs snapshot tank/xfer/vol@s1
pipe recv-volume-x cat send tank/xfer/vol@s1 -- receive -s -u -x canmount -x mountpoint tank/xfer/voldst
pipe err-recv-volume-o cat send tank/xfer/vol@s1 -- receive -s -u -o quota=64M tank/xfer/voldst2
run list-after-volume zfs list -H -r -t all -o name,type tank/xfer

cd "$O" && for f in *.rc; do n=${f%.rc}; printf '%-32s rc=%s  %s\n' "$n" "$(cat "$f")" "$(head -c 150 "$n.stderr" | tr '\n' ' ')"; done
