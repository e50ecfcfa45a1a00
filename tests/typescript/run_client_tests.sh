#!/bin/sh
# The TypeScript client's steps in ctest (tests/typescript/CMakeLists.txt):
#   build DIR   npm ci (when node_modules is missing or older than package-lock.json), tsc
#   unit DIR    node --test over build/test/unit
#   pg DIR      node --test over build/test/pg (BOXCAR_TEST_DATABASE_URL, BOXCAR_CLI_PATH)
#   pack DIR    npm pack, install the tarball into an empty project, run its example
# Exits 77 (skipped) only when node or npm is missing: scripts/setup installs them.
set -eu
mode=$1
dir=$2
command -v node >/dev/null && command -v npm >/dev/null || {
  echo "node or npm is missing (scripts/setup installs nodejs npm): skipped" >&2
  exit 77
}
cd "$dir"
tests_in() {
  # node 18 and 20 take files (20 also globs, 18 does not): list them here.
  find "build/test/$1" -name '*.test.js' | sort
}
case $mode in
  build)
    exec 9>.install.lock
    flock 9
    if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
      npm ci --no-audit --no-fund >&2
    fi
    rm -rf build
    exec node_modules/.bin/tsc -p tsconfig.json
    ;;
  unit)
    exec node --test $(tests_in unit)
    ;;
  pg)
    : "${BOXCAR_TEST_DATABASE_URL:?run through scripts/test, which starts the test cluster}"
    exec node --test $(tests_in pg)
    ;;
  pack)
    : "${BOXCAR_TEST_DATABASE_URL:?run through scripts/test, which starts the test cluster}"
    exec sh "$dir/example/run_packed_example.sh" "$dir"
    ;;
  *)
    echo "usage: run_client_tests.sh build|unit|pg|pack CLIENT_DIR" >&2
    exit 2
    ;;
esac
