#!/bin/sh
# Installs the pinned packages of package-lock.json (puppeteer-core) into node_modules/ with
# `npm ci`, when they are missing or older than the lock file. Safe to run concurrently
# (flock serialises the callers).
set -eu
cd "$(dirname "$0")"
command -v npm >/dev/null || { echo "install_deps: npm is missing (scripts/setup installs nodejs npm)" >&2; exit 1; }
exec 9>.install.lock
flock 9
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  # --ignore-scripts: puppeteer-core downloads nothing, and no other package needs a script.
  npm ci --ignore-scripts --no-audit --no-fund >&2
fi
