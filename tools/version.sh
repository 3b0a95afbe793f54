#!/usr/bin/env bash
# version.sh - print the version to stamp into the plugin binary
# (plugin.Version, which PluginInfo and `nomad-device-zfs version` report).
#
# Nomad refuses to load a plugin whose version does not parse as a semantic
# version (hashicorp/go-version), so a bare commit hash will not do:
#   on a release tag          v0.2.0
#   past a tag                v0.2.0-3-g1a2b3c4       (git describe)
#   no v* tag in the history  v0.0.0-g1a2b3c4         (sorts below any release)
#   not a git checkout        v0.0.0-unknown
# each with -dirty appended when the work tree has uncommitted changes.
set -euo pipefail
cd "$(dirname "$0")/.."
if v=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
	echo "$v"
elif h=$(git describe --always --dirty 2>/dev/null); then
	echo "v0.0.0-g$h"
else
	echo v0.0.0-unknown
fi
