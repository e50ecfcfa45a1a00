#!/usr/bin/env bash
# ctest "example: the README's accept example ...": run it twice against the test
# cluster; the first run must be accepted, the redelivery a duplicate of the same receipt.
set -euo pipefail
example=$1
: "${BOXCAR_TEST_DATABASE_URL:?run through scripts/test}"
export BOXCAR_DATABASE_URL=$BOXCAR_TEST_DATABASE_URL
export BOXCAR_SCHEMA="example_accept_$$_$RANDOM"  # a fresh schema: the first run is new
"$example" migrate  # once, before the ingress runs (it never migrates)
first=$("$example")
second=$("$example")
echo "$first"; echo "$second"
[[ $first =~ ^accepted\ receipt\ ([0-9]+)\ \(PENDING\)$ ]] || { echo "first run was not accepted" >&2; exit 1; }
id=${BASH_REMATCH[1]}
[[ $second == "duplicate receipt $id (PENDING)" ]] || { echo "redelivery was not a duplicate of $id" >&2; exit 1; }
