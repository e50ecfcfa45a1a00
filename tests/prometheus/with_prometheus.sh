#!/usr/bin/env bash
# Runs a test binary that starts Debian's prometheus, or skips (exit 77, ctest: skipped)
# with the reason when the package is missing. Usage: with_prometheus.sh BINARY [ARGS...]
set -uo pipefail
if ! command -v prometheus >/dev/null; then
  echo "SKIP: prometheus not found (Debian package prometheus; run scripts/setup)"
  exit 77
fi
exec "$@"
