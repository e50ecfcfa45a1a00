// The conformance vectors (conformance/) agree with this library on every case that needs
// no database: canonical JSON, fingerprints, and accept requests' validation and their
// canonical payload and fingerprint. tests/pg/conformance_test.cpp replays the rest (the
// stored rows, emits, accept sequences); the TypeScript client replays them all.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "boxcar/core/canonical_json.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "conformance_files.hpp"
#include "conformance_json.hpp"

using namespace boxcar;
using namespace boxcar::conformance;
using json = nlohmann::json;

namespace {

/// Counts the cases checked, so a vector file that lost its cases fails too.
std::size_t checked_cases(const json& cases) { return cases.size(); }

}  // namespace

TEST_CASE("every canonical JSON vector gives its canonical form or its error at its path") {
  const json file = load("canonical_json.json");
  REQUIRE(checked_cases(file.at("cases")) >= 1000);
  for (const auto& c : file.at("cases")) {
    INFO(c.at("name").get<std::string>());
    const CanonicalLimits limits = c.contains("limits") ? limits_from_json(c.at("limits")) : CanonicalLimits{};
    const std::string text = case_text(c);
    if (c.contains("canonical")) {
      CHECK(canonicalize_text(text, limits) == c.at("canonical").get<std::string>());
    } else {
      try {
        const std::string canonical = canonicalize_text(text, limits);
        FAIL_CHECK("expected " << c.at("error").dump() << ", got " << canonical);
      } catch (const JsonValueError& e) {
        CHECK(e.code() == c.at("error").at("code").get<std::string>());
        CHECK(e.path() == c.at("error").at("path").get<std::string>());
      }
    }
  }
}

TEST_CASE("every fingerprint vector gives its canonical payload and content fingerprint") {
  const json file = load("fingerprints.json");
  REQUIRE(checked_cases(file.at("cases")) >= 300);
  for (const auto& c : file.at("cases")) {
    INFO(c.at("name").get<std::string>());
    const std::string canonical = canonicalize_text(c.at("payloadText").get<std::string>());
    CHECK(canonical == c.at("canonicalPayload").get<std::string>());
    CHECK(content_fingerprint(c.at("eventType").get<std::string>(), c.at("schemaVersion").get<int>(), canonical) ==
          c.at("fingerprint").get<std::string>());
  }
}

TEST_CASE(
    "every accept request vector is refused with its code and field, or validates to its payload and fingerprint") {
  const json file = load("accept_requests.json");
  std::size_t cases = 0;
  for (const auto& suite : file.at("suites")) {
    // validate() never touches the database: the pool is never used.
    auto pool = ConnectionPool::create({.url = "postgresql://conformance.invalid/none"});
    Inbox inbox(pool, options_from_json(suite.at("inbox"), "boxcar"));
    for (const auto& c : suite.at("cases")) {
      INFO(suite.at("name").get<std::string>() << ": " << c.at("name").get<std::string>());
      ++cases;
      const AcceptRequest request = request_from_json(c.at("request"));
      const json& expect = c.at("expect");
      if (expect.contains("error") && expect.at("error").contains("field")) {
        try {
          inbox.validate(request);
          FAIL_CHECK("expected " << expect.at("error").dump());
        } catch (const InboxValidationError& e) {
          CHECK(e.code() == expect.at("error").at("code").get<std::string>());
          CHECK(e.field() == expect.at("error").at("field").get<std::string>());
        }
        continue;
      }
      CHECK_NOTHROW(inbox.validate(request));
      if (!expect.contains("row")) continue;
      const json& row = expect.at("row");
      const std::string canonical = canonicalize(request.payload, inbox.options().payload_limits);
      CHECK(canonical == row.at("payload").get<std::string>());
      CHECK(content_fingerprint(request.event_type, request.schema_version, canonical) ==
            row.at("fingerprint").get<std::string>());
    }
  }
  CHECK(cases >= 200);
}

TEST_CASE("every rule of the usage guide is covered by a vector case or names the client test that covers it") {
  std::set<std::string> covered;
  const auto collect = [&](const json& cases) {
    for (const auto& c : cases)
      if (c.contains("rule")) covered.insert(c.at("rule").get<std::string>());
  };
  // Each file held in a variable: a range-for over a member of a temporary would dangle.
  const json canonical = load("canonical_json.json"), fingerprints = load("fingerprints.json"),
             accept = load("accept_requests.json"), emit = load("emit_requests.json"),
             sequences = load("accept_sequences.json");
  collect(canonical.at("cases"));
  collect(fingerprints.at("cases"));
  for (const auto& suite : accept.at("suites")) collect(suite.at("cases"));
  for (const auto& suite : emit.at("suites")) collect(suite.at("cases"));
  collect(sequences.at("scenarios"));
  const json rules = load("rules.json")["rules"];
  REQUIRE(rules.size() >= 15);
  std::set<std::string> known;
  for (const auto& rule : rules) {
    const auto id = rule.at("id").get<std::string>();
    known.insert(id);
    INFO(id);
    CHECK((covered.contains(id) || rule.contains("typescriptTest")));
  }
  for (const auto& id : covered) {
    INFO(id);
    CHECK(known.contains(id));  // a case names a rule that exists
  }
}

TEST_CASE("the vectors hold at least 2,000 cases") {
  std::size_t total = load("canonical_json.json").at("cases").size() + load("fingerprints.json").at("cases").size() +
                      load("accept_sequences.json").at("scenarios").size();
  const json accept = load("accept_requests.json"), emit = load("emit_requests.json");
  for (const auto& suite : accept.at("suites")) total += suite.at("cases").size();
  for (const auto& suite : emit.at("suites")) total += suite.at("cases").size();
  CHECK(total >= 2000);
}
