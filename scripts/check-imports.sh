#!/usr/bin/env bash
# check-imports.sh - the package boundaries the design relies on.
#   zfs/        imports nothing from Nomad (it is the ZFS seam, nothing else)
#   scheduler/  runs no processes (pure placement logic over Nomad's structs)
#   model/      the pure slot model: no context, no processes, no I/O, no
#               Nomad plugin or gRPC types; and, through everything it links
#               (go list -deps), no process, network, HTTP, Nomad or gRPC
#               package (only the zfs package's data types and rules)
#   sim/        runs no processes either: zfs is the in-process fake, Nomad's API a socket
#   hooks/      knows no Nomad plugin or gRPC types (the Manager acts on the model)
#   internal/nomadapi/  the one Nomad HTTP API client: it imports nothing of the
#               project's, and no other package linked into the binaries makes
#               an api client or sends a raw request of its own
#   transfer/   reaches Nomad through internal/nomadapi, not the watcher
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
deps() { go list -deps "$1" 2>/dev/null; }
if deps ./zfs | grep -q '^github.com/hashicorp/nomad'; then
	echo "zfs/ must not import Nomad packages"; fail=1
fi
if [ -d scheduler ] && go list -f '{{join .Imports "\n"}}' ./scheduler/... | grep -qx 'os/exec'; then
	echo "scheduler/ must not run processes (imports os/exec)"; fail=1
fi
if [ -d sim ] && go list -f '{{join .Imports "\n"}}{{"\n"}}{{join .TestImports "\n"}}' ./sim/... | grep -qx 'os/exec'; then
	echo "sim/ must not run processes (imports os/exec)"; fail=1
fi
if go list -f '{{join .Imports "\n"}}' ./hooks/... | grep -qE '^github.com/hashicorp/nomad/plugins|^google.golang.org/grpc'; then
	echo "hooks/ must not import Nomad plugin or gRPC packages"; fail=1
fi
if go list -f '{{join .Imports "\n"}}' ./model | grep -qE '^(context|os|os/exec|net|net/http|io/fs|github.com/hashicorp/nomad/plugins.*|google.golang.org/grpc.*)$'; then
	echo "model/ must stay pure: no context, processes, files, network, plugin or gRPC packages"; fail=1
fi
if bad=$(deps ./model | grep -E '^(os/exec|net|net/http|github.com/hashicorp/.*|google.golang.org/grpc.*)$'); then
	echo "model/ must link no process, network, HTTP, Nomad or gRPC package; it does, through its imports:"
	echo "$bad" | sed 's/^/  /'; fail=1
fi
if go list -f '{{join .Imports "\n"}}' ./model | grep -q 'nomad-device-zfs/\(hooks\|plugin\|cli\|allocwatch\)'; then
	echo "model/ must not import the layers above it, nor the Nomad seam"; fail=1
fi
if bad=$(deps ./internal/nomadapi | grep '^github.com/nomad-device-zfs/' | grep -vx 'github.com/nomad-device-zfs/nomad-device-zfs/internal/nomadapi'); then
	echo "internal/nomadapi/ must import nothing of the project's (it is the Nomad API seam); it links:"
	echo "$bad" | sed 's/^/  /'; fail=1
fi
if bad=$(grep -nE 'api\.NewClient\(|\.Raw\(\)' $(git ls-files '*.go' | grep -v '_test\.go$' | grep -vE '^(internal/nomadapi|internal/nomadtest|e2e|bench)/')); then
	echo "only internal/nomadapi makes a Nomad API client or a raw request (internal/nomadtest and e2e/ drive test agents):"
	echo "$bad" | sed 's/^/  /'; fail=1
fi
if go list -f '{{join .Imports "\n"}}' ./transfer/... | grep -qx 'github.com/nomad-device-zfs/nomad-device-zfs/allocwatch'; then
	echo "transfer/ must not import allocwatch: it reaches Nomad through internal/nomadapi"; fail=1
fi
if grep -n 'time\.Now()' model/*.go | grep -v _test.go; then
	echo "model/ takes the time as an argument; it never reads the clock"; fail=1
fi
[ $fail = 0 ] && echo "import boundaries ok"
exit $fail
