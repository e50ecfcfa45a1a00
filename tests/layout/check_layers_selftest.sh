#!/usr/bin/env bash
# check_layers.sh must fail on each kind of violation it exists to catch: an upward include,
# an include of another target's src/, and a build file that adds another target's src/.
set -euo pipefail
checker=$(dirname "$0")/check_layers.sh
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
make_tree() {
  rm -rf "$work/tree"; mkdir -p "$work/tree"
  for layer in migrations core inbox outbox publisher ops runtime testing tests bench examples; do
    mkdir -p "$work/tree/$layer/src"; echo '#include "boxcar/core/tx.hpp"' > "$work/tree/$layer/src/ok.cpp"
  done
  echo '#include "boxcar/migrations/detail/embedded.hpp"' > "$work/tree/migrations/src/ok.cpp"
}
expect_violation() {  # what, pattern expected in the output
  if out=$("$checker" "$work/tree" 2>&1); then echo "FAIL: $1 was not reported"; exit 1; fi
  grep -q -- "$2" <<<"$out" || { echo "FAIL: $1 reported without '$2':"; echo "$out"; exit 1; }
  echo "ok: $1"
}
make_tree
"$checker" "$work/tree" >/dev/null || { echo "FAIL: a clean tree was reported"; exit 1; }
echo '#include "boxcar/runtime/runtime.hpp"' > "$work/tree/inbox/src/up.cpp"
expect_violation "inbox including the runtime" "inbox may not include boxcar/runtime/runtime.hpp"
make_tree
echo '#include "../../inbox/src/receipt_store.hpp"' > "$work/tree/tests/src/peek.cpp"
expect_violation "a test including inbox/src" "includes through a relative or src/ path"
make_tree
echo 'target_include_directories(t PRIVATE ${PROJECT_SOURCE_DIR}/inbox/src)' > "$work/tree/tests/CMakeLists.txt"
expect_violation "a build file adding inbox/src" "reaches into inbox/src"
