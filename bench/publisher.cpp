// bench_publisher: how fast boxcar::Publisher drains emitted outbox rows to Kafka (the
// librdkafka mock cluster, in this process, over loopback TCP), beside two baselines
// measured in the same run:
//   (a) a plain librdkafka producer sending the same records with the same settings
//       (enable.idempotence=true, acks=all) to the same cluster, no database;
//   (b) the publisher's claim-batch + mark-published SQL run directly with libpqxx, no
//       Kafka.
// The publisher is bounded by the slower of the two: ratio = boxcar / min(a, b).
// Also the emit-commit -> published latency at a fixed 1,000 events/s (ordered, the
// default), and the ordered drain against the unordered one over 1,000 keys (case
// ordered: docs/publisher.md, "Ordering"; ratio target 0.7), and the drain from
// the partitioned outbox against one left unpartitioned at 0016 (case partitioned, target 0.9).
//
//   scripts/bench publisher [--events N] [--rounds R] [--case publish|ordered|partitioned|rss]...
// Last, the peak RSS of a publisher alone (bench/rss_probe.cpp): `rss publisher_peak_mb ...`.
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <algorithm>
#include <atomic>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include <pqxx/pqxx>

#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/publisher/detail/named_statements.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/core/uuid.hpp"
#include "harness.hpp"
#include "peak_rss.hpp"

namespace {

using namespace std::chrono_literals;
using boxcar::bench::Admin;
using boxcar::bench::Measurement;
using Clock = std::chrono::steady_clock;
using boxcar::bench::since;

constexpr const char* kSchema = "bench_publisher";
constexpr const char* kTopic = "bench";
constexpr double kTarget = 0.70;
// The partitioned outbox exists for retention without bloat, not at a throughput price:
// it should cost the publisher little.
constexpr double kPartitionedTarget = 0.90;
constexpr std::size_t kDefaultBatch = 1000;

// `count` outbox rows over `keys` keys, as an emitter would have written them, not yet
// due, so a warm-up can run first (untimed). Unordered (EmitOptions::ordered = false) by
// default: the publish cases compare the publisher with a raw producer and raw SQL, which
// know no key order. Ordered, the key-order trigger (0013) makes every event after a
// key's first WAITING, in emit (= insert) order.
void load(const std::string& url, int count, int keys = 50, bool ordered = false, const std::string& schema = kSchema) {
  Admin admin(url);
  admin.exec("TRUNCATE " + schema + ".outbox_events");
  admin.exec("INSERT INTO " + schema +
             ".outbox_events (event_id, event_type, schema_version, topic, message_key, tenant_scope, tenant_id, "
             "causation_id, payload, available_at, ordered) SELECT " +
             boxcar::bench::uuid_v7_sql("pg_catalog.now()") + ", 'order.projected', 1, '" + kTopic +
             "', 'tenant-' || (g % " + std::to_string(keys) + "), 'tenant', 'tenant-' || (g % " + std::to_string(keys) +
             "), 'm-' || g, "
             "'{\"orderId\":\"o-' || g || '\",\"total\":12.5}', now() + interval '1 day', " +
             (ordered ? "true" : "false") + " FROM generate_series(1, " + std::to_string(count) + ") g ORDER BY g");
}

// Makes the loaded rows due (untimed; the same for both sides that read the database).
void release(const std::string& url, const std::string& schema = kSchema) {
  Admin admin(url);
  admin.exec("UPDATE " + schema + ".outbox_events SET available_at = now() WHERE status = 'PENDING'");
  admin.exec("VACUUM ANALYZE " + schema + ".outbox_events");
  admin.checkpoint();
}

Measurement publish_boxcar(const std::string& url, const std::string& bootstrap, std::size_t batch, int count,
                           const std::string& schema = kSchema) {
  auto pool = boxcar::ConnectionPool::create({.url = url, .size = 4});
  boxcar::Publisher publisher(
      pool,
      {.schema = schema, .kafka = {{"bootstrap.servers", bootstrap}}, .batch_size = batch, .delivery_timeout = 30s});
  // Steady state, as for the raw producer: the producer's start-up (connections,
  // idempotent producer id, topic metadata) is paid once per process, not per event.
  {
    boxcar::OutboxEmitter outbox(pool, {.schema = schema, .notify = false});
    boxcar::Tx tx = pool->begin();
    outbox.emit(tx,
                boxcar::OutboxMessage{
                    .event_type = "warm-up", .schema_version = 1, .topic = kTopic, .payload = {{"warm", true}}},
                {.scope = boxcar::Scope::global()});
    tx.commit();
    publisher.drain();
  }
  release(url, schema);
  const auto start = Clock::now();
  publisher.drain();
  const double seconds = since(start);
  if (publisher.stats().delivered != static_cast<std::uint64_t>(count) + 1)
    throw std::runtime_error("publisher delivered " + std::to_string(publisher.stats().delivered) + " of " +
                             std::to_string(count));
  return {.units = static_cast<std::uint64_t>(count), .seconds = seconds};
}

struct RawRecord {
  std::string key, value, event_id, tenant, causation;
};

// (a): the same records, headers and producer settings, straight from memory.
Measurement produce_raw(const std::string& bootstrap, const std::vector<RawRecord>& records) {
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [k, v] : std::map<std::string, std::string>{{"bootstrap.servers", bootstrap},
                                                               {"enable.idempotence", "true"},
                                                               {"acks", "all"},
                                                               {"message.timeout.ms", "30000"},
                                                               {"socket.nagle.disable", "true"}})
    rd_kafka_conf_set(conf, k.c_str(), v.c_str(), error, sizeof error);
  static std::atomic<std::uint64_t> delivered;
  delivered = 0;
  rd_kafka_conf_set_dr_msg_cb(conf, [](rd_kafka_t*, const rd_kafka_message_t* m, void*) {
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) ++delivered;
  });
  rd_kafka_t* producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
  if (!producer) throw std::runtime_error(error);
  // Warm up like the publisher: one record through before the clock starts.
  rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(kTopic), RD_KAFKA_V_VALUE(const_cast<char*>("{}"), 2),
                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
  rd_kafka_flush(producer, 30000);
  delivered = 0;
  const auto start = Clock::now();
  for (const auto& r : records) {
    rd_kafka_headers_t* headers = rd_kafka_headers_new(6);
    const auto add = [&](const char* name, const std::string& value) {
      rd_kafka_header_add(headers, name, -1, value.data(), static_cast<ssize_t>(value.size()));
    };
    add("event_id", r.event_id);
    add("event_type", "order.projected");
    add("schema_version", "1");
    add("tenant_scope", "tenant");
    add("tenant_id", r.tenant);
    add("causation_id", r.causation);
    while (rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(kTopic),
                             RD_KAFKA_V_KEY(const_cast<char*>(r.key.data()), r.key.size()),
                             RD_KAFKA_V_VALUE(const_cast<char*>(r.value.data()), r.value.size()),
                             RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(headers),
                             RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
      rd_kafka_poll(producer, 10);
  }
  rd_kafka_flush(producer, 60000);
  const double seconds = since(start);
  rd_kafka_destroy(producer);
  if (delivered != records.size()) throw std::runtime_error("raw producer lost records");
  return {.units = records.size(), .seconds = seconds};
}

// (b): the publisher's database work alone.
constexpr long long kRawLeaseMs = 90000;
constexpr long long kUnboundedBytes = 1LL << 40;
Measurement claim_and_mark_raw(const std::string& url, std::size_t batch, int count) {
  release(url);
  pqxx::connection c(url);
  // The publisher's own statements: a claim of `batch` within an unbounded byte budget,
  // and the mark of what it claimed.
  const auto statements = boxcar::detail::publisher_statements();
  c.prepare("claim", boxcar::bench::library_sql(statements, "publisher.claim", kSchema));
  c.prepare("mark", boxcar::bench::library_sql(statements, "publisher.mark_published", kSchema));
  std::uint64_t done = 0;
  const auto start = Clock::now();
  while (true) {
    const std::string token = boxcar::uuid_v7();
    pqxx::result rows;
    {
      pqxx::nontransaction n(c);
      rows = n.exec_prepared("claim", static_cast<long long>(batch), token, kRawLeaseMs, kUnboundedBytes, true);
    }
    if (rows.empty()) break;
    std::string ids = "{";
    std::string first, last;  // the range of the batch's event ids, as the mark takes it
    for (const auto& row : rows) {
      const std::string event_id = row["event_id"].c_str();  // the partition key
      if (ids.size() > 1) ids += ',';
      ids += event_id;
      if (first.empty() || event_id < first) first = event_id;
      if (last.empty() || event_id > last) last = event_id;
    }
    pqxx::nontransaction n(c);
    n.exec_prepared("mark", ids + "}", token, first, last);
    done += rows.size();
  }
  const double seconds = since(start);
  if (done != static_cast<std::uint64_t>(count)) throw std::runtime_error("raw claim/mark lost rows");
  return {.units = done, .seconds = seconds};
}

std::vector<RawRecord> read_records(const std::string& url) {
  pqxx::connection c(url);
  pqxx::nontransaction n(c);
  std::vector<RawRecord> out;
  for (const auto& row :
       n.exec(std::string("SELECT message_key, payload, event_id::text, tenant_id, causation_id FROM ") + kSchema +
              ".outbox_events ORDER BY id"))
    out.push_back({row[0].c_str(), row[1].c_str(), row[2].c_str(), row[3].c_str(), row[4].c_str()});
  return out;
}

void measure_latency(const std::string& url, const std::string& bootstrap, int rate, double seconds) {
  Admin(url).exec(std::string("TRUNCATE ") + kSchema + ".outbox_events");
  std::mutex mutex;
  std::map<std::string, Clock::time_point> committed_at, published_at;
  auto pool = boxcar::ConnectionPool::create({.url = url, .size = 4});
  boxcar::Publisher publisher(pool, {.schema = kSchema,
                                     .kafka = {{"bootstrap.servers", bootstrap}},
                                     .batch_size = kDefaultBatch,
                                     .delivery_timeout = 30s,
                                     .on_delivered = [&](const std::vector<std::string>& ids) {
                                       const auto now = Clock::now();
                                       std::lock_guard lock(mutex);
                                       for (const auto& id : ids) published_at[id] = now;
                                     }});
  boxcar::OutboxEmitter outbox(pool, {.schema = kSchema});
  publisher.start();
  {
    // Steady state: the idempotent producer's start-up (connections, producer id) is
    // paid once per process, not per event; let one event pay it before measuring.
    boxcar::Tx tx = pool->begin();
    outbox.emit(tx,
                boxcar::OutboxMessage{
                    .event_type = "warm-up", .schema_version = 1, .topic = kTopic, .payload = {{"warm", true}}},
                {.scope = boxcar::Scope::global()});
    tx.commit();
    const auto until = Clock::now() + 30s;
    while (publisher.stats().delivered == 0 && Clock::now() < until) std::this_thread::sleep_for(5ms);
  }
  const int total = static_cast<int>(rate * seconds);
  const auto interval = std::chrono::nanoseconds(1'000'000'000 / rate);
  auto next = Clock::now();
  for (int i = 0; i < total; ++i) {
    std::this_thread::sleep_until(next);
    next += interval;
    boxcar::Tx tx = pool->begin();
    const auto e = outbox.emit(
        tx, boxcar::OutboxMessage{.event_type = "tick", .schema_version = 1, .topic = kTopic, .payload = {{"i", i}}},
        {.scope = boxcar::Scope::tenant(std::to_string(i % 10))});
    tx.commit();
    const auto now = Clock::now();
    std::lock_guard lock(mutex);
    committed_at[e.event_id] = now;
  }
  const auto end = Clock::now() + 60s;
  while (Clock::now() < end) {
    {
      std::lock_guard lock(mutex);
      if (published_at.size() >= committed_at.size()) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  publisher.stop();
  std::vector<double> ms;
  for (const auto& [id, t] : committed_at) {
    const auto p = published_at.find(id);
    if (p == published_at.end()) throw std::runtime_error("an event was not published within 60 s");
    ms.push_back(std::chrono::duration<double, std::milli>(p->second - t).count());
  }
  std::sort(ms.begin(), ms.end());
  const auto pct = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<std::size_t>(q * ms.size()))]; };
  std::cout << "\nlatency emit commit -> delivery report and PUBLISHED mark, " << rate << " events/s offered, " << total
            << " events (NOTIFY wake-ups):\n"
            << std::fixed << std::setprecision(2) << "  p50 " << pct(0.5) << " ms   p90 " << pct(0.9) << " ms   p99 "
            << pct(0.99) << " ms   max " << ms.back() << " ms\n"
            << "latency p99_ms " << pct(0.99) << " 50.00\n";
}

// Peak RSS of a Publisher alone (batch 1000, 4 batches in flight) draining kRssEvents
// 1 KiB events to this process's mock cluster, in a process of its own
// (bench/rss_probe.cpp): `rss publisher_peak_mb VALUE 128`.
void measure_rss(const std::string& url, const std::string& bootstrap) {
  constexpr int kRssEvents = 100000;
  constexpr const char* kRssSchema = "bench_publisher_rss";
  Admin admin(url);
  admin.exec(std::string("DROP SCHEMA IF EXISTS ") + kRssSchema + " CASCADE");
  boxcar::migrate(url, {.schema = kRssSchema});
  // A JSON payload of about 1 KiB each (1,029 bytes as text), due now; unordered, so the
  // probe measures full batches in flight.
  admin.exec(std::string("INSERT INTO ") + kRssSchema +
             ".outbox_events (event_id, event_type, schema_version, topic, message_key, tenant_scope, tenant_id, "
             "causation_id, payload, ordered) SELECT " +
             boxcar::bench::uuid_v7_sql("pg_catalog.now()") + ", 'order.projected', 1, '" + kTopic +
             "', 'tenant-' || (g % 50), 'tenant', 'tenant-' || (g % 50), 'm-' || g, "
             "jsonb_build_object('orderId', lpad(g::text, 8, '0'), 'pad', repeat('x', 995)), false "
             "FROM generate_series(1, " +
             std::to_string(kRssEvents) + ") g");
  admin.exec(std::string("VACUUM ANALYZE ") + kRssSchema + ".outbox_events");
  const double mib =
      boxcar::bench::run_probe_peak_mib({BOXCAR_RSS_PROBE_PATH, "publisher", "--database-url", url, "--schema",
                                         kRssSchema, "--bootstrap", bootstrap, "--events", std::to_string(kRssEvents)});
  std::cout << "\npeak RSS of a publisher process (batch 1000, 4 in flight) draining " << kRssEvents
            << " 1 KiB events, MiB:\n";
  boxcar::bench::print_rss_line("publisher_peak_mb", mib, 128);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int events = 100000;
    // --case NAME: publish (the batch sizes and latency), ordered, partitioned, rss
    std::vector<std::string> only;
    std::vector<char*> rest{argv[0]};
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--events" && i + 1 < argc)
        events = std::stoi(argv[++i]);
      else if (std::string(argv[i]) == "--case" && i + 1 < argc)
        only.emplace_back(argv[++i]);
      else
        rest.push_back(argv[i]);
    }
    const auto options = boxcar::bench::parse_options(static_cast<int>(rest.size()), rest.data());
    const std::string& url = options.database_url;
    Admin(url).exec(std::string("DROP SCHEMA IF EXISTS ") + kSchema + " CASCADE");
    boxcar::migrate(url, {.schema = kSchema});

    char error[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "0", error, sizeof error);
    // The mock brokers' sockets: no Nagle (else 40 ms stalls per response when quiet).
    rd_kafka_conf_set(conf, "socket.nagle.disable", "true", error, sizeof error);
    rd_kafka_t* mock_handle = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
    rd_kafka_mock_cluster_t* cluster = rd_kafka_mock_cluster_new(mock_handle, 3);
    rd_kafka_mock_topic_create(cluster, kTopic, 4, 3);
    const std::string bootstrap = rd_kafka_mock_cluster_bootstraps(cluster);

    std::cout << "bench_publisher: " << events << " outbox rows per measurement, mock cluster of 3 brokers "
              << "(topic with 4 partitions) in this process\n";
    std::vector<boxcar::bench::CaseResult> results;
    const auto wanted = [&](const std::string& name) {
      return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
    };
    for (const std::size_t batch : {std::size_t{100}, std::size_t{500}, kDefaultBatch, std::size_t{5000}}) {
      if (!wanted("publish")) break;
      const int rounds = batch == kDefaultBatch ? std::max(2, std::min(options.rounds, 3)) : 1;
      boxcar::bench::CaseResult result{.name = "publish_b" + std::to_string(batch),
                                       .detail = "batch " + std::to_string(batch) + ", events/s vs min(a, b)"};
      for (int round = 1; round <= rounds; ++round) {
        load(url, events);
        const auto records = read_records(url);
        const auto a = produce_raw(bootstrap, records);
        const auto b = claim_and_mark_raw(url, batch, events);
        load(url, events);
        const auto boxcar = publish_boxcar(url, bootstrap, batch, events);
        std::cout << "  " << result.name << " round " << round << "/" << rounds << ": (a) kafka only "
                  << static_cast<long>(a.rate()) << "/s  (b) database only " << static_cast<long>(b.rate())
                  << "/s  boxcar " << static_cast<long>(boxcar.rate()) << "/s  ratio " << std::fixed
                  << std::setprecision(2) << boxcar.rate() / std::min(a.rate(), b.rate()) << "\n";
        result.baseline.push_back(std::min(a.rate(), b.rate()));
        result.boxcar.push_back(boxcar.rate());
      }
      results.push_back(result);
    }
    if (wanted("publish")) measure_latency(url, bootstrap, 1000, 5.0);
    // Over 1,000 keys: the ordered drain goes one event per key per claim -> delivery ->
    // mark cycle. With batches of 1,000, one batch holds every key's head and the next
    // claim waits for its mark; with 250, the four batches in flight hold them all and each
    // mark frees the next claim while the other three are with the producer.
    for (const std::size_t batch : {std::size_t{250}, kDefaultBatch}) {
      if (!wanted("ordered")) break;
      constexpr int kKeys = 1000;
      results.push_back(boxcar::bench::compare(
          "ordered_k1000_b" + std::to_string(batch),
          "batch " + std::to_string(batch) + ", 1000 keys, ordered vs unordered events/s",
          std::max(2, std::min(options.rounds, 3)), [] {},
          [&] {
            load(url, events, kKeys, false);
            return publish_boxcar(url, bootstrap, batch, events);
          },
          [&] {
            load(url, events, kKeys, true);
            return publish_boxcar(url, bootstrap, batch, events);
          },
          std::cout));
    }
    // What the partitioned outbox (0017-0019) costs the publisher: the same drain from a
    // schema left at 0016, the last unpartitioned one, in the same run.
    if (wanted("partitioned")) {
      constexpr const char* kFlatSchema = "bench_publisher_flat";
      Admin(url).exec(std::string("DROP SCHEMA IF EXISTS ") + kFlatSchema + " CASCADE");
      boxcar::migrate(url, {.schema = kFlatSchema, .target_version = 16});
      results.push_back(boxcar::bench::compare(
          "partitioned_b" + std::to_string(kDefaultBatch),
          "batch " + std::to_string(kDefaultBatch) + ", partitioned vs unpartitioned (0016) events/s",
          std::max(2, std::min(options.rounds, 3)), [] {},
          [&] {
            load(url, events, 50, false, kFlatSchema);
            return publish_boxcar(url, bootstrap, kDefaultBatch, events, kFlatSchema);
          },
          [&] {
            load(url, events);
            return publish_boxcar(url, bootstrap, kDefaultBatch, events);
          },
          std::cout));
      Admin(url).exec(std::string("DROP SCHEMA ") + kFlatSchema + " CASCADE");
    }
    std::cout << "\n";
    boxcar::bench::print_table(std::cout, results);
    std::cout << "\n";
    for (const auto& r : results)
      if (r.name == "publish_b" + std::to_string(kDefaultBatch) || r.name.rfind("ordered_k1000", 0) == 0)
        boxcar::bench::print_ratio_line(std::cout, r, kTarget);
      else if (r.name.rfind("partitioned", 0) == 0)
        boxcar::bench::print_ratio_line(std::cout, r, kPartitionedTarget);
    if (wanted("rss")) measure_rss(url, bootstrap);
    rd_kafka_mock_cluster_destroy(cluster);
    rd_kafka_destroy(mock_handle);
    return 0;
  } catch (const boxcar::bench::UsageError& e) {
    std::cerr << e.what() << "\n" << boxcar::bench::usage(argv[0]);
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_publisher failed: " << e.what() << "\n";
    return 1;
  }
}
