#!/usr/bin/env bash
# The shipped alert rules, checked with Debian's promtool (scripts/setup installs the
# `prometheus` package). Usage: promtool_rules.sh SOURCE_DIR check|test|coverage|docs
#   check     promtool check rules docs/prometheus/boxcar-alerts.yml
#   test      promtool test rules tests/prometheus/boxcar-alerts.test.yml
#   coverage  every alert of the rules file has a unit test that fires it and one that
#             keeps it quiet, and the tests name no alert the file lacks
#   docs      the "Alert rules" section of docs/operations.md names exactly the alerts of
#             the rules file and points to it
# Exits 77 (ctest: skipped) when promtool is missing, 1 on any failure.
set -uo pipefail
root=${1:?usage: promtool_rules.sh SOURCE_DIR check|test|coverage|docs}
mode=${2:?usage: promtool_rules.sh SOURCE_DIR check|test|coverage|docs}
cd "$root" || exit 2
rules=docs/prometheus/boxcar-alerts.yml
tests=tests/prometheus/boxcar-alerts.test.yml

alerts_in_rules() { sed -n 's/^ *- alert: *\([A-Za-z0-9_]*\).*/\1/p' "$rules" | sort -u; }

case "$mode" in
  check | test)
    command -v promtool >/dev/null || {
      echo "SKIP: promtool not found (Debian package prometheus; run scripts/setup)"
      exit 77
    }
    if [[ $mode == check ]]; then exec promtool check rules "$rules"; fi
    exec promtool test rules "$tests"
    ;;
  coverage)
    # Each `alertname:` line is followed by its `exp_alerts:`: `[]` is a quiet test,
    # anything else (a list of expected alerts) a firing one.
    status=0
    verdicts=$(awk '/^ *alertname:/ {name = $2} /^ *exp_alerts:/ {print name, ($2 ~ /^\[\]/ ? "quiet" : "fires")}' "$tests" | sort -u)
    for alert in $(alerts_in_rules); do
      for kind in fires quiet; do
        grep -qx "$alert $kind" <<<"$verdicts" || { echo "$alert: no unit test in $tests where it $kind"; status=1; }
      done
    done
    for alert in $(awk '{print $1}' <<<"$verdicts" | sort -u); do
      alerts_in_rules | grep -qx "$alert" || { echo "$tests tests $alert, which $rules does not define"; status=1; }
    done
    ((status == 0)) && echo "every one of $(alerts_in_rules | wc -l) alerts has a firing and a quiet unit test"
    exit "$status"
    ;;
  docs)
    status=0
    section=$(awk '/^## Alert rules/ {on = 1; next} /^## / {on = 0} on' docs/operations.md)
    documented=$(grep -o '`Boxcar[A-Z][A-Za-z0-9]*`' <<<"$section" | tr -d '`' | sort -u)
    for alert in $(alerts_in_rules); do
      grep -qx "$alert" <<<"$documented" || { echo "docs/operations.md does not describe $alert"; status=1; }
    done
    for alert in $documented; do
      alerts_in_rules | grep -qx "$alert" || { echo "docs/operations.md describes $alert, which $rules does not define"; status=1; }
    done
    grep -q "$rules" <<<"$section" || { echo "docs/operations.md, Alert rules: no pointer to $rules"; status=1; }
    ((status == 0)) && echo "docs/operations.md describes the $(alerts_in_rules | wc -l) alerts of $rules"
    exit "$status"
    ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
