#!/usr/bin/env bash
# check_failpoints.sh present|absent LIBRARY...: are the failpoint names (worker.before_commit,
# publisher.before_mark, the BOXCAR_FAILPOINT variable) in the built libraries?
set -euo pipefail
expect=$1
shift
found=0
for name in worker.after_claim worker.before_commit worker.after_commit publisher.before_mark BOXCAR_FAILPOINT; do
  if grep -aqF "$name" "$@"; then
    echo "failpoint string '$name' found"
    found=$((found + 1))
  fi
done
if [[ $expect == absent && $found -gt 0 ]]; then echo "a build without BOXCAR_FAILPOINTS carries failpoints" >&2; exit 1; fi
if [[ $expect == present && $found -lt 5 ]]; then echo "a BOXCAR_FAILPOINTS build lacks failpoints" >&2; exit 1; fi
echo "failpoints: $expect as expected"
