// Metric labels stay bounded whatever senders put in their messages (docs/security.md,
// section 5): label values come from configuration or the handlers' supports lists.
#include <catch2/catch.hpp>

#include <random>
#include <sstream>

#include "boxcar/inbox/worker.hpp"
#include "exposition.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

/// How many series of `name` the exposition holds (lines `name{...} value`).
std::size_t series_count(const std::string& exposition, const std::string& name) {
  std::istringstream lines(exposition);
  std::size_t count = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(name + "{", 0) == 0) ++count;
  return count;
}

}  // namespace

TEST_CASE(
    "20,000 sender-chosen event types make a bounded number of processed series and the supported type keeps its "
    "label") {
  TestDatabase db;
  auto pool = db.pool(6);
  auto metrics = std::make_shared<Metrics>();
  const std::string consumer = "c.v1";
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {consumer}, .notify = false, .metrics = metrics});

  constexpr int kRandomTypes = 20000;
  constexpr int kSupported = 10;
  std::mt19937_64 random(12);
  std::vector<AcceptRequest> batch;
  for (int i = 0; i < kRandomTypes + kSupported; ++i) {
    const std::string type = i < kRandomTypes ? "evt." + std::to_string(random()) : "thing.happened";
    batch.push_back(message(consumer, "m-" + std::to_string(i), type));
    if (batch.size() == 2000) {
      inbox.accept_many(batch);
      batch.clear();
    }
  }
  if (!batch.empty()) inbox.accept_many(batch);
  REQUIRE(db.scalar("SELECT count(DISTINCT event_type) FROM {schema}.inbox_receipts") == kRandomTypes + 1);

  Worker worker(pool,
                {.schema = db.schema(),
                 .consumers = {consumer},
                 .batch_size = 50,
                 .claim_limit = 1000,
                 .lease = 30s,
                 .handler_timeout = 10s,
                 .metrics = metrics},
                {{.consumer = consumer,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([](const nlohmann::json&, HandlerContext&) {})}});
  worker.drain();
  REQUIRE(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD'") == kRandomTypes);
  REQUIRE(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == kSupported);

  const std::string text = metrics->serialize();
  // One series for the supported type's completions, one for every unsupported type.
  CHECK(series_count(text, "boxcar_inbox_processed_total") <= 4);
  CHECK(metric_value(text, "boxcar_inbox_processed_total",
                     {{"consumer", consumer}, {"event_type", "thing.happened"}, {"outcome", "completed"}}) ==
        kSupported);
  CHECK(metric_value(text, "boxcar_inbox_processed_total",
                     {{"consumer", consumer}, {"event_type", "(unsupported)"}, {"outcome", "unsupported"}}) ==
        kRandomTypes);
  // The accept counter's labels are the declared consumer and a fixed result.
  CHECK(series_count(text, "boxcar_inbox_accept_total") <= 5);
}
