#!/usr/bin/env bash
# with_failpoints.sh CHAOS_BUILD_DIR TEST_BINARY [ARGS...]: runs a test binary of this tree
# whose tests kill a `boxcar` at a failpoint, with BOXCAR_FAILPOINT_CLI naming the CLI of
# CHAOS_BUILD_DIR, a tree configured with -DBOXCAR_FAILPOINTS=ON (scripts/test builds
# build-chaos/ so). Without such a tree or its CLI it exits 77, which ctest reports as
# skipped: a failpoint test never passes without its failpoint.
set -euo pipefail
dir=$1
shift
if ! grep -q '^BOXCAR_FAILPOINTS:BOOL=ON' "$dir/CMakeCache.txt" 2>/dev/null; then
  echo "skipped: $dir is not a -DBOXCAR_FAILPOINTS=ON build (configure -DBOXCAR_CHAOS_BUILD_DIR=build-chaos, as scripts/test does)"
  exit 77
fi
cli="$dir/runtime/boxcar"
if [[ ! -x $cli ]]; then
  echo "skipped: $cli is missing (cmake --build $dir --target boxcar_cli)"
  exit 77
fi
BOXCAR_FAILPOINT_CLI=$cli exec "$@"
