# Sourced by scripts/test: the sanitizer stages (docs/development.md, "Sanitizers").
#
#   boxcar_sanitize_build LIST JOBS         configures and builds build-asan/ or build-tsan/
#   boxcar_sanitize_run LIST JOBS [ARGS]    runs the unit, pg and kafka labels there (needs
#                                           boxcar_pg_start first); ARGS go to ctest
#
# LIST is address,undefined or thread. Each tree builds only the three test binaries, the
# fuzz corpus replays of the core and runtime harnesses, and what they link (the boxcar
# CLI the pg and kafka tests start), at -O1 -g1: enough optimisation to keep the run short,
# frames kept for the reports, and line tables only, which is all a report's file:line
# needs, at less build time than full debug information. No -Werror here (the main build
# has it): with -fsanitize=address, g++ 12 reports false -Wmaybe-uninitialized in <regex>.

boxcar_sanitize_dir() {
  case "$1" in
    address,undefined) echo build-asan ;;
    thread) echo build-tsan ;;
    *) echo "scripts/test: --sanitize takes address,undefined or thread, not '$1'" >&2; return 2 ;;
  esac
}

boxcar_sanitize_build() {
  local list=$1 jobs=$2 dir
  dir=$(boxcar_sanitize_dir "$list") || return
  echo "== sanitizer stage ($list): building $dir/"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" \
    -DBOXCAR_SANITIZE="$list" \
    -DBOXCAR_BUILD_BENCH=OFF -DBOXCAR_BUILD_EXAMPLES=OFF >/dev/null || return
  # The fuzz corpus replays carry the unit label too: under ASan they check every seed and
  # reproducer for memory errors the harness's own properties cannot see.
  cmake --build "$dir" -j "$jobs" --target boxcar_unit_tests boxcar_pg_tests boxcar_kafka_tests \
    fuzz_replay_canonical_json fuzz_replay_config
}

# Any report fails the test it happens in: ASan and TSan stop the process at the first
# one, UBSan is built with -fno-sanitize-recover (CMakeLists.txt) and also halts. The
# suppressions name third-party code only; each entry says why.
boxcar_sanitize_run() {
  local list=$1 jobs=$2 dir supp=$PWD/scripts/lib/sanitizers
  shift 2
  dir=$(boxcar_sanitize_dir "$list") || return
  # A tree configured without the flags would pass silently: insist on the runtime.
  local runtime=libasan binary
  [[ $list == thread ]] && runtime=libtsan
  for binary in boxcar_unit_tests boxcar_pg_tests boxcar_kafka_tests; do
    [[ $(ldd "$dir/tests/$binary") == *"$runtime"* ]] ||
      { echo "scripts/test: $dir/tests/$binary is not linked with $runtime" >&2; return 1; }
  done
  # TSan cannot run librdkafka: Debian's librdkafka starts its threads with C11
  # thrd_create, which g++ 12's libtsan does not intercept, so the first allocation on
  # such a thread crashes inside TSan. The thread stage leaves out what starts a producer
  # or the mock cluster: the kafka label and one pg test file, whose one case does (docs/
  # security.md, section 9).
  local labels='^(unit|pg|kafka)$' exclude='^$'
  if [[ $list == thread ]]; then
    labels='^(unit|pg)$'
    exclude='^pg/publisher_backoff_test\.cpp$'
  fi
  echo "== sanitizer stage ($list): ctest -L '$labels' in $dir/"
  (
    export BOXCAR_TEST_DATABASE_URL="$BOXCAR_PG_URL" BOXCAR_TEST_BINARY_DIR="$PWD/$dir"
    export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=0"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp"
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4:suppressions=$supp/tsan.supp"
    cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 900 -L "$labels" -E "$exclude" "$@"
  )
}
