#!/usr/bin/env bash
# nomad-bin.sh - print the path of the Nomad agent binary the tests, the demo
# and the benchmarks run.
#
# NOMAD_BIN=/path/to/nomad: the operator's own agent (1.10, 1.11, ...), used as
# it is; this script never downloads or builds it.
#
# Otherwise Nomad v1.6.2, the newest release under the Mozilla Public Licence
# 2.0 (from v1.7.0 on, Nomad's root licence is the Business Source License),
# built once from the Go module proxy and cached. No other version is built:
# a NOMAD_VERSION that is not an MPL-2.0 release is refused.
#
# The binary is built from a throw-away tools module that requires
# github.com/hashicorp/nomad v1.6.2, with Nomad's own go.mod requirements and
# replaces, except the in-tree "./api" replace (it cannot be used outside
# Nomad's repository): the api module is pinned to the pseudo-version of
# v1.6.2's own commit (the older one Nomad's go.mod names lacks
# api.ACLOIDCCompleteAuthRequest).
#
# Env: NOMAD_BIN       an agent binary to use instead (printed as given)
#      NOMAD_VERSION   v1.6.2 (the default, and the only one built)
#      NDZ_CACHE       cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/nomad-device-zfs)
set -euo pipefail
if [ -n "${NOMAD_BIN:-}" ]; then
	[ -x "$NOMAD_BIN" ] || { echo "nomad-bin: NOMAD_BIN=$NOMAD_BIN is not an executable file" >&2; exit 1; }
	case $NOMAD_BIN in /*) echo "$NOMAD_BIN" ;; *) echo "$PWD/$NOMAD_BIN" ;; esac
	exit 0
fi
version=${NOMAD_VERSION:-v1.6.2}
case $version in
v1.6.2) api_version=v0.0.0-20230913164725-73e372ad9403 ;;
*)
	echo "nomad-bin: NOMAD_VERSION=$version is not built here: only v1.6.2 (MPL-2.0; Nomad is under the Business Source License from v1.7.0). Give your own agent with NOMAD_BIN=/path/to/nomad" >&2
	exit 1
	;;
esac
cache=${NDZ_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nomad-device-zfs}
bin=$cache/nomad/$version/nomad
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
log() { echo "nomad-bin: [$SECONDS s] $*" >&2; }
mkdir -p "$cache/nomad"
exec 9>"$cache/nomad/.lock" && flock 9          # one build at a time
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi

work=$cache/nomad/$version.build
rm -rf "$work"; mkdir -p "$work"
log "building Nomad $version from the module proxy (about 9 minutes on 2 cores)"
nomad_dir=$(cd "$work" && go mod download -json "github.com/hashicorp/nomad@$version" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -f "$nomad_dir/go.mod" ] || { log "cannot download github.com/hashicorp/nomad@$version"; exit 1; }
grep -q 'Mozilla Public License' "$nomad_dir/LICENSE" ||
	{ log "github.com/hashicorp/nomad@$version: its LICENSE is not the MPL-2.0; not built"; exit 1; }
{
	echo "module nomad-device-zfs.local/nomad-build"
	echo
	sed -n 's/^go \(.*\)/go \1/p' "$nomad_dir/go.mod"
	echo
	echo "require github.com/hashicorp/nomad $version"
	echo
	# Nomad's requirements and replaces, without the in-tree api replace.
	sed -e '/^module /d' -e '/^go /d' -e '/^toolchain /d' \
		-e '/github.com\/hashicorp\/nomad\/api => \.\/api/d' "$nomad_dir/go.mod"
	echo
	echo "replace github.com/hashicorp/nomad/api => github.com/hashicorp/nomad/api $api_version"
} >"$work/go.mod"
cd "$work"
GOFLAGS=-mod=mod go mod download github.com/hashicorp/nomad >/dev/null 2>&1 || true
# With cgo whatever the caller exports (scripts/e2e.sh builds its own
# binaries static, CGO_ENABLED=0): runc's nsenter, which Nomad's exec
# drivers link, has no files without it.
CGO_ENABLED=1 GOFLAGS=-mod=mod go build -trimpath -o "$work/nomad" github.com/hashicorp/nomad >"$work/build.log" 2>&1 ||
	{ tail -n 40 "$work/build.log" >&2; exit 1; }
mkdir -p "${bin%/*}"
mv "$work/nomad" "$bin.tmp" && mv "$bin.tmp" "$bin"
rm -rf "$work"
log "built $bin ($("$bin" version | head -n1))"
echo "$bin"
