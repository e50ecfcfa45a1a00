#!/usr/bin/env bash
# ctest "package: ... systemd units ...": the shipped units pass `systemd-analyze verify`
# (which needs no running systemd, only Debian's systemd package) in a throw-away root
# laid out as the package installs them, and keep the promises docs/operations.md makes:
# Restart=on-failure, an EnvironmentFile under /etc/boxcar, a dedicated user, and a
# TimeoutStopSec longer than the stop the runtime's defaults allow (read from this build's
# `boxcar config check`). The example environment file is a valid configuration.
# Exits 77 (ctest: skipped) when systemd-analyze is missing.
#
#   systemd_units_test.sh SOURCE_DIR BOXCAR_BINARY
set -euo pipefail
source_dir=$(cd "$1" && pwd)
boxcar=$2
units=$source_dir/packaging/systemd
fail() { echo "FAIL: $*" >&2; exit 1; }

if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze not found (Debian's systemd package; scripts/setup installs it)"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root/usr/lib/systemd/system" "$root/usr/bin" "$root/etc/boxcar"
ln -s usr/lib "$root/lib"
# verify resolves each unit's dependencies (sysinit.target, network-online.target, ...)
# inside the root: give it this machine's units, then ours.
cp -a /usr/lib/systemd/system/. "$root/usr/lib/systemd/system/"
cp "$units"/*.service "$root/usr/lib/systemd/system/"
# ExecStart must name executables that exist: the publisher's, and an application's worker
# for the template's instance "orders-app".
cp "$boxcar" "$root/usr/bin/boxcar"
printf '#!/bin/sh\n' >"$root/usr/bin/orders-app"
chmod +x "$root/usr/bin/orders-app"

# verify exits 0 on directives it ignores (an unknown key, a bad time span) and prints a
# warning: any output fails.
output=$(systemd-analyze verify --root="$root" boxcar-publisher.service boxcar-worker@orders-app.service 2>&1) ||
  fail "systemd-analyze verify failed: $output"
[[ -z $output ]] || fail "systemd-analyze verify warned: $output"
echo "systemd-analyze verify: boxcar-publisher.service boxcar-worker@orders-app.service clean"

# The last value of KEY in [Service] (systemd's rule for repeated keys).
service_value() {
  awk -v key="$2" -F= '/^\[/ {section = $0} section == "[Service]" && $1 == key {value = substr($0, length(key) + 2)}
                       END {print value}' "$1"
}
microseconds() { systemd-analyze timespan "$1" 2>/dev/null | awk '$1 ~ /s:$/ && $1 != "Original:" && $2 ~ /^[0-9]+$/ {print $2; exit}'; }
config() { "$boxcar" config check --database-url postgresql://localhost/x | awk -v key="$1" '$1 == key {print $3}'; }

grace_ms=$(config shutdown.grace_ms)
delivery_ms=$(config publisher.delivery_timeout_ms)
[[ -n $grace_ms && -n $delivery_ms ]] || fail "boxcar config check did not print the stop defaults"
# The worker stops within grace + 2 s (docs/runtime.md, "Shutdown"); the publisher waits for
# the batches in flight, at most the delivery timeout.
declare -A stop_ms=([boxcar-publisher.service]=$delivery_ms [boxcar-worker@.service]=$((grace_ms + 2000)))
declare -A env_file=([boxcar-publisher.service]=/etc/boxcar/publisher.env [boxcar-worker@.service]=/etc/boxcar/%i.env)

for unit in boxcar-publisher.service boxcar-worker@.service; do
  file=$units/$unit
  [[ $(service_value "$file" Restart) == on-failure ]] || fail "$unit: Restart is not on-failure"
  [[ $(service_value "$file" EnvironmentFile) == "${env_file[$unit]}" ]] ||
    fail "$unit: EnvironmentFile is not ${env_file[$unit]}"
  [[ -n $(service_value "$file" User) && $(service_value "$file" DynamicUser) == yes ]] ||
    fail "$unit: no dedicated user (User= with DynamicUser=yes)"
  timeout=$(service_value "$file" TimeoutStopSec)
  timeout_us=$(microseconds "$timeout")
  [[ -n $timeout_us ]] || fail "$unit: TimeoutStopSec '$timeout' does not parse"
  ((timeout_us > ${stop_ms[$unit]} * 1000)) ||
    fail "$unit: TimeoutStopSec $timeout is not longer than the runtime's stop (${stop_ms[$unit]} ms)"
  echo "$unit: TimeoutStopSec $timeout > ${stop_ms[$unit]} ms"
done

# The example environment file, read as systemd would, is a valid configuration.
(
  set -a
  # shellcheck source=/dev/null
  source "$source_dir/packaging/publisher.env"
  "$boxcar" config check >"$work/config.out" 2>&1
) || { cat "$work/config.out"; fail "packaging/publisher.env is not a valid configuration"; }
grep -q '^kafka.bootstrap.servers = ' "$work/config.out" || fail "publisher.env sets no Kafka bootstrap servers"
echo "packaging/publisher.env: configuration is valid"
