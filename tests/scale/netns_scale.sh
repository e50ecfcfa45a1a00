#!/usr/bin/env bash
# Many hosts on one machine (docs/scaling.md): network namespaces joined
# by veth pairs to a bridge, PostgreSQL in one, the librdkafka mock cluster in another, and
# three "hosts" each running a worker and a publisher process (the fault campaign's
# chaos_app, tests/chaos). Then:
#   curve    drain a preloaded backlog with 1, (2,) 3 hosts: throughput per host count,
#            with PostgreSQL's CPU use (2 cores here: it binds early)
#   cut-host one host's link is cut mid-run for lease + 7 s, then healed: nothing is lost,
#            its leases expire and the others finish its work, and its late attempts are
#            refused by the claim guard (boxcar_inbox_processed_total{outcome="stale"})
#   cut-db   the database's link is cut for 30 s: every host's worker commits again after
#            the heal
# and audits the cut runs with the fault campaign's ledger checks I1–I6
# (docs/reliability.md, scripts/chaos), by counting rows and topic records.
#
#   tests/scale/netns_scale.sh [--quick] [--only PHASE[,PHASE...]] [--app PATH] [--keep-logs] [--dynamic-arp]
#
# --quick (ctest label scale, scripts/test): curve 1 and 3 hosts on 3,000 messages, shorter
# loads; the full run (scripts/bench scale) measures 1, 2 and 3 hosts on 20,000 messages,
# twice. Exit 0: every invariant held; 1: a violation; 77: skipped, because network
# namespaces are refused here (not root, no `ip`, no socat, or the kernel says no).
#
# Nothing touches the machine's own interfaces or routes: the bridge lives in its own
# namespace (bxs-<id>-sw), so the 10.231.0.0/24 subnet exists only inside the topology.
# Every name carries a per-run id; the EXIT trap stops every process and deletes every
# namespace, also on failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)

quick=0
only="curve,cut-host,cut-db"
app="$root/build/tests/chaos/chaos_app"
keep_logs=0
dynamic_arp=0
while (($#)); do
  case "$1" in
    --quick) quick=1; shift ;;
    --only) only=$2; shift 2 ;;
    --app) app=$2; shift 2 ;;
    --keep-logs) keep_logs=1; shift ;;
    --dynamic-arp) dynamic_arp=1; shift ;;
    *) echo "usage: tests/scale/netns_scale.sh [--quick] [--only curve,cut-host,cut-db] [--app PATH] [--keep-logs] [--dynamic-arp]" >&2
       exit 2 ;;
  esac
done

skip() { echo "scale: SKIPPED: $* (the namespace topology needs root, iproute2 and socat)"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "not root"
command -v ip >/dev/null || skip "no ip command (iproute2)"
command -v socat >/dev/null || skip "no socat (scripts/setup installs it)"
command -v unshare >/dev/null && { unshare -n true 2>/dev/null || skip "the kernel refuses a network namespace (unshare -n)"; }
[[ -x "$app" ]] || { echo "scale: $app is missing (build the chaos_app target)" >&2; exit 2; }
source "$root/scripts/lib/postgres.sh"
pg_bin=$(boxcar_pg_bindir)

# --- sizes ------------------------------------------------------------------------------
if ((quick)); then
  curve_hosts="1 3"; curve_messages=3000; curve_repeats=1
  cut_messages=900; cut_rate=45; dbcut_messages=900; dbcut_rate=45
else
  curve_hosts="1 2 3"; curve_messages=20000; curve_repeats=2
  cut_messages=1500; cut_rate=50; dbcut_messages=1500; dbcut_rate=50
fi
lease_ms=5000
host_cut_seconds=$((lease_ms / 1000 + 7))  # past the lease, short of tcp_user_timeout (30 s)
db_cut_seconds=30
recovery_limit=120

# --- names: one id per run; the bridge and the subnet exist only inside the namespaces ---
for _ in $(seq 1 20); do
  id=$(printf '%04x' $((RANDOM % 65536)))
  [[ -e /run/netns/bxs-$id-sw ]] || break
done
ns_sw=bxs-$id-sw ns_db=bxs-$id-db ns_kf=bxs-$id-kf
hosts=(h1 h2 h3)
subnet=10.231.0
db_ip=$subnet.2 kf_ip=$subnet.3
host_ip() { echo "$subnet.$((10 + ${1#h}))"; }
link_of() { echo "bxs$id-$1"; }  # the bridge-side end of a namespace's veth (in ns_sw)
namespaces=()
work=$(mktemp -d /tmp/bxs-scale.XXXXXX)
chmod 755 "$work"
pg_dir=""
sups=()

cleanup() {
  local rc=$?
  set +e
  # Supervisors stop restarting once their phase's stop file exists.
  for d in "$work"/*/; do touch "$d/stop"; done
  # Everything inside our namespaces was started by this script: TERM, 5 s of grace (a host
  # still cut off cannot shut down cleanly), then KILL. PostgreSQL is stopped by pg_ctl.
  local ns pid alive
  for ns in "${namespaces[@]}"; do
    [[ $ns == "$ns_db" ]] && continue
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null; done
  done
  for _ in $(seq 1 50); do
    alive=0
    for ns in "${namespaces[@]}"; do [[ $ns != "$ns_db" && -n $(ip netns pids "$ns" 2>/dev/null) ]] && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for ns in "${namespaces[@]}"; do
    [[ $ns == "$ns_db" ]] && continue
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  done
  for s in "${sups[@]}"; do wait "$s" 2>/dev/null; done
  # The mock cluster's stdin holders run outside the namespaces: only our own children.
  for f in "$work"/*/kafka/holder.pid; do
    [[ -f "$f" ]] || continue
    pid=$(cat "$f")
    [[ $(ps -o ppid= -p "$pid" 2>/dev/null | tr -d ' ') == "$$" ]] && kill -TERM "$pid" 2>/dev/null
  done
  if [[ -n "$pg_dir" ]]; then
    boxcar_pg_as_owner "$pg_bin/pg_ctl" -D "$pg_dir/data" -m immediate -w stop >/dev/null 2>&1
  fi
  for ns in "${namespaces[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  done
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null; done
  [[ -n "$pg_dir" ]] && rm -rf "$pg_dir"
  if ((rc != 0 && rc != 77)) || ((keep_logs)); then echo "scale: logs kept in $work" >&2; else rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- topology ---------------------------------------------------------------------------
add_ns() {  # name address: a namespace with eth0 on the bridge
  local name=$1 address=$2 ns=bxs-$id-$1
  ip netns add "$ns" || skip "ip netns add $ns was refused"
  namespaces+=("$ns")
  ip link add "$(link_of "$name")" netns "$ns_sw" type veth peer name eth0 netns "$ns" ||
    skip "the kernel refused a veth pair"
  ip -n "$ns_sw" link set "$(link_of "$name")" master br0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$address/24" dev eth0
  ip -n "$ns" link set eth0 up
}
ip netns add "$ns_sw" 2>/dev/null || skip "ip netns add was refused"
namespaces+=("$ns_sw")
ip -n "$ns_sw" link set lo up
ip -n "$ns_sw" link add br0 type bridge || skip "the kernel refused a bridge"
ip -n "$ns_sw" link set br0 up
add_ns db "$db_ip"
add_ns kf "$kf_ip"
for h in "${hosts[@]}"; do add_ns "$h" "$(host_ip "$h")"; done
# Fixed neighbour tables, as on a switch fabric whose ARP outlives a failed port: a cut
# link then drops packets silently (connect() hangs) instead of failing fast with "No
# route to host" once ARP gives up. --dynamic-arp keeps the kernel's ARP: there, a
# handler deadline that fires during a cut makes the worker abort (docs/scaling.md,
# "Known problem").
if ((!dynamic_arp)); then
  members=(db kf "${hosts[@]}")
  for a in "${members[@]}"; do
    for b in "${members[@]}"; do
      [[ $a == "$b" ]] && continue
      case $b in db) ip_b=$db_ip ;; kf) ip_b=$kf_ip ;; *) ip_b=$(host_ip "$b") ;; esac
      mac_b=$(ip -n "bxs-$id-$b" -o link show eth0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
      ip -n "bxs-$id-$a" neigh replace "$ip_b" lladdr "$mac_b" dev eth0 nud permanent
    done
  done
fi
cut_link() { ip -n "$ns_sw" link set "$(link_of "$1")" down; }  # a pulled cable: packets vanish, no RST
heal_link() { ip -n "$ns_sw" link set "$(link_of "$1")" up; }
in_ns() { local ns=bxs-$id-$1; shift; ip netns exec "$ns" "$@"; }

# --- PostgreSQL inside bxs-<id>-db, on the bridge and on that namespace's loopback ---------
pg_dir=$(mktemp -d /tmp/bxs-pg.XXXXXX)
chmod 755 "$pg_dir"
chown postgres "$pg_dir"
boxcar_pg_as_owner "$pg_bin/initdb" -D "$pg_dir/data" -U boxcar --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 \
  >"$pg_dir/initdb.log" 2>&1 || { cat "$pg_dir/initdb.log" >&2; exit 1; }
echo "host all all $subnet.0/24 trust" >>"$pg_dir/data/pg_hba.conf"
in_ns db runuser -u postgres -- "$pg_bin/pg_ctl" -D "$pg_dir/data" -w -t 60 -l "$pg_dir/server.log" \
  -o "-c listen_addresses=127.0.0.1,$db_ip -c port=5432 -c unix_socket_directories=$pg_dir -c max_connections=300 -c shared_buffers=256MB -c max_locks_per_transaction=256" \
  start >/dev/null || { tail -20 "$pg_dir/server.log" >&2; exit 1; }
postmaster=$(head -1 "$pg_dir/data/postmaster.pid")
sql() { in_ns db psql "postgresql://boxcar@127.0.0.1:5432/postgres" -v ON_ERROR_STOP=1 -Atqc "$1"; }

# --- the mock Kafka cluster inside bxs-<id>-kf, relayed ---------------------------------
# librdkafka 2.0.2's mock brokers listen on 127.0.0.1 only and advertise that address, so
# each broker port is relayed twice: in the Kafka namespace from the bridge address to its
# loopback, and in each host namespace from that host's loopback to the Kafka namespace.
# The bytes cross the veth pairs, so cutting a host's link cuts its Kafka traffic too.
kafka_bootstrap=""
start_kafka() {  # dir
  local dir=$1
  mkdir -p "$dir/kafka"
  touch "$dir/kafka/stop"  # nothing here is supervised
  # The mock obeys commands on stdin and stops when it closes: a holder keeps the fifo open.
  mkfifo "$dir/kafka/mock.in"
  sleep infinity >"$dir/kafka/mock.in" &
  echo $! >"$dir/kafka/holder.pid"
  ip netns exec "$ns_kf" "$app" mock-kafka <"$dir/kafka/mock.in" >"$dir/kafka/mock.out" 2>"$dir/kafka/mock.err" &
  echo $! >"$dir/kafka/mock.pid"
  for _ in $(seq 1 100); do grep -q '^BOOTSTRAP=' "$dir/kafka/mock.out" 2>/dev/null && break; sleep 0.1; done
  kafka_bootstrap=$(sed -n 's/^BOOTSTRAP=//p' "$dir/kafka/mock.out")
  [[ -n "$kafka_bootstrap" ]] || { echo "scale: the mock Kafka cluster did not start" >&2; exit 1; }
  local port n=0
  for port in $(tr ',' '\n' <<<"$kafka_bootstrap" | sed 's/.*://'); do
    ip netns exec "$ns_kf" socat "TCP-LISTEN:$port,bind=$kf_ip,fork,reuseaddr" "TCP:127.0.0.1:$port" 2>>"$dir/kafka/relay.err" &
    echo $! >"$dir/kafka/relay-kf-$n.pid"
    for h in "${hosts[@]}"; do
      ip netns exec "bxs-$id-$h" socat "TCP-LISTEN:$port,bind=127.0.0.1,fork,reuseaddr" "TCP:$kf_ip:$port" 2>>"$dir/kafka/relay.err" &
      echo $! >"$dir/kafka/relay-$h-$n.pid"
    done
    n=$((n + 1))
  done
  sleep 0.3
}
stop_kafka() {  # dir
  for f in "$1"/kafka/*.pid; do kill -TERM "$(cat "$f")" 2>/dev/null || true; done
  sleep 0.2
}

# --- roles ------------------------------------------------------------------------------
export BOXCAR_DATABASE_URL="postgresql://boxcar@$db_ip:5432/postgres" BOXCAR_CONSUMERS=chaos.v1
export BOXCAR_LOG_LEVEL=${BOXCAR_LOG_LEVEL:-warn} BOXCAR_POOL_SIZE=6 BOXCAR_POOL_ACQUIRE_TIMEOUT_MS=3000
export BOXCAR_WORKER_CONCURRENCY=4 BOXCAR_WORKER_CLAIM_LIMIT=16 BOXCAR_WORKER_LEASE_MS=$lease_ms
export BOXCAR_WORKER_HANDLER_TIMEOUT_MS=2000 BOXCAR_WORKER_MAX_ATTEMPTS=6
export BOXCAR_WORKER_BACKOFF_BASE_MS=200 BOXCAR_WORKER_BACKOFF_CAP_MS=2000 BOXCAR_WORKER_POLL_INTERVAL_MS=200
export BOXCAR_SHUTDOWN_GRACE_MS=2000
export BOXCAR_PUBLISHER_BATCH_SIZE=50 BOXCAR_PUBLISHER_DELIVERY_TIMEOUT_MS=5000 BOXCAR_PUBLISHER_LEASE_MS=11000
export BOXCAR_PUBLISHER_BACKOFF_BASE_MS=200 BOXCAR_PUBLISHER_BACKOFF_CAP_MS=2000 BOXCAR_PUBLISHER_POLL_INTERVAL_MS=200
export BOXCAR_METRICS_BACKLOG_INTERVAL_MS=60000

# Restarts its role whenever it dies, as an orchestrator would. The role listens for
# /metrics on its namespace's loopback (worker 9400, publisher 9401).
supervise() {  # host role dir
  local host=$1 role=$2 dir=$3 port
  [[ $role == worker ]] && port=9400 || port=9401
  while [[ ! -e "$dir/stop" ]]; do
    # SCALE_DEBUG_WRAPPER (e.g. "gdb -batch -ex run -ex 'thread apply all bt' --args") wraps h1's worker.
    local wrapper=()
    [[ $host/$role == h1/worker && -n "${SCALE_DEBUG_WRAPPER:-}" ]] && eval "wrapper=($SCALE_DEBUG_WRAPPER)"
    BOXCAR_HTTP_LISTEN=127.0.0.1:$port BOXCAR_KAFKA_BOOTSTRAP_SERVERS=$kafka_bootstrap \
      ip netns exec "bxs-$id-$host" "${wrapper[@]}" "$app" "$role" >>"$dir/$role-$host.log" 2>&1 &
    echo $! >"$dir/$role-$host.pid"
    echo $! >>"$dir/$role-$host.pids"
    local rc=0
    wait $! || rc=$?
    ((rc == 0)) || [[ -e "$dir/stop" ]] || echo "exit $rc" >>"$dir/$role-$host.deaths"
    sleep 0.3
  done
}
start_roles() {  # dir host...
  local dir=$1 h
  shift
  for h in "$@"; do
    supervise "$h" worker "$dir" & sups+=($!)
    supervise "$h" publisher "$dir" & sups+=($!)
  done
}
stop_roles() {  # dir
  local dir=$1 s
  touch "$dir/stop"
  for f in "$dir"/worker-*.pid "$dir"/publisher-*.pid; do [[ -f "$f" ]] && kill -TERM "$(cat "$f")" 2>/dev/null; done
  for s in "${sups[@]}"; do wait "$s" 2>/dev/null || true; done
  sups=()
}
# One counter of a role's /metrics, summed over label sets matching a pattern.
metric() {  # host port name pattern
  # bash's /dev/tcp: no HTTP client to install.
  in_ns "$1" timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" && printf "GET /metrics HTTP/1.0\r\n\r\n" >&3 && cat <&3' "$2" 2>/dev/null |
    awk -v name="$3" -v pat="$4" 'index($0, name) == 1 && $0 ~ pat { s += $NF } END { printf "%d\n", s }'
}
backlog() {
  sql "SELECT (SELECT count(*) FROM $schema.inbox_receipts WHERE status IN ('PENDING','RETRYABLE','PROCESSING'))
            + (SELECT count(*) FROM $schema.outbox_events WHERE status IN ('PENDING','RETRYABLE','PUBLISHING'))" 2>/dev/null ||
    echo -1
}
wait_drained() {  # limit seconds; prints seconds taken, or -1
  local start=$SECONDS
  while ((SECONDS - start <= $1)); do
    [[ $(backlog) == 0 ]] && { echo $((SECONDS - start)); return 0; }
    sleep 0.5
  done
  echo -1
}
new_schema() {  # name dir: migrations and the application table, run from host h1
  schema=$1
  export BOXCAR_SCHEMA=$schema
  in_ns h1 "$app" init >"$2/init.log" 2>&1 || { cat "$2/init.log" >&2; exit 1; }
}

# CPU: PostgreSQL's (postmaster, its live children, and its reaped children) and the machine's.
clk=$(getconf CLK_TCK)
pg_ticks() {
  local t=0 pid
  for pid in $postmaster $(ps -o pid= --ppid "$postmaster"); do
    t=$((t + $(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pid/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}
# CPU ticks of the topology's other processes, by kind: "worker publisher relay kafka".
role_ticks() {
  local ns pid kind t
  declare -A sum=([worker]=0 [publisher]=0 [relay]=0 [kafka]=0)
  for ns in bxs-$id-kf "${hosts[@]/#/bxs-$id-}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      case "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" in
        *socat*) kind=relay ;;
        *chaos_app\ worker*) kind=worker ;;
        *chaos_app\ publisher*) kind=publisher ;;
        *chaos_app\ mock-kafka*) kind=kafka ;;
        *) continue ;;
      esac
      t=$(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)
      sum[$kind]=$((sum[$kind] + t))
    done
  done
  echo "${sum[worker]} ${sum[publisher]} ${sum[relay]} ${sum[kafka]}"
}
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat; }

# --- the ledger checks of the fault campaign (scripts/chaos: audit), without poison -------
# One row of counts; each column is one invariant's violations (docs/reliability.md). Kept in
# step with scripts/chaos by hand: the campaign's audit is not a library yet.
audit() {  # dir ledger-file kafka-file: prints "i1 i2 double i3 kdup i4 i6 lost ledger"
  local dir=$1
  sql "CREATE TABLE $schema.chaos_ledger (message_id text NOT NULL);
       CREATE TABLE $schema.chaos_kafka (event_id text NOT NULL, kafka_partition int NOT NULL, kafka_offset bigint NOT NULL);"
  grep -E '^msg-[0-9]{6}$' "$2" >"$dir/ledger.ids" || true
  in_ns db psql "postgresql://boxcar@127.0.0.1:5432/postgres" -v ON_ERROR_STOP=1 -qc "\\copy $schema.chaos_ledger FROM '$dir/ledger.ids'"
  grep -P '^[^\t]+\t[0-9]+\t[0-9]+$' "$3" >"$dir/kafka.records" || true
  in_ns db psql "postgresql://boxcar@127.0.0.1:5432/postgres" -v ON_ERROR_STOP=1 -qc "\\copy $schema.chaos_kafka FROM '$dir/kafka.records'"
  sql "
    WITH rows AS (SELECT message_id, count(*) AS n FROM $schema.chaos_rows GROUP BY message_id),
    events AS (SELECT causation_id AS message_id, count(*) AS n FROM $schema.outbox_events GROUP BY causation_id),
    copies AS (SELECT event_id, count(DISTINCT (kafka_partition, kafka_offset)) AS n FROM $schema.chaos_kafka GROUP BY event_id)
    SELECT
      -- I1: accepted (accept() returned) but no receipt
      (SELECT count(*) FROM $schema.chaos_ledger l
        WHERE NOT EXISTS (SELECT 1 FROM $schema.inbox_receipts r WHERE r.message_id = l.message_id AND r.consumer = 'chaos.v1')),
      -- I2: not exactly one committed row and one outbox row
      (SELECT count(*) FROM $schema.chaos_ledger l LEFT JOIN rows USING (message_id) LEFT JOIN events e USING (message_id)
        WHERE coalesce(rows.n, 0) <> 1 OR coalesce(e.n, 0) <> 1),
      -- double-committed: more than one row or event
      (SELECT count(*) FROM $schema.chaos_ledger l LEFT JOIN rows USING (message_id) LEFT JOIN events e USING (message_id)
        WHERE coalesce(rows.n, 0) > 1 OR coalesce(e.n, 0) > 1),
      -- I3: an event missing from Kafka (or there under no event id)
      (SELECT count(*) FROM $schema.outbox_events o WHERE NOT EXISTS (SELECT 1 FROM copies c WHERE c.event_id = o.event_id::text))
        + (SELECT count(*) FROM $schema.chaos_kafka WHERE event_id = '-'),
      -- Kafka duplicates: extra copies (distinct partition/offset) of our events
      (SELECT coalesce(sum(c.n - 1), 0) FROM copies c JOIN $schema.outbox_events o ON o.event_id::text = c.event_id),
      -- I4: a committed row whose attempt is not the receipt's last claim, or a row of a receipt not COMPLETED
      (SELECT count(*) FROM $schema.chaos_rows w JOIN $schema.inbox_receipts r ON r.message_id = w.message_id
        WHERE w.attempt <> r.attempts OR r.status <> 'COMPLETED'),
      -- I6: no receipt and no event is DEAD (nothing here is poison)
      (SELECT count(*) FROM $schema.inbox_receipts WHERE status = 'DEAD')
        + (SELECT count(*) FROM $schema.outbox_events WHERE status = 'DEAD'),
      -- lost: accepted identities without a committed row or without an event in Kafka
      (SELECT count(*) FROM $schema.chaos_ledger l LEFT JOIN rows USING (message_id)
        WHERE rows.n IS NULL OR NOT EXISTS (SELECT 1 FROM $schema.outbox_events o JOIN copies c ON c.event_id = o.event_id::text
                                            WHERE o.causation_id = l.message_id)),
      (SELECT count(*) FROM $schema.chaos_ledger)" | tr '|' ' '
}
overall=0
results=()
# Checks the audit's counts (I5: the drain time) and records one result line.
judge() {  # phase n drain-seconds counts note
  local phase=$1 n=$2 drained=$3 note=$5 i1 i2 double i3 kdup i4 i6 lost ledger violations=""
  read -r i1 i2 double i3 kdup i4 i6 lost ledger <<<"$4"
  ((ledger == n)) || violations+=" ingress:$ledger/$n"
  ((i1 == 0)) || violations+=" I1:$i1"
  ((i2 == 0)) || violations+=" I2:$i2"
  ((i3 == 0)) || violations+=" I3:$i3"
  ((i4 == 0)) || violations+=" I4:$i4"
  ((drained >= 0)) || violations+=" I5:not-drained-in-${recovery_limit}s"
  ((i6 == 0)) || violations+=" I6:$i6"
  local status=ok
  [[ -z "$violations" ]] || { status="FAIL$violations"; overall=1; }
  results+=("$(printf '| %-8s | %8s | %4s | %6s | %5s | %8s | %s%s |' "$phase" "$n" "$lost" "$double" "$kdup" "$drained" "$status" "$note")")
  echo "${results[-1]}"
}
downstream() {  # dir: reads the whole topic from host h2
  in_ns h2 env BOXCAR_KAFKA_BOOTSTRAP_SERVERS="$kafka_bootstrap" "$app" downstream 3 >"$1/kafka.tsv" 2>"$1/downstream.log" || true
}

echo "scale: topology $ns_sw (bridge) + db $db_ip, kafka $kf_ip, hosts $(for h in "${hosts[@]}"; do printf '%s ' "$(host_ip "$h")"; done)on $(nproc) cores;" \
  "$( ((quick)) && echo quick || echo full) run"

# --- curve: a preloaded backlog drained by 1..3 hosts ---------------------------------------
curve() {
  local dir="$work/curve" k rep
  mkdir -p "$dir"
  start_kafka "$dir"
  declare -gA curve_rate=()
  for rep in $(seq 1 "$curve_repeats"); do
    for k in $curve_hosts; do
      local d="$dir/$k-$rep"
      mkdir -p "$d"
      new_schema "scale_curve_${k}_$rep" "$d"
      # Preloaded by one ingress per host, each its own third of the identities.
      local third=$(((curve_messages + 2) / 3)) i from to preload=()
      for i in 0 1 2; do
        from=$((i * third + 1)) to=$(((i + 1) * third))
        ((to <= curve_messages)) || to=$curve_messages
        ip netns exec "bxs-$id-${hosts[i]}" "$app" ingress "$from" "$to" 0 0 >"$d/ledger-$i" 2>"$d/ingress-$i.log" &
        preload+=($!)
      done
      for i in "${preload[@]}"; do wait "$i"; done
      local pg0 m0 r0 started
      started=$(date +%s.%N)
      pg0=$(pg_ticks)
      m0=$(machine_ticks)
      r0=$(role_ticks)
      start_roles "$d" "${hosts[@]:0:k}"
      local drained
      drained=$(wait_drained "$recovery_limit")
      local pg1 m1 r1
      pg1=$(pg_ticks)
      m1=$(machine_ticks)
      r1=$(role_ticks)
      stop_roles "$d"
      # Rates from the database's own timestamps: first to last completion (publication).
      local figures
      figures=$(sql "SELECT round(count(*) / greatest(extract(epoch FROM max(completed_at) - min(completed_at)), 0.001))
                     FROM $schema.inbox_receipts WHERE status = 'COMPLETED'")
      figures+=" $(sql "SELECT round(count(*) / greatest(extract(epoch FROM max(published_at) - min(published_at)), 0.001))
                        FROM $schema.outbox_events WHERE status = 'PUBLISHED'")"
      figures+=" $(sql "SELECT (SELECT count(*) FROM $schema.chaos_rows) - (SELECT count(DISTINCT message_id) FROM $schema.chaos_rows)")"
      local inbox_rate publish_rate doubles
      read -r inbox_rate publish_rate doubles <<<"$figures"
      local wall busy total
      wall=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
      read -r busy total <<<"$(paste -d' ' <(echo "$m0") <(echo "$m1") | awk '{ print $3 - $1, $4 - $2 }')"
      local pg_cores machine
      pg_cores=$(awk -v t=$((pg1 - pg0)) -v c="$clk" -v w="$wall" 'BEGIN { printf "%.2f", t / c / (w > 0 ? w : 1) }')
      machine=$(awk -v b="$busy" -v t="$total" 'BEGIN { printf "%d", 100 * b / (t > 0 ? t : 1) }')
      local others
      others=$(paste -d' ' <(echo "$r0") <(echo "$r1") | awk -v c="$clk" -v w="$wall" \
        '{ printf "workers %.2f, publishers %.2f, relays %.2f, mock kafka %.2f", ($5-$1)/c/w, ($6-$2)/c/w, ($7-$3)/c/w, ($8-$4)/c/w }')
      echo "scale: curve hosts=$k run=$rep messages=$curve_messages inbox $inbox_rate msg/s, published $publish_rate ev/s," \
        "drained in ${drained}s; cores used: postgres ${pg_cores}, $others; machine ${machine}% busy; double $doubles"
      ((drained >= 0 && doubles == 0)) || { echo "scale: curve hosts=$k did not drain or committed twice" >&2; overall=1; }
      curve_rate[$k]=$((${curve_rate[$k]:-0} + inbox_rate))
    done
  done
  stop_kafka "$dir"
  local first=${curve_hosts%% *} k
  for k in $curve_hosts; do
    [[ $k == "$first" ]] && continue
    awk -v a="${curve_rate[$k]}" -v b="${curve_rate[$first]}" -v k="$k" -v f="$first" \
      'BEGIN { printf "ratio scale_inbox_hosts%d_vs_hosts%d %.2f (no target: reported, not judged)\n", k, f, (b > 0 ? a / b : 0) }'
  done
}

# --- cut-host: one host's cable pulled mid-run, then healed -------------------------------
cut_host() {
  local dir="$work/cut-host" n=$cut_messages
  mkdir -p "$dir"
  start_kafka "$dir"
  new_schema scale_cut_host "$dir"
  # Every first attempt holds its transaction 300 ms (within the 2 s handler deadline): the
  # hosts are busy, so h1 holds claims in flight when its cable goes.
  export CHAOS_SLOW_EVERY=1 CHAOS_SLOW_MS=300
  start_roles "$dir" "${hosts[@]}"
  unset CHAOS_SLOW_EVERY CHAOS_SLOW_MS
  ip netns exec "bxs-$id-h2" "$app" ingress 1 "$n" "$cut_rate" 0 >"$dir/ledger" 2>"$dir/ingress.log" &
  local ingress=$!
  sleep 6
  local completed_at_cut outcomes_at_cut
  cut_link h1
  outcomes_at_cut=$(h1_outcomes)
  sleep 0.5
  # What was in flight when h1's cable went: the receipts PROCESSING then. The others'
  # finish under the claim they hold; h1's only by a new claim once their lease expired.
  sql "CREATE TABLE $schema.scale_at_cut AS SELECT message_id, attempts FROM $schema.inbox_receipts WHERE status = 'PROCESSING'"
  completed_at_cut=$(sql "SELECT count(*) FROM $schema.inbox_receipts WHERE status = 'COMPLETED'")
  sleep "$host_cut_seconds"
  local during
  during=$(($(sql "SELECT count(*) FROM $schema.inbox_receipts WHERE status = 'COMPLETED'") - completed_at_cut))
  heal_link h1
  wait "$ingress" || true
  local drained
  drained=$(wait_drained "$recovery_limit")
  sleep 1
  # What h1's worker did after the cut, by outcome: "stale" counts the attempts whose claim
  # guard (the handler's lock, or the guarded completion) found the claim gone: zero rows,
  # nothing of that attempt committed.
  local outcomes_after held expired taken_over h1_pids
  outcomes_after=$(h1_outcomes)
  h1_pids=$(paste -sd, "$dir/worker-h1.pids")
  held=$(sql "SELECT count(*) FROM $schema.scale_at_cut")
  # A receipt whose lease expired is marked suspect (it stays so once COMPLETED): of those
  # in flight at the cut, these were h1's.
  expired=$(sql "SELECT count(*) FROM $schema.scale_at_cut JOIN $schema.inbox_receipts r USING (message_id) WHERE r.suspect")
  taken_over=$(sql "SELECT count(*) FROM $schema.scale_at_cut JOIN $schema.inbox_receipts r USING (message_id)
                    JOIN $schema.chaos_rows w USING (message_id) WHERE r.suspect AND w.pid NOT IN ($h1_pids)")
  stop_roles "$dir"
  downstream "$dir"
  stop_kafka "$dir"
  local by_h1 restarts delta
  by_h1=$(sql "SELECT count(*) FROM $schema.chaos_rows WHERE pid IN ($h1_pids)")
  restarts=$(cat "$dir"/*.deaths 2>/dev/null | wc -l || true)
  delta=$(paste -d' ' <(echo "$outcomes_at_cut") <(echo "$outcomes_after") |
    awk '{ printf "completed %d, refused as stale %d, retried %d, infrastructure retries %d", $5 - $1, $6 - $2, $7 - $3, $8 - $4 }')
  judge cut-host "$n" "$drained" "$(audit "$dir" "$dir/ledger" "$dir/kafka.tsv")" \
    " in flight at the cut $held, of which h1's (lease expired) $expired, finished by h2/h3 $taken_over; completed during the ${host_cut_seconds}s cut $during; h1's worker after the cut: $delta; rows by h1 $by_h1; restarts $restarts"
  # A cut that took nothing from h1 proves nothing: the run fails rather than pass vacuously.
  if ((taken_over == 0 || during == 0)); then
    overall=1
    echo "scale: cut-host: not exercised (nothing re-claimed from h1, or nothing completed during the cut)" >&2
  fi
  # h1 came back holding claims that were no longer its own: the guard must have refused some.
  local refused
  refused=$(( $(cut -d' ' -f2 <<<"$outcomes_after") - $(cut -d' ' -f2 <<<"$outcomes_at_cut") ))
  if ((refused <= 0)); then
    overall=1
    echo "scale: cut-host: no late attempt of h1 reached the claim guard (its worker restarted? restarts $restarts)" >&2
  fi
}
h1_outcomes() {  # h1 worker's counters: completed stale retried infrastructure-retries
  echo "$(metric h1 9400 boxcar_inbox_processed_total 'outcome="completed"')" \
    "$(metric h1 9400 boxcar_inbox_processed_total 'outcome="stale"')" \
    "$(metric h1 9400 boxcar_inbox_processed_total 'outcome="retried"')" \
    "$(metric h1 9400 boxcar_worker_infrastructure_retries_total '')"
}

# --- cut-db: the database's cable pulled for 30 s ----------------------------------------
cut_db() {
  local dir="$work/cut-db" n=$dbcut_messages
  mkdir -p "$dir"
  start_kafka "$dir"
  new_schema scale_cut_db "$dir"
  start_roles "$dir" "${hosts[@]}"
  ip netns exec "bxs-$id-h2" "$app" ingress 1 "$n" "$dbcut_rate" 0 >"$dir/ledger" 2>"$dir/ingress.log" &
  local ingress=$!
  sleep 5
  local cut_at healed_at
  cut_at=$(sql "SELECT pg_catalog.now()")
  cut_link db
  sleep "$db_cut_seconds"
  healed_at=$(sql "SELECT pg_catalog.now()")
  heal_link db
  local healed=$SECONDS
  wait "$ingress" || true
  local drained
  drained=$(wait_drained "$recovery_limit")
  local recovery=-1
  ((drained < 0)) || recovery=$((SECONDS - healed))
  stop_roles "$dir"
  downstream "$dir"
  stop_kafka "$dir"
  # The cut was real: no transaction of any host committed a receipt or a row while it lasted
  # (1 s of slack for a commit already on the wire).
  local during
  during=$(sql "SELECT (SELECT count(*) FROM $schema.inbox_receipts WHERE created_at > '$cut_at'::timestamptz + interval '1 s'
                          AND created_at < '$healed_at')
                     + (SELECT count(*) FROM $schema.chaos_rows WHERE written_at > '$cut_at'::timestamptz + interval '1 s'
                          AND written_at < '$healed_at')")
  # Everyone recovers: each host's worker (any of its processes) committed rows after the heal.
  local h recovered=0 after
  for h in "${hosts[@]}"; do
    after=$(sql "SELECT count(*) FROM $schema.chaos_rows WHERE written_at > '$healed_at' AND pid IN ($(paste -sd, "$dir/worker-$h.pids"))")
    ((after > 0)) && recovered=$((recovered + 1))
  done
  local restarts
  restarts=$(cat "$dir"/*.deaths 2>/dev/null | wc -l || true)
  judge cut-db "$n" "$drained" "$(audit "$dir" "$dir/ledger" "$dir/kafka.tsv")" \
    " receipts accepted or rows written during the ${db_cut_seconds}s cut $during; drained ${recovery}s after the heal; hosts whose worker committed after the heal $recovered/${#hosts[@]}; restarts $restarts"
  if ((during != 0)); then overall=1; echo "scale: cut-db: receipts were accepted while the database was cut off" >&2; fi
  if ((recovered != ${#hosts[@]})); then overall=1; echo "scale: cut-db: not every host's worker recovered" >&2; fi
}

header='| phase    | messages | lost | double | kafka | drained  | invariants |'
for phase in ${only//,/ }; do
  case "$phase" in
    curve) curve ;;
    cut-host) echo "$header"; cut_host ;;
    cut-db) echo "$header"; cut_db ;;
    *) echo "scale: unknown phase $phase" >&2; exit 2 ;;
  esac
done

if ((${#results[@]})); then
  echo
  echo "$header"
  printf '%s\n' "${results[@]}"
  echo "columns: lost = accepted and without a committed row or an event in Kafka; double = identities with more than"
  echo "one committed row or outbox event; kafka = extra copies in the topic (distinct partition/offset); drained ="
  echo "seconds from the end of the load until nothing is left to process (I5 bound: ${recovery_limit} s)"
fi
echo "scale: $( ((quick)) && echo quick || echo full) run on $(nproc) cores took $SECONDS s"
if ((overall == 0)); then echo "scale: every invariant held"; else echo "scale: INVARIANT VIOLATIONS" >&2; fi
exit "$overall"
