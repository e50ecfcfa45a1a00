// The payload round trip through PostgreSQL: whatever accept() takes, the handler gets
// back (from jsonb, via nlohmann) a value with the same canonical form, and emitting it
// into the outbox succeeds. Checked on thousands of generated payloads.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "boxcar/inbox/worker.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/core/canonical_json.hpp"
#include "payload_generator.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

const std::string kConsumer = "payloads.v1";

/// accept → worker handler captures the payload and emits it → outbox, on one schema.
struct RoundTrip {
  TestDatabase db;
  std::shared_ptr<ConnectionPool> pool = db.pool(8);
  Inbox inbox{pool, {.schema = db.schema(), .consumers = {kConsumer}, .notify = false}};
  OutboxEmitter outbox{pool, {.schema = db.schema(), .notify = false}};
  std::mutex mutex;
  std::map<std::string, nlohmann::json> captured;  // by message id
  std::map<std::string, std::string> emit_errors;  // by message id

  /// Runs the worker until nothing is due. max_attempts 1: any failure is DEAD at once.
  void drain() {
    Worker worker(
        pool,
        {.schema = db.schema(),
         .consumers = {kConsumer},
         .lease = 30s,
         .handler_timeout = 10s,
         .max_attempts = 1,
         .backoff = {.base = 0ms, .cap = 0ms}},
        {{.consumer = kConsumer,
          .supports = {{"payload.generated", 1}},
          .handler = handler([this](const nlohmann::json& payload, HandlerContext& c) {
            {
              const std::lock_guard lock(mutex);
              captured[c.message_id] = payload;
            }
            try {
              outbox.emit(
                  c.tx,
                  OutboxMessage{
                      .event_type = "payload.echoed", .schema_version = 1, .topic = "payloads", .payload = payload},
                  {.scope = c.scope, .causation_id = c.message_id});
            } catch (const std::exception& e) {
              const std::lock_guard lock(mutex);
              emit_errors[c.message_id] = e.what();
              throw;
            }
          })}});
    worker.drain();
  }

  /// The canonical payload of every outbox row, by the message that caused it.
  std::map<std::string, std::string> emitted() const {
    std::map<std::string, std::string> out;
    for (const auto& row : db.query("SELECT causation_id, payload FROM {schema}.outbox_events")) {
      out[row["causation_id"].as<std::string>()] = row["payload"].as<std::string>();
    }
    return out;
  }
};

AcceptRequest request(const std::string& id, nlohmann::json payload) {
  return {.scope = Scope::tenant("t1"),
          .source = "generator",
          .consumer = kConsumer,
          .message_id = id,
          .event_type = "payload.generated",
          .schema_version = 1,
          .payload = std::move(payload)};
}

}  // namespace

TEST_CASE("numbers at the edges of the number rule come back from jsonb with the same canonical form") {
  RoundTrip t;
  const nlohmann::json payload = {{"safe", 9007199254740991},
                                  {"negativeSafe", -9007199254740991.0},
                                  {"exponent", 1e21},
                                  {"huge", 1.7976931348623157e308},
                                  {"subnormal", 5e-324},
                                  {"small", 1e-7},
                                  {"negativeZero", -0.0},
                                  {"fraction", 4503599627370495.5},
                                  {"thirds", 333333333.33333329}};
  const std::string canonical = canonicalize(payload);
  REQUIRE(canonical == R"({"exponent":1e+21,"fraction":4503599627370495.5,"huge":1.7976931348623157e+308,)"
                       R"("negativeSafe":-9007199254740991,"negativeZero":0,"safe":9007199254740991,"small":1e-7,)"
                       R"("subnormal":5e-324,"thirds":333333333.3333333})");
  t.inbox.accept(request("edges", payload));

  // 1e17 used to be accepted, come back as a 64-bit integer and fail the handler's emit.
  for (const nlohmann::json& refused :
       {nlohmann::json(1e17), nlohmann::json(100000000000000000), nlohmann::json(9007199254740992.0)}) {
    try {
      t.inbox.accept(request("refused", {{"n", refused}}));
      FAIL("accepted " << refused.dump());
    } catch (const InboxValidationError& e) {
      CHECK(e.code() == "JSON_INTEGER_OUT_OF_RANGE");
      CHECK(e.field() == "payload/n");
    }
  }

  t.drain();
  CHECK(t.emit_errors.empty());
  REQUIRE(t.captured.count("edges") == 1);
  CHECK(canonicalize(t.captured.at("edges")) == canonical);
  CHECK(t.emitted() == std::map<std::string, std::string>{{"edges", canonical}});
  CHECK(t.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 1);
}

TEST_CASE(
    "every generated payload that accept takes reaches the handler with the same canonical form "
    "and can be emitted again") {
  constexpr std::size_t kPayloads = 3000;
  constexpr std::size_t kBatch = 250;
  RoundTrip t;
  PayloadGenerator generate(20240917, CanonicalLimits{}.max_depth);

  std::map<std::string, std::string> expected;  // canonical payload by message id
  std::map<std::string, std::string> refused;   // error code by message id
  for (std::size_t first = 0; first < kPayloads; first += kBatch) {
    std::vector<AcceptRequest> batch;
    for (std::size_t i = first; i < first + kBatch; ++i) {
      batch.push_back(request("p-" + std::to_string(i), generate.payload()));
    }
    const auto results = t.inbox.accept_many(batch);
    REQUIRE(results.size() == batch.size());
    for (std::size_t k = 0; k < batch.size(); ++k) {
      const AcceptRequest& item = batch[k];
      if (!results[k].ok()) {
        refused[item.message_id] = results[k].error_code();
        continue;
      }
      const std::string canonical = canonicalize(item.payload);
      // The same bytes whether the producer sent the value or ASCII-only text with
      // \u escapes (surrogate pairs for non-BMP characters).
      REQUIRE(canonicalize_text(item.payload.dump(-1, ' ', true)) == canonical);
      expected[item.message_id] = canonical;
    }
  }
  // The generator covers both sides of the rule, and the rule is the only refusal.
  CHECK(expected.size() > kPayloads * 3 / 4);
  CHECK(refused.size() > 10);
  for (const auto& [id, code] : refused) {
    INFO(id);
    CHECK(code == "JSON_INTEGER_OUT_OF_RANGE");
  }

  t.drain();

  std::vector<std::string> mismatches;
  for (const auto& [id, canonical] : expected) {
    const auto found = t.captured.find(id);
    if (found == t.captured.end()) {
      mismatches.push_back(id + ": handler never ran");
      continue;
    }
    try {
      if (canonicalize(found->second) != canonical) {
        mismatches.push_back(id + ": handler got " + found->second.dump() + ", accepted " + canonical);
      }
    } catch (const JsonValueError& e) {
      mismatches.push_back(id + ": handler got a payload that does not canonicalise: " + e.what());
    }
  }
  for (const auto& [id, error] : t.emit_errors) mismatches.push_back(id + ": emit failed: " + error);
  // The outbox holds exactly the canonical bytes the inbox fingerprinted.
  const auto emitted = t.emitted();
  for (const auto& [id, canonical] : expected) {
    const auto found = emitted.find(id);
    if (found != emitted.end() && found->second != canonical) {
      mismatches.push_back(id + ": emitted " + found->second + ", accepted " + canonical);
    }
  }
  INFO(mismatches.size() << " mismatches; the first: " << (mismatches.empty() ? "none" : mismatches.front()));
  CHECK(mismatches.empty());
  CHECK(emitted.size() == expected.size());
  CHECK(t.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") ==
        static_cast<std::int64_t>(expected.size()));
}
