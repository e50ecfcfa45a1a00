#!/usr/bin/env bash
# The layer rules of docs/architecture.md, checked over the source tree:
#   1. a library includes only its own headers and those of the layers below it;
#   2. nothing includes a file from another target's src/ (no "src/" or "../" in an
#      #include, and no build file outside a library adds that library's src/ to an
#      include path).
# Usage: check_layers.sh SOURCE_DIR. Prints each violation; exits 1 if there is any.
set -uo pipefail
root=${1:?usage: check_layers.sh SOURCE_DIR}
cd "$root" || exit 2

declare -A allowed=(
  [migrations]="migrations"
  [core]="core migrations"
  [inbox]="inbox core"
  [outbox]="outbox core"
  [publisher]="publisher outbox core"
  [ops]="ops inbox outbox core"
  [runtime]="runtime ops publisher inbox outbox core"
  [testing]="testing inbox outbox core"
)
violations=0
report() { echo "$1"; violations=$((violations + 1)); }

for layer in "${!allowed[@]}"; do
  [[ -d $layer ]] || { report "$layer/: missing layer folder"; continue; }
  while IFS=: read -r file line included; do
    part=${included#boxcar/}; part=${part%%/*}
    [[ " ${allowed[$layer]} " == *" $part "* ]] ||
      report "$file:$line: $layer may not include $included (allowed: ${allowed[$layer]})"
  done < <(grep -rnoE --include='*.hpp' --include='*.cpp' --include='*.in' \
             '^#include "boxcar/[a-z_]+/[^"]*' "$layer" | sed 's/#include "//')
done

while IFS= read -r hit; do
  report "$hit: includes through a relative or src/ path"
done < <(grep -rnE --include='*.hpp' --include='*.cpp' '^#include "([^"]*/)?(src/|\.\./)' \
           "${!allowed[@]}" tests bench examples)

for layer in "${!allowed[@]}"; do
  while IFS= read -r hit; do
    report "$hit: a build file outside $layer/ reaches into $layer/src"
  done < <(grep -rnE --include='CMakeLists.txt' --include='*.cmake' "(SOURCE_DIR[}]?|\.\.)/$layer/src" . |
             grep -v "^\./$layer/")
done

if ((violations > 0)); then
  echo "$violations layering violation(s); see docs/architecture.md" >&2
  exit 1
fi
echo "layers hold: ${!allowed[*]}"
