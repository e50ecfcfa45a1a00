#!/bin/sh
# ctest "pg/conformance: ...": the generator, run now, writes exactly the committed vectors.
# A change to the cases (conformance_cases.hpp) or to what the library computes for them
# fails here until conformance/ is regenerated and the diff reviewed (conformance/README.md).
set -eu
generator=$1
committed=$2
: "${BOXCAR_TEST_DATABASE_URL:?run through scripts/test, which starts the test cluster}"
# A tree that builds only some targets (the sanitizer stage's) has no generator: skipped.
[ -x "$generator" ] || { echo "$generator is not built in this tree: skipped" >&2; exit 77; }
fresh=$(mktemp -d /tmp/boxcar-vectors.XXXXXX)
trap 'rm -rf "$fresh"' EXIT
"$generator" "$fresh" >/dev/null
status=0
for file in "$fresh"/*.json; do
  name=$(basename "$file")
  if ! cmp -s "$file" "$committed/$name"; then
    echo "conformance/$name differs from what the generator writes now (regenerate: conformance/README.md)" >&2
    status=1
  fi
done
exit $status
