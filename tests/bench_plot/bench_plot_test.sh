#!/usr/bin/env bash
# scripts/bench-plot on canned benchmark output (tests/bench_plot/*_output.txt, printed by
# bench_accept and bench_publisher): the SVG has a panel per axis, a line per series and
# side, and leaves out the cases that are neither threads nor batch sizes. Skips (77)
# where gnuplot is not installed (scripts/setup installs it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
plot="$here/../../scripts/bench-plot"
command -v gnuplot >/dev/null || { echo "gnuplot not installed: skipped"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
contains() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2'"; }
lacks() { ! grep -qF -- "$2" "$1" || fail "$1 has '$2'"; }

"$plot" "$out/accept.svg" bench_accept <"$here/accept_output.txt"
contains "$out/accept.svg" "<svg"
contains "$out/accept.svg" "</svg>"
for text in "bench_accept" "threads" "batch size" "msg/s (median)" "rows/s (median)" \
  "accept boxcar" "accept baseline" "accept_many boxcar" "accept_many baseline" "> 16<" "> 1000<"; do
  contains "$out/accept.svg" "$text"
done
lacks "$out/accept.svg" "accept_t16_off"  # neither threads nor batch: left out

"$plot" "$out/publisher.svg" <"$here/publisher_output.txt"
for text in "publisher" "batch size" "events/s (median)" "publish boxcar" "publish baseline" "> 5000<"; do
  contains "$out/publisher.svg" "$text"
done
lacks "$out/publisher.svg" "<text>threads</text>"  # only batch sizes: one panel

# A table without any plottable case is an error, not an empty picture.
if printf 'case  detail  baseline/s  boxcar/s  ratio\nrss  x  1  2  0.50\n' | "$plot" "$out/none.svg" 2>/dev/null; then
  fail "a table without plottable cases was accepted"
fi
[[ ! -s $out/none.svg ]] || fail "an SVG was written for a table without plottable cases"
echo "bench-plot: ok"
