#!/usr/bin/env bash
# plot.sh - draw docs/performance-release.png, release latency against the
# slot count, from the "scale ... release_p50_ms=... release_p99_ms=..."
# lines of bench/vm.sh (stdin or the files given).
#
# usage: bench/vm.sh | tee results.txt; bench/plot.sh results.txt
set -euo pipefail
cd "$(dirname "$0")/.."
command -v gnuplot >/dev/null || { apt-get install -y -qq gnuplot-nox >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq gnuplot-nox >/dev/null; }; }
data=$(mktemp)
trap 'rm -f "$data"' EXIT
cat "$@" | sed -n 's/^scale slots=\([0-9]*\) \(policy=destroy \)\{0,1\}releases=[0-9]* release_p50_ms=\([0-9]*\) release_p99_ms=\([0-9]*\).*/\1 \3 \4/p' | sort -n >"$data"
[ -s "$data" ] || { echo "plot.sh: no release lines in the input" >&2; exit 1; }
gnuplot <<GP
set terminal pngcairo size 800,480 font "sans,11" noenhanced
set output "docs/performance-release.png"
set title "Release: task end to slot ready (real OpenZFS 2.1 in the e2e VM, real Nomad)"
set xlabel "slots on the node"
set ylabel "ms"
set logscale x
set xrange [0.7:2000]
set yrange [0:*]
set key top left
set grid
plot "$data" using 1:2 with linespoints lw 2 pt 7 title "p50", \
     "$data" using 1:3 with linespoints lw 2 pt 5 title "p99", \
     1000 with lines dt 2 lw 1.5 lc rgb "#7f3fbf" title "target p50 (1 s)", \
     2000 with lines dt 2 lw 1.5 lc rgb "#1f9f6f" title "target p99 (2 s)"
GP
echo "docs/performance-release.png"
