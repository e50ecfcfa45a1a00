#!/usr/bin/env bash
# ctest "pg/full disk: ...": runs the [full-disk] cases of boxcar_pg_tests (hidden from
# test discovery) against a small tmpfs that they make a tablespace of and fill
# (tests/pg/full_disk_test.cpp). The test PostgreSQL must run on this machine as the
# account `postgres` (scripts/lib/postgres.sh starts it so under root). Exits 77 (ctest:
# skipped) where no tmpfs can be mounted: not root, or the kernel refuses.
#
#   with_small_tablespace.sh PG_TESTS_BINARY
set -euo pipefail
binary=$1

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: mounting a tmpfs for the full-disk tablespace needs root"
  exit 77
fi
dir=$(mktemp -d /tmp/boxcar-small-tablespace.XXXXXX)
if ! mount -t tmpfs -o size=8m tmpfs "$dir"; then
  rmdir "$dir"
  echo "SKIP: could not mount a tmpfs on $dir"
  exit 77
fi
trap 'umount "$dir"; rmdir "$dir"' EXIT
# PostgreSQL's account must own a tablespace's directory and reach it.
chown postgres "$dir"
chmod 700 "$dir"
BOXCAR_TEST_SMALL_TABLESPACE=$dir "$binary" "[full-disk]"
