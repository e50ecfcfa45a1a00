# Sourced by scripts/test, scripts/bench and scripts/demo: a throw-away PostgreSQL 15
# cluster on a free loopback port, run as a non-root user, removed on exit.
#
#   boxcar_pg_start [SETTING...]  sets BOXCAR_PG_URL and BOXCAR_PG_DIR, installs an EXIT
#                                 trap; each SETTING (e.g. fsync=off) is passed to the
#                                 server as -c SETTING, after BOXCAR_PG_EXTRA_OPTIONS; the
#                                 cluster's folder is made in BOXCAR_PG_PARENT_DIR (/tmp)
#   boxcar_pg_stop       stops and deletes the cluster (also run by the trap)

boxcar_pg_bindir() {
  local d
  for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    [[ -x "$d/initdb" ]] && { echo "$d"; return 0; }
  done
  echo "postgres: no initdb found; run scripts/setup" >&2
  return 1
}

# Runs a command as the cluster's owner: ourselves when not root, else the unprivileged
# 'postgres' account that the Debian package creates (PostgreSQL refuses to run as root).
boxcar_pg_as_owner() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

boxcar_pg_stop() {
  if [[ -n "${BOXCAR_PG_DIR:-}" && -d "$BOXCAR_PG_DIR" ]]; then
    boxcar_pg_as_owner "$BOXCAR_PG_BIN/pg_ctl" -D "$BOXCAR_PG_DIR/data" -m immediate -w stop \
      >/dev/null 2>&1 || true
    rm -rf "$BOXCAR_PG_DIR"
  fi
  BOXCAR_PG_DIR=""
}

boxcar_pg_start() {
  local settings="" setting
  for setting in "$@"; do settings+=" -c $setting"; done
  BOXCAR_PG_BIN=$(boxcar_pg_bindir)
  BOXCAR_PG_DIR=$(mktemp -d "${BOXCAR_PG_PARENT_DIR:-/tmp}/boxcar-pg.XXXXXX")
  trap 'boxcar_pg_stop' EXIT
  trap 'boxcar_pg_stop; exit 130' INT
  trap 'boxcar_pg_stop; exit 143' TERM
  chmod 755 "$BOXCAR_PG_DIR"
  [[ $(id -u) -eq 0 ]] && chown postgres "$BOXCAR_PG_DIR"
  boxcar_pg_as_owner "$BOXCAR_PG_BIN/initdb" -D "$BOXCAR_PG_DIR/data" -U boxcar --auth=trust \
    --no-sync -E UTF8 --locale=C.UTF-8 >"$BOXCAR_PG_DIR/initdb.log" 2>&1 ||
    { cat "$BOXCAR_PG_DIR/initdb.log" >&2; return 1; }
  local port attempt
  for attempt in $(seq 1 20); do
    port=$((20000 + RANDOM % 30000))
    if boxcar_pg_as_owner "$BOXCAR_PG_BIN/pg_ctl" -D "$BOXCAR_PG_DIR/data" -w -t 60 \
        -l "$BOXCAR_PG_DIR/server.log" \
        -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$BOXCAR_PG_DIR -c max_connections=300 -c shared_buffers=256MB -c max_locks_per_transaction=256 ${BOXCAR_PG_EXTRA_OPTIONS:-}$settings" \
        start >/dev/null 2>&1; then
      BOXCAR_PG_PORT=$port
      BOXCAR_PG_URL="postgresql://boxcar@127.0.0.1:$port/postgres"
      export BOXCAR_PG_URL BOXCAR_PG_PORT BOXCAR_PG_DIR BOXCAR_PG_BIN
      echo "postgres: throw-away cluster on 127.0.0.1:$port ($BOXCAR_PG_DIR)"
      return 0
    fi
  done
  echo "postgres: could not start a cluster; last log:" >&2
  tail -20 "$BOXCAR_PG_DIR/server.log" >&2 || true
  return 1
}
