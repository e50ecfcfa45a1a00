// The conformance vectors (conformance/) that need a database agree with this library on
// every case: the rows accept() stores, the outbox rows emit() writes, and the outcomes of
// accept and accept_many sequences (duplicates, conflicts, a DEAD receipt's duplicate).
#include <catch2/catch.hpp>

#include <string>

#include "boxcar/core/canonical_json.hpp"
#include "boxcar/core/tx.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "conformance_files.hpp"
#include "conformance_json.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::conformance;
using namespace boxcar::testing;
using json = nlohmann::json;

namespace {

json receipt_json(const Receipt& r) {
  return {{"kind", r.kind == Receipt::Kind::Accepted ? "accepted" : "duplicate"}, {"status", to_string(r.status)}};
}

json outcome_json(const AcceptResult& r) {
  if (r.ok()) return receipt_json(r.receipt());
  return {{"error", r.error_code()}};
}

}  // namespace

TEST_CASE("every accept request vector stores its row, in order on a fresh schema, or fails with its error") {
  std::size_t cases = 0;
  const json file = load("accept_requests.json");
  for (const auto& suite : file.at("suites")) {
    TestDatabase db;
    Inbox inbox(db.pool(2), options_from_json(suite.at("inbox"), db.schema()));
    for (const auto& c : suite.at("cases")) {
      INFO(suite.at("name").get<std::string>() << ": " << c.at("name").get<std::string>());
      ++cases;
      const json& expect = c.at("expect");
      try {
        const Receipt receipt = inbox.accept(request_from_json(c.at("request")));
        REQUIRE(expect.contains("row"));
        CHECK(receipt_json(receipt) == expect.at("receipt"));
        const auto r = db.query(
                             "SELECT scope_kind, scope_id, source, consumer, message_id, event_type, "
                             "schema_version, payload::text, metadata::text, fingerprint, ordering_key, "
                             "park_after, status FROM {schema}.inbox_receipts WHERE id = " +
                             std::to_string(receipt.id))
                           .at(0);
        const json& row = expect.at("row");
        const json stored = {{"scopeKind", r[0].c_str()},
                             {"scopeId", r[1].c_str()},
                             {"source", r[2].c_str()},
                             {"consumer", r[3].c_str()},
                             {"messageId", r[4].c_str()},
                             {"eventType", r[5].c_str()},
                             {"schemaVersion", r[6].as<int>()},
                             {"payload", canonicalize_text(r[7].c_str())},
                             {"metadata", canonicalize_text(r[8].c_str())},
                             {"fingerprint", r[9].c_str()},
                             {"orderingKey", r[10].is_null() ? json(nullptr) : json(r[10].c_str())},
                             {"parkAfter", r[11].is_null() ? json(nullptr) : json(r[11].as<int>())},
                             {"status", r[12].c_str()}};
        CHECK(stored == row);
      } catch (const Error& e) {
        REQUIRE(expect.contains("error"));
        CHECK(e.code() == expect.at("error").at("code").get<std::string>());
        if (const auto* v = dynamic_cast<const InboxValidationError*>(&e))
          CHECK(v->field() == expect.at("error").at("field").get<std::string>());
      }
    }
  }
  CHECK(cases >= 200);
}

TEST_CASE("every emit vector writes its outbox row in the caller's transaction, or fails with its error") {
  std::size_t cases = 0;
  const json file = load("emit_requests.json");
  for (const auto& suite : file.at("suites")) {
    TestDatabase db;
    auto pool = db.pool(2);
    OutboxEmitter outbox(pool, outbox_options_from_json(suite.at("outbox"), db.schema()));
    for (const auto& c : suite.at("cases")) {
      INFO(suite.at("name").get<std::string>() << ": " << c.at("name").get<std::string>());
      ++cases;
      const json& expect = c.at("expect");
      Tx tx = pool->begin();
      try {
        const EmittedEvent emitted =
            outbox.emit(tx, event_from_json(c.at("event")), emit_options_from_json(c.at("options")));
        REQUIRE(expect.contains("row"));
        const auto r = tx.exec(
                             "SELECT event_type, schema_version, topic, message_key, tenant_scope, tenant_id, "
                             "causation_id, correlation_id, traceparent, headers::text, payload, ordered, status "
                             "FROM " +
                             db.qualified("{schema}.outbox_events") + " WHERE id = " + std::to_string(emitted.id))
                           .at(0);
        const std::string key = r[3].c_str();
        const json stored = {{"eventType", r[0].c_str()},
                             {"schemaVersion", r[1].as<int>()},
                             {"topic", r[2].c_str()},
                             {"messageKey", key == emitted.event_id ? json({{"eventId", true}}) : json(key)},
                             {"tenantScope", r[4].c_str()},
                             {"tenantId", r[5].c_str()},
                             {"causationId", r[6].c_str()},
                             {"correlationId", r[7].c_str()},
                             {"traceparent", r[8].c_str()},
                             {"headers", canonicalize_text(r[9].c_str())},
                             {"payload", r[10].c_str()},
                             {"ordered", r[11].as<bool>()},
                             {"status", r[12].c_str()}};
        CHECK(stored == expect.at("row"));
      } catch (const OutboxValidationError& e) {
        REQUIRE(expect.contains("error"));
        CHECK(e.code() == expect.at("error").at("code").get<std::string>());
        CHECK(e.field() == expect.at("error").at("field").get<std::string>());
      }
      tx.rollback();
    }
  }
  CHECK(cases >= 100);
}

TEST_CASE("every accept sequence vector gives its outcomes step by step and stores its rows") {
  const json scenarios = load("accept_sequences.json").at("scenarios");
  REQUIRE(scenarios.size() >= 10);
  for (const auto& scenario : scenarios) {
    INFO(scenario.at("name").get<std::string>());
    TestDatabase db;
    Inbox inbox(db.pool(2), options_from_json(scenario.at("inbox"), db.schema()));
    for (const auto& step : scenario.at("steps")) {
      if (step.contains("accept")) {
        json outcome;
        try {
          outcome = receipt_json(inbox.accept(request_from_json(step.at("accept"))));
        } catch (const Error& e) {
          outcome = {{"error", e.code()}};
        }
        CHECK(outcome == step.at("expect"));
      } else {
        std::vector<AcceptRequest> batch;
        for (const auto& r : step.at("acceptMany")) batch.push_back(request_from_json(r));
        json outcomes = json::array();
        for (const auto& r : inbox.accept_many(batch)) outcomes.push_back(outcome_json(r));
        CHECK(outcomes == step.at("expect"));
      }
      if (step.contains("sql")) db.execute(step.at("sql").get<std::string>());
    }
    CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == scenario.at("storedRows").get<std::int64_t>());
  }
}
