// bench_ordering: what per-key ordering (docs/ordering.md) costs a drain. The same
// messages, spread over 1,000 keys in arrival order, drained by the same Worker (16 handler
// threads) from a consumer that orders by key and from one that does not, in the same run.
//
//   scripts/bench ordering [--rounds N] [--messages M] [--batch 1|32]
//
//   ordered_t16          batch_size 1: ordered vs unordered
//   ordered_batched_t16  batch_size 32: ordered vs unordered
// The handler inserts one application row per message in context.tx. The last lines are
// `ratio CASE VALUE TARGET`; the target is 0.70: per-key order may cost at most 30%.
#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include "boxcar/core/migrate.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/inbox/worker.hpp"
#include "harness.hpp"

namespace {

using namespace std::chrono_literals;
using boxcar::bench::Admin;
using boxcar::bench::CaseResult;
using boxcar::bench::Measurement;
using Clock = std::chrono::steady_clock;

constexpr const char* kPlainSchema = "bench_order_plain";
constexpr const char* kKeyedSchema = "bench_order_keyed";
constexpr const char* kConsumer = "bench.v1";
constexpr int kKeys = 1000;
constexpr double kTarget = 0.70;

boxcar::AcceptRequest message(int i) {
  return {.scope = boxcar::Scope::tenant("tenant-1"),
          .source = "bench",
          .consumer = kConsumer,
          .message_id = "m-" + std::to_string(i),
          .event_type = "order.created",
          .schema_version = 1,
          .payload = {{"orderId", "o-" + std::to_string(i % kKeys)}, {"seq", i / kKeys}}};
}

// Both schemas get the same `count` messages (untimed): one consumer orders by orderId.
void load(const std::string& url, int count) {
  Admin admin(url);
  for (const char* schema : {kPlainSchema, kKeyedSchema})
    admin.exec(std::string("TRUNCATE ") + schema + ".inbox_receipts, " + schema + ".inbox_ordering_keys, " + schema +
               ".app_rows");
  auto pool = boxcar::ConnectionPool::create({.url = url, .size = 4});
  for (const bool ordered : {false, true}) {
    boxcar::InboxOptions options{
        .schema = ordered ? kKeyedSchema : kPlainSchema, .consumers = {kConsumer}, .notify = false};
    if (ordered) options.ordering = {{kConsumer, {.key = boxcar::OrderingKey::payload_pointer("/orderId")}}};
    boxcar::Inbox inbox(pool, options);
    std::vector<boxcar::AcceptRequest> batch;
    for (int i = 0; i < count; ++i) {
      batch.push_back(message(i));
      if (batch.size() == 1000 || i + 1 == count) {
        for (const auto& r : inbox.accept_many(batch)) r.rethrow_if_error();
        batch.clear();
      }
    }
  }
  for (const char* schema : {kPlainSchema, kKeyedSchema})
    admin.exec(std::string("VACUUM ANALYZE ") + schema + ".inbox_receipts");
  admin.checkpoint();
}

class InsertRow final : public boxcar::InboxHandler {
 public:
  explicit InsertRow(std::string schema) : sql_("INSERT INTO " + schema + ".app_rows (message_id) VALUES ($1)") {}
  void handle(const nlohmann::json&, boxcar::HandlerContext& context) override {
    context.tx.exec(sql_, context.message_id);
  }

 private:
  std::string sql_;
};

Measurement drain(const std::string& url, const char* schema, std::size_t batch_size, int count) {
  auto pool = boxcar::ConnectionPool::create({.url = url, .size = 18});
  boxcar::Worker worker(
      pool,
      {.schema = schema,
       .consumers = {kConsumer},
       .concurrency = 16,
       .batch_size = batch_size,
       .claim_limit = 32,
       .lease = 60s,
       .handler_timeout = 30s,
       .poll_interval = 50ms},
      {{.consumer = kConsumer, .supports = {{"order.created", 1}}, .handler = std::make_shared<InsertRow>(schema)}});
  const auto start = Clock::now();
  worker.start();
  boxcar::bench::wait_until([&] { return worker.stats().completed >= static_cast<std::uint64_t>(count); });
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  worker.stop();
  return {.units = static_cast<std::uint64_t>(count), .seconds = elapsed};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int messages = 20000;
    std::vector<std::size_t> batches{1, 32};
    std::vector<char*> rest{argv[0]};
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--messages" && i + 1 < argc)
        messages = std::stoi(argv[++i]);
      else if (std::string(argv[i]) == "--batch" && i + 1 < argc) {
        // The two cases' names say their batch size: no other one has a name.
        const std::string batch = argv[++i];
        if (batch != "1" && batch != "32")
          throw boxcar::bench::UsageError("--batch needs 1 or 32, got '" + batch + "'");
        batches = {batch == "1" ? std::size_t{1} : std::size_t{32}};
      } else
        rest.push_back(argv[i]);
    }
    const auto options = boxcar::bench::parse_options(static_cast<int>(rest.size()), rest.data());
    const std::string& url = options.database_url;
    for (const char* schema : {kPlainSchema, kKeyedSchema}) {
      Admin(url).exec(std::string("DROP SCHEMA IF EXISTS ") + schema + " CASCADE");
      boxcar::migrate(url, {.schema = schema});
      Admin(url).exec(std::string("CREATE TABLE ") + schema + ".app_rows (message_id text NOT NULL)");
    }
    std::cout << "bench_ordering: drain " << messages << " messages over " << kKeys << " keys, 16 threads; "
              << options.rounds << " interleaved rounds per case, medians (baseline: the same consumer unordered)\n";
    std::vector<CaseResult> results;
    for (const std::size_t batch : batches) {
      const std::string name = batch == 1 ? "ordered_t16" : "ordered_batched_t16";
      results.push_back(boxcar::bench::compare(
          name, "16 threads, batch " + std::to_string(batch) + ", msg/s, ordered vs unordered", options.rounds,
          [&] { load(url, messages); }, [&] { return drain(url, kPlainSchema, batch, messages); },
          [&] { return drain(url, kKeyedSchema, batch, messages); }, std::cout));
    }
    std::cout << "\n";
    boxcar::bench::print_table(std::cout, results);
    std::cout << "\n";
    for (const auto& r : results) boxcar::bench::print_ratio_line(std::cout, r, kTarget);
    return 0;
  } catch (const boxcar::bench::UsageError& e) {
    std::cerr << "bench_ordering: " << e.what() << "\nusage: bench_ordering --database-url URL [--rounds N] "
              << "[--messages M] [--batch 1|32]\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_ordering: " << e.what() << "\n";
    return 1;
  }
}
