#!/usr/bin/env bash
# nomad-bin.sh - print the path of a Nomad agent binary of NOMAD_VERSION,
# building it from the Go module proxy the first time and caching it.
#
# The binary is built from a throw-away tools module that requires
# github.com/hashicorp/nomad at the pinned version, with Nomad's own go.mod
# requirements and replaces, except the api submodule, which is pinned to a
# pseudo-version the module proxy serves (the in-tree "./api" replace cannot
# be used outside Nomad's repository).
#
# Env: NOMAD_VERSION   (default v1.11.3)
#      NDZ_CACHE       cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/nomad-device-zfs)
set -euo pipefail
version=${NOMAD_VERSION:-v1.11.3}
api_version=v0.0.0-20260907080526-08ef8f3d26da
cache=${NDZ_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nomad-device-zfs}
bin=$cache/nomad/$version/nomad
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
log() { echo "nomad-bin: [$SECONDS s] $*" >&2; }
mkdir -p "$cache/nomad"
exec 9>"$cache/nomad/.lock" && flock 9          # one build at a time
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi

work=$cache/nomad/$version.build
rm -rf "$work"; mkdir -p "$work"
log "building Nomad $version from the module proxy (about 6 minutes on 2 cores)"
nomad_dir=$(cd "$work" && go mod download -json "github.com/hashicorp/nomad@$version" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -f "$nomad_dir/go.mod" ] || { log "cannot download github.com/hashicorp/nomad@$version"; exit 1; }
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
GOFLAGS=-mod=mod go build -trimpath -o "$work/nomad" github.com/hashicorp/nomad >"$work/build.log" 2>&1 ||
	{ tail -n 40 "$work/build.log" >&2; exit 1; }
mkdir -p "${bin%/*}"
mv "$work/nomad" "$bin.tmp" && mv "$bin.tmp" "$bin"
rm -rf "$work"
log "built $bin ($("$bin" version | head -n1))"
echo "$bin"
