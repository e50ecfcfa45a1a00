#!/usr/bin/env bash
# ctest "package: ...": build the .deb from the build tree with cpack, install it with dpkg
# into an empty root, then build tests/install_consumer against that root twice, with CMake
# (find_package through CMAKE_PREFIX_PATH) and with pkg-config (PKG_CONFIG_PATH and
# PKG_CONFIG_SYSROOT_DIR), and run both builds. The root holds only the package: the
# Debian dependencies it declares come from this machine (dpkg --force-depends), and the
# test checks that those declared names are real packages and cover what `boxcar` links.
#
#   deb_install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
work=$(mktemp -d)
# The background build (below) must not outlive a failure.
trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "--- [${SECONDS} s] $*"; }

step "cpack -G DEB"
cpack --config "$build_dir/CPackConfig.cmake" -G DEB -B "$work/out" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack -G DEB failed"; }
debs=("$work"/out/boxcar_*.deb)
[[ ${#debs[@]} -eq 1 && -f ${debs[0]} ]] || fail "expected one boxcar_*.deb, got: ${debs[*]}"
deb=${debs[0]}
echo "$(basename "$deb"): $(stat -c %s "$deb") bytes"

step "Depends names real Debian packages"
depends=$(dpkg-deb -f "$deb" Depends)
[[ -n $depends ]] || fail "the package declares no Depends"
declare -A declared=()
IFS=',|' read -ra alternatives <<<"$depends"
relation='^ *([a-z0-9.+-]+)( *\(([<>=]+) *([^)]+)\))? *$'
for alternative in "${alternatives[@]}"; do
  [[ $alternative =~ $relation ]] || fail "Depends entry '$alternative' does not parse"
  name=${BASH_REMATCH[1]} operator=${BASH_REMATCH[3]} version=${BASH_REMATCH[4]}
  declared[$name]=1
  # Building Boxcar needed every one of them, so each is installed here, in a version the
  # relation accepts: a misspelt or non-Debian-12 name is not, nor a bound that is off.
  dpkg-query -W -f='${Status}\n' "$name" 2>/dev/null | grep -q 'install ok installed' ||
    fail "Depends names '$name', which is not an installed Debian package on this machine"
  installed=$(dpkg-query -W -f='${Version}' "$name")
  [[ -z $operator ]] || dpkg --compare-versions "$installed" "$operator" "$version" ||
    fail "Depends says $name ($operator $version), this machine has $installed"
done
echo "${#declared[@]} packages: ${!declared[*]}"

step "dpkg --root install into an empty root"
root=$work/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
# --force-depends: the root is empty, its dependencies are this machine's (checked above).
# --log: otherwise dpkg appends to this machine's /var/log/dpkg.log.
dpkg --root="$root" --log="$work/dpkg.log" --force-depends --force-not-root -i "$deb" >"$work/dpkg.out" 2>&1 ||
  { cat "$work/dpkg.out"; fail "dpkg -i failed"; }
[[ $(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Status}' boxcar) == "install ok installed" ]] ||
  fail "boxcar is not 'install ok installed' in the root"
for f in usr/bin/boxcar usr/lib/systemd/system/boxcar-publisher.service \
         usr/lib/systemd/system/boxcar-worker@.service usr/share/doc/boxcar/examples/publisher.env \
         usr/include/boxcar/inbox/inbox.hpp; do
  [[ -e $root/$f ]] || fail "the package lacks /$f"
done
config=$(find "$root/usr" -name boxcarConfig.cmake)
pc=$(find "$root/usr" -name boxcar.pc)
[[ -n $config && -n $pc ]] || fail "the package lacks boxcarConfig.cmake or boxcar.pc"

step "Depends covers every shared library /usr/bin/boxcar needs"
declare -A resolved=()
while read -r library path; do resolved[$library]=$path; done < <(
  ldd "$root/usr/bin/boxcar" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}
                                      $1 ~ /^\// {n = split($1, p, "/"); print p[n], $1}')
needed=$(objdump -p "$root/usr/bin/boxcar" | awk '$1 == "NEEDED" {print $2}')
[[ -n $needed ]] || fail "objdump found no NEEDED entry in /usr/bin/boxcar"
# One dpkg -S for all (it reads its whole database each time). A library may be registered
# under /lib or /usr/lib (Debian 12 merges them): ask for both, key the answers without /usr.
declare -A owner=()
candidates=()
for library in $needed; do
  path=${resolved[$library]:-}
  [[ -n $path ]] || fail "ldd does not resolve $library"
  candidates+=("${path#/usr}" "/usr${path#/usr}")
done
while IFS= read -r line; do
  file=${line#*: }
  owner[${file#/usr}]=${line%%:*}
done < <(dpkg -S "${candidates[@]}" 2>/dev/null || true)
for library in $needed; do
  path=${resolved[$library]#/usr}
  package=${owner[$path]:-}
  [[ -n $package ]] || fail "no Debian package owns ${resolved[$library]} ($library)"
  [[ -n ${declared[$package]:-} ]] || fail "boxcar needs $library from $package, which Depends does not name"
done
echo "NEEDED: ${needed//$'\n'/ }"
"$root/usr/bin/boxcar" --help >/dev/null || fail "the installed boxcar does not run"

# The consumer runs twice: alone it checks a fingerprint (boxcar::inbox); with arguments it is
# boxcar::run_cli (boxcar::runtime, which links every library and dependency), and
# `config check` needs no database.
run_consumer() {
  local binary=$1 output
  "$binary" || fail "$binary: the fingerprint check failed"
  output=$("$binary" config check --database-url 'postgresql://app:s3cret@127.0.0.1:9/app') ||
    fail "$binary config check failed: $output"
  grep -q 'configuration is valid' <<<"$output" || fail "$binary config check: $output"
  ! grep -q s3cret <<<"$output" || fail "$binary config check printed the password"
}

# The two builds run at once (each compiler is single-threaded): pkg-config's in the
# background while CMake configures and builds.
step "pkg-config boxcar with PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR=root"
in_root_pkg_config() { PKG_CONFIG_PATH=${pc%/boxcar.pc} PKG_CONFIG_SYSROOT_DIR=$root pkg-config "$@"; }
[[ $(in_root_pkg_config --variable=pcfiledir boxcar) == "$root"/* ]] || fail "pkg-config found boxcar outside the root"
flags=$(in_root_pkg_config --cflags --libs boxcar) || fail "pkg-config --cflags --libs boxcar failed"
echo "pkg-config: $flags"
[[ $flags == *"-I$root/usr/include"* ]] || fail "the include path is not the root's: $flags"
# shellcheck disable=SC2086  # the flags are words
g++ -std=c++20 -o "$work/consumer-pc" "$source_dir/tests/install_consumer/main.cpp" $flags \
  >"$work/pkg-config-build.log" 2>&1 &
pkg_config_build=$!

step "find_package(boxcar) with CMAKE_PREFIX_PATH=root/usr"
cmake -S "$source_dir/tests/install_consumer" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$root/usr" \
  -DCMAKE_BUILD_TYPE= >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "configure failed"; }
found=$(sed -n 's/^boxcar_DIR:PATH=//p' "$work/cmake/CMakeCache.txt")
[[ $found == "$root"/* ]] || fail "find_package found boxcar at '$found', not in the root"
cmake --build "$work/cmake" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "the CMake build failed"; }
run_consumer "$work/cmake/consumer"

step "the pkg-config build"
wait "$pkg_config_build" || { cat "$work/pkg-config-build.log"; fail "the pkg-config build failed"; }
run_consumer "$work/consumer-pc"

# README's way, `cmake --install --prefix DIR`, writes boxcar.pc for that prefix (the .deb's
# says /usr): it is generated at install time. The CMake config is the same file in both.
step "cmake --install --prefix writes boxcar.pc for that prefix"
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
other_pc=$(find "$work/prefix" -name boxcar.pc)
grep -qx "prefix=$work/prefix" "$other_pc" || fail "boxcar.pc after cmake --install --prefix: $(grep ^prefix= "$other_pc")"
echo "the .deb installs into an empty root and builds with CMake and with pkg-config"
