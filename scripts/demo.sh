#!/usr/bin/env bash
# demo.sh - the product end to end: a real Nomad agent with this plugin on
# real OpenZFS hands a job its own dataset.  `make demo` runs it.
#
# With ZFS on this machine (/dev/zfs and a working zpool) the demo uses a
# throw-away pool on a sparse file here; otherwise it boots the e2e VM
# (e2e/vm/run-in-vm.sh: QEMU, OpenZFS 2.1) with a pool "tank" and runs there.
# Needs root and Go; builds the plugin, gets Nomad from tools/nomad-bin.sh
# (cached), and cleans up after itself.  No stdin is read (CI-safe).
#
# Steps: slots (the plugin creates and fingerprints them), job (an exec job
# writes through the dataset mounted at /data), data (on the host dataset),
# release (the job is stopped and its slot comes back fresh).  The steps run
# in a POSIX sh script, written below into the work dir, as root next to ZFS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
t0=$SECONDS
die() { printf 'demo: FAILED: %s\n' "$*" >&2; exit 1; }

# The work dir is shared into the VM at the same path.  It holds the plugin
# (plugins/, the plugin_dir), Nomad and the guest script, not the guest's /usr: Nomad's
# exec driver copies /usr into every task dir.
work=$(mktemp -d "${TMPDIR:-/tmp}/ndz-demo.XXXXXX")
pool=
cleanup() {
	if [ -n "$pool" ]; then zpool destroy -f "$pool" >/dev/null 2>&1 || echo "demo: could not destroy pool $pool" >&2; fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

printf '==> build\n'
# The plugin alone in plugin_dir: Nomad 1.6 launches every file there.
mkdir -p "$work/plugins"
CGO_ENABLED=0 go build -trimpath -o "$work/plugins/nomad-device-zfs" ./cmd/nomad-device-zfs ||
	die "building the plugin (go build ./cmd/nomad-device-zfs)"
nomad=$(tools/nomad-bin.sh) || die "getting the Nomad binary (tools/nomad-bin.sh)"
cp "$nomad" "$work/nomad"
echo "plugin and Nomad $("$work/nomad" version | sed -n '1s/^Nomad //p') in $work ($((SECONDS - t0)) s)"

cat >"$work/demo-guest.sh" <<'GUEST'
#!/bin/sh
# demo-guest.sh POOL DIR - the demo's steps, as root next to ZFS (busybox sh
# in the VM, or the host's sh).  POOL exists; DIR holds nomad and the plugin.
set -eu
pool=$1 dir=$2
parent=$pool/nomad
port=24646 # http; rpc and serf are the next two
export NOMAD_ADDR=http://127.0.0.1:$port NOMAD_CLI_SHOW_HINTS=0 # no "View ... in the Web UI"
exec 2>&1 # one stream: run-in-vm.sh replays stdout, then stderr
data=$(mktemp -d /tmp/ndz-demo-nomad.XXXXXX) # data_dir: tmpfs in the VM
nomad=$data/nomad
agent=
begun=$(date +%s)

step() { printf '\n==> %s\n' "$*"; }
elapsed() { echo "$(($(date +%s) - begun)) s"; }
fail() {
	echo "demo: FAILED: $*" >&2
	if [ -s "$data/agent.log" ]; then
		echo "--- the last 30 lines of the Nomad agent log:" >&2
		tail -n 30 "$data/agent.log" >&2
	fi
	exit 1
}
stop_agent() {
	[ -n "$agent" ] || return 0
	kill -INT "$agent" 2>/dev/null || true
	i=0
	while kill -0 "$agent" 2>/dev/null && [ $i -lt 60 ]; do sleep 0.5; i=$((i + 1)); done
	kill -KILL "$agent" 2>/dev/null || true
	agent=
}
cleanup() {
	# On a failure: stop the job first, or its task would outlive the agent.
	if [ -n "$agent" ] && "$nomad" job status demo >/dev/null 2>&1; then
		"$nomad" job stop -purge -detach demo >/dev/null 2>&1 || true
		i=0
		while "$nomad" job status demo >/dev/null 2>&1 && [ $i -lt 30 ]; do sleep 0.5; i=$((i + 1)); done
		sleep 2
	fi
	stop_agent
	# Task secrets dirs and the like are mounts below the data dir.
	awk -v d="$data/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r |
		while read -r m; do umount -l "$m" 2>/dev/null || true; done
	rm -rf "$data"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Poll every 0.5 s, for up to $1 seconds, until the command "$2..."
# succeeds; fail if the agent died meanwhile.
wait_for() {
	deadline=$(($(date +%s) + $1)); shift
	until "$@"; do
		[ -z "$agent" ] || kill -0 "$agent" 2>/dev/null || fail "the Nomad agent exited"
		[ "$(date +%s)" -lt "$deadline" ] || return 1
		sleep 0.5
	done
}

# The CLI is a 146 MB binary; run from tmpfs, not from the 9p share.
cp "$dir/nomad" "$nomad"

step "slots: a Nomad agent with the plugin, parent $parent"
zfs create "$parent" || fail "zfs create $parent"
cat >"$data/agent.hcl" <<HCL
name                 = "ndz-demo"
data_dir             = "$data"
plugin_dir           = "$dir/plugins"
bind_addr            = "127.0.0.1"
log_level            = "INFO"
disable_update_check = true
ports {
  http = $port
  rpc  = $((port + 1))
  serf = $((port + 2))
}
advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}
server {
  enabled          = true
  bootstrap_expect = 1
}
client {
  enabled           = true
  network_interface = "lo"
  options {
    "fingerprint.denylist"   = "env_aws,env_gce,env_azure,env_digitalocean"
    "driver.raw_exec.enable" = "1"
  }
}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
plugin "nomad-device-zfs" {
  config {
    parent        = "$parent"
    scan_interval = "5s"
    nomad {
      address = "$NOMAD_ADDR"
    }
    class "scratch" {
      slots = 2
      properties {
        quota       = "64M"
        compression = "lz4"
      }
      mount = "/data"
    }
  }
}
HCL
"$nomad" agent -config "$data/agent.hcl" >"$data/agent.log" 2>&1 &
agent=$!

# zfs/dataset/scratch[scratch-1:true scratch-2:true]
devices() {
	"$nomad" node status -self -t '{{range .NodeResources.Devices}}{{.Vendor}}/{{.Type}}/{{.Name}}[{{range $i, $d := .Instances}}{{if $i}} {{end}}{{$d.ID}}:{{$d.Healthy}}{{end}}]{{"\n"}}{{end}}' 2>/dev/null
}
two_healthy() { [ "$(devices | grep '^zfs/dataset/scratch\[' | grep -o ':true' | wc -l)" -eq 2 ]; }
wait_for 120 two_healthy || fail "no 2 healthy instances of zfs/dataset/scratch after 120 s: $(devices)"
echo "node ready with $(devices) after $(elapsed)"
zfs list -o name,used,quota,mountpoint,nomad-device-zfs:state -r "$parent"
echo
"$nomad" node status -self -verbose |
	awk '/^Device (Group Attributes|Resource Utilization)/ {if (n++) print ""; p = 1} /^$/ {p = 0} p'

step "job: an exec batch job asks for device \"zfs/dataset/scratch\""
# The task writes, shows its mount, then runs until the job is stopped.
job() {
	cat <<HCL
job "demo" {
  type = "batch"
  group "g" {
    task "write" {
      driver = "$1"
      config {
        command = "/bin/sh"
        args = ["-c", <<-EOT
          echo "hello from allocation \$NOMAD_ALLOC_ID" > $2/hello.txt
          cat $2/hello.txt
          grep ' /data ' /proc/mounts || echo "(raw_exec: no mount, \$ZFS_SCRATCH_DATASET is at $2)"
          exec sleep 3600
        EOT
        ]
      }
      resources {
        device "zfs/dataset/scratch" {}
      }
    }
  }
}
HCL
}
alloc_id() { "$nomad" job allocs -t '{{range .}}{{if eq .DesiredStatus "run"}}{{.ID}}{{end}}{{end}}' demo 2>/dev/null; }
# The task has written and printed: its stdout names hello.txt's content.
task_wrote() { id=$(alloc_id) && [ -n "$id" ] && "$nomad" alloc logs "$id" write 2>/dev/null | grep -q '^hello from'; }
job exec /data >"$data/demo.nomad.hcl"
echo "job \"demo\": driver exec, writes /data/hello.txt"
"$nomad" job run -detach "$data/demo.nomad.hcl" >/dev/null || fail "nomad job run"
driver=exec via=/data
if ! wait_for 90 task_wrote; then
	why=$("$nomad" alloc status "$(alloc_id)" 2>&1 | sed -n '/^Recent Events/,$p' | sed -n 3p)
	echo "exec did not run here (${why:-no allocation}); falling back to raw_exec, which writes to \$ZFS_SCRATCH_HOST_PATH"
	"$nomad" job stop -purge -detach demo >/dev/null || true
	no_alloc() { [ -z "$(alloc_id)" ]; }
	wait_for 30 no_alloc || fail "the exec job's allocation did not go away"
	job raw_exec '$ZFS_SCRATCH_HOST_PATH' >"$data/demo.nomad.hcl"
	"$nomad" job run -detach "$data/demo.nomad.hcl" >/dev/null || fail "nomad job run (raw_exec)"
	driver=raw_exec via='$ZFS_SCRATCH_HOST_PATH'
	echo "job \"demo\": driver raw_exec, writes \$ZFS_SCRATCH_HOST_PATH/hello.txt ($(elapsed))"
	wait_for 90 task_wrote || fail "the raw_exec job did not write either: $("$nomad" alloc status "$(alloc_id)" 2>&1 | tail -n 5)"
fi
id=$(alloc_id)
slot=$("$nomad" alloc status -t '{{range .AllocatedResources.Tasks.write.Devices}}{{index .DeviceIDs 0}}{{end}}' "$id")
[ -n "$slot" ] || fail "allocation $id holds no device"
ds=$parent/scratch/$slot
echo "allocation ${id%%-*} runs on zfs/dataset/scratch[$slot] after $(elapsed)"
echo "\$ nomad alloc status ${id%%-*}   (its devices)"
"$nomad" alloc status -t '{{range $t, $r := .AllocatedResources.Tasks}}{{range $r.Devices}}  task {{$t}}: {{.Vendor}}/{{.Type}}/{{.Name}} {{.DeviceIDs}}{{"\n"}}{{end}}{{end}}' "$id"
echo "\$ nomad alloc logs ${id%%-*} write"
"$nomad" alloc logs "$id" write | sed 's/^/  /'

step "data: on the host, in dataset $ds"
mnt=$(zfs get -H -o value mountpoint "$ds")
echo "\$ cat $mnt/hello.txt"
cat "$mnt/hello.txt" | sed 's/^/  /'
grep -q "^hello from allocation $id" "$mnt/hello.txt" || fail "$mnt/hello.txt is not the task's"
zpool sync "$pool" # so that used counts the write
zfs list -o name,used,quota,mountpoint,nomad-device-zfs:state,nomad-device-zfs:holder -r "$parent/scratch"

step "release: the job is stopped, its slot comes back fresh"
gen=$(zfs get -H -o value nomad-device-zfs:generation "$ds")
"$nomad" job stop -detach demo >/dev/null || fail "nomad job stop"
released() {
	[ "$(zfs get -H -o value nomad-device-zfs:state "$ds" 2>/dev/null)" = ready ] &&
		[ "$(zfs get -H -o value nomad-device-zfs:generation "$ds" 2>/dev/null)" != "$gen" ]
}
wait_for 60 released || fail "$ds was not released within 60 s of the stop: $(zfs get -H -o value nomad-device-zfs:state "$ds" 2>&1)"
echo "$ds released (generation $gen -> $(zfs get -H -o value nomad-device-zfs:generation "$ds")) after $(elapsed)"
[ ! -e "$mnt/hello.txt" ] || fail "$mnt/hello.txt is still there after the release"
echo "\$ ls -A $mnt"
ls -A "$mnt" | sed 's/^/  /'
echo "(empty: the default release policy destroys the holder's data; see docs/configuration.md, class.release)"
zfs list -o name,used,quota,mountpoint,nomad-device-zfs:state -r "$parent/scratch"
stop_agent
echo
echo "demo: OK: 2 slots of $parent/scratch fingerprinted; the $driver job wrote through $via into $ds; stopped, the slot was released fresh ($(elapsed) on $(uname -n))"
GUEST

if [ -e /dev/zfs ] && zpool list >/dev/null 2>&1; then
	# ZFS here: a throw-away pool on a sparse file, mounted in the work dir.
	pool=ndzdemo
	! zpool list "$pool" >/dev/null 2>&1 || { pool=; die "a pool named ndzdemo exists already"; }
	truncate -s 1G "$work/$pool.img"
	zpool create -o cachefile=none -m "$work/$pool" "$pool" "$work/$pool.img" || { pool=; die "zpool create"; }
	printf '==> ZFS on this host: pool %s on a sparse file\n' "$pool"
	rc=0
	sh "$work/demo-guest.sh" "$pool" "$work" </dev/null || rc=$?
else
	printf '==> no ZFS on this host: booting the e2e VM (QEMU, OpenZFS 2.1) with pool tank\n'
	rc=0
	NDZ_VM_POOL=tank NDZ_VM_TIMEOUT=${NDZ_VM_TIMEOUT:-600} \
		e2e/vm/run-in-vm.sh "$work" sh ./demo-guest.sh tank "$work" || rc=$?
fi
case $rc in
0) ;;
125) die "the VM did not report an exit status (see above)" ;;
*) die "a step failed (exit status $rc); see above" ;;
esac
echo "demo: total $((SECONDS - t0)) s"
