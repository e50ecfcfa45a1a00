// Writes the conformance vectors of conformance/ (conformance/README.md): cases whose
// expected outputs come from this C++ library itself — canonicalize_text(),
// content_fingerprint(), Inbox::validate() and accept() into a real database, and
// OutboxEmitter::emit() read back from outbox_events. Every client, in any language, must
// reproduce them. Deterministic: the same build writes the same files (one fixed seed;
// event ids, which are random, are never written).
//
//   BOXCAR_TEST_DATABASE_URL=postgresql://... boxcar_conformance_generate conformance/
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "boxcar/core/canonical_json.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/testing/testing.hpp"
#include "conformance_cases.hpp"
#include "payload_generator.hpp"

using json = nlohmann::json;
using namespace boxcar;
using namespace boxcar::conformance;

namespace {

constexpr std::uint64_t kSeed = 20260052;

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 0x0F];
  }
  return out;
}

// ------------------------------------------------------------------------------------
// Canonical JSON

/// Serialises `value` as valid but non-canonical JSON text: members in a shuffled order,
/// whitespace between tokens, strings escaped differently (\u escapes for non-ASCII, \/),
/// numbers in other spellings of the same double. Its canonical form is `value`'s.
class NoisyWriter {
 public:
  explicit NoisyWriter(std::mt19937_64& random) : random_(random) {}

  std::string write(const json& value) {
    out_.clear();
    space();
    write_value(value);
    space();
    return out_;
  }

 private:
  std::uint64_t below(std::uint64_t bound) { return random_() % bound; }

  void space() {
    static constexpr const char* kBlanks[] = {"", "", "", " ", "\n", "\t", "\r\n  ", "  "};
    out_ += kBlanks[below(std::size(kBlanks))];
  }

  void write_string(const std::string& text) {
    if (below(3) != 0) {
      out_ += json(text).dump(-1, ' ', below(2) == 0);  // raw UTF-8, or \u escapes for non-ASCII
      return;
    }
    // Escapes of every kind, where JSON allows one.
    out_ += '"';
    for (const char c : text) {
      const auto b = static_cast<unsigned char>(c);
      if (c == '/' && below(2) == 0)
        out_ += "\\/";
      else if (b < 0x80 && (b < 0x20 || c == '"' || c == '\\' || below(8) == 0)) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, below(2) == 0 ? "\\u%04x" : "\\u%04X", b);
        out_ += escaped;
      } else {
        out_ += c;
      }
    }
    out_ += '"';
  }

  void write_number(const json& value) {
    if (!value.is_number_float() || below(2) == 0) {
      out_ += value.dump();
      return;
    }
    // The same double in another spelling: %.17g round-trips every double.
    char text[40];
    std::snprintf(text, sizeof text, below(2) == 0 ? "%.17g" : "%.17E", value.get<double>());
    std::string spelled = text;
    if (spelled.find_first_of("eE.") == std::string::npos) spelled += ".0";
    // %g never gives "inf" here: generated values are finite.
    out_ += spelled;
  }

  void write_value(const json& value) {
    switch (value.type()) {
      case json::value_t::object: {
        std::vector<std::string> keys;
        for (auto it = value.begin(); it != value.end(); ++it) keys.push_back(it.key());
        std::shuffle(keys.begin(), keys.end(), random_);
        out_ += '{';
        for (std::size_t i = 0; i < keys.size(); ++i) {
          if (i > 0) out_ += ',';
          space();
          write_string(keys[i]);
          space();
          out_ += ':';
          space();
          write_value(value.at(keys[i]));
          space();
        }
        out_ += '}';
        return;
      }
      case json::value_t::array:
        out_ += '[';
        for (std::size_t i = 0; i < value.size(); ++i) {
          if (i > 0) out_ += ',';
          space();
          write_value(value[i]);
          space();
        }
        out_ += ']';
        return;
      case json::value_t::string:
        write_string(value.get<std::string>());
        return;
      case json::value_t::number_float:
      case json::value_t::number_integer:
      case json::value_t::number_unsigned:
        write_number(value);
        return;
      default:
        out_ += value.dump();
    }
  }

  std::mt19937_64& random_;
  std::string out_;
};

/// The case for `text`: its canonical form, or the error canonicalize_text() reports.
json canonical_case(const std::string& name, const std::string& text, const CanonicalLimits& limits = {},
                    const std::string& rule = {}) {
  json c = {{"name", name}};
  if (is_valid_utf8(text))
    c["text"] = text;
  else
    c["textHex"] = hex(text);
  if (limits.max_depth != CanonicalLimits{}.max_depth || limits.max_bytes != CanonicalLimits{}.max_bytes)
    c["limits"] = {{"maxDepth", limits.max_depth}, {"maxBytes", limits.max_bytes}};
  try {
    c["canonical"] = canonicalize_text(text, limits);
  } catch (const JsonValueError& e) {
    c["error"] = {{"code", e.code()}, {"path", e.path()}};
  }
  if (!rule.empty()) c["rule"] = rule;
  return c;
}

json canonical_cases() {
  json cases = json::array();
  for (const auto& [name, text, rule] : kCanonicalTexts) cases.push_back(canonical_case(name, text, {}, rule));

  // Nesting at and beyond the depth limit, as arrays and as objects.
  const auto nested = [](std::size_t depth, bool objects) {
    std::string text;
    for (std::size_t i = 0; i < depth; ++i) text += objects ? "{\"a\":" : "[";
    text += "1";
    for (std::size_t i = 0; i < depth; ++i) text += objects ? "}" : "]";
    return text;
  };
  for (const std::size_t depth : {1, 2, 63, 64, 65, 100}) {
    cases.push_back(canonical_case("arrays nested " + std::to_string(depth) + " deep", nested(depth, false), {},
                                   "guide.payload.excessive-depth"));
    cases.push_back(canonical_case("objects nested " + std::to_string(depth) + " deep", nested(depth, true), {},
                                   "guide.payload.excessive-depth"));
  }
  // Limits other than the defaults: the size limit falls exactly on a string, a number, a
  // bracket; the depth limit on a small document.
  const std::string sized = R"({"a":"0123456789","b":[1.5,2,{"c":null}],"d":"\u00e9\ud83d\ude00"})";
  const std::size_t full = canonicalize_text(sized).size();
  for (std::size_t bytes = full - 30; bytes <= full + 1; ++bytes)
    cases.push_back(canonical_case("the size limit at " + std::to_string(bytes) + " bytes", sized,
                                   {.max_depth = 64, .max_bytes = bytes}, "guide.payload.oversized"));
  for (std::size_t depth = 1; depth <= 4; ++depth)
    cases.push_back(
        canonical_case("a depth limit of " + std::to_string(depth), sized, {.max_depth = depth, .max_bytes = 1 << 20}));

  // Generated documents, written noisily: the canonical form must not depend on the spelling.
  std::mt19937_64 rng(kSeed);
  testing::PayloadGenerator payloads(kSeed + 1, 8);
  NoisyWriter noisy(rng);
  for (int i = 0; i < 1200; ++i) {
    json value = payloads.payload();
    std::string text = noisy.write(value);
    // One document in six is damaged in a way that must be refused, at a known place.
    switch (rng() % 12) {
      case 0:
        text = text.substr(0, text.size() * (rng() % 100) / 100);  // truncated
        break;
      case 1: {
        const auto at = text.rfind('}');
        if (at != std::string::npos && value.size() > 0)  // a repeated member name
          text.insert(at, "," + json(value.begin().key()).dump() + ":0");
        break;
      }
      default:
        break;
    }
    cases.push_back(canonical_case("generated document " + std::to_string(i), text));
  }
  return cases;
}

// ------------------------------------------------------------------------------------
// Fingerprints

json fingerprint_cases() {
  json cases = json::array();
  const auto add = [&](const std::string& name, const std::string& event_type, int version,
                       const std::string& payload_text, const std::string& rule) {
    const std::string canonical = canonicalize_text(payload_text);
    json c = {{"name", name},
              {"eventType", event_type},
              {"schemaVersion", version},
              {"payloadText", payload_text},
              {"canonicalPayload", canonical},
              {"fingerprint", content_fingerprint(event_type, version, canonical)}};
    if (!rule.empty()) c["rule"] = rule;
    cases.push_back(c);
  };
  for (const auto& [name, event_type, version, payload, rule] : kFingerprintCases)
    add(name, event_type, version, payload, rule);

  std::mt19937_64 rng(kSeed + 2);
  testing::PayloadGenerator payloads(kSeed + 3, 6);
  NoisyWriter noisy(rng);
  int made = 0;
  while (made < 500) {
    const json value = payloads.payload();
    std::string text = noisy.write(value);
    try {
      canonicalize_text(text);
    } catch (const JsonValueError&) {
      continue;  // only payloads that have a fingerprint
    }
    const std::string event_type = rng() % 4 == 0 ? payloads.text(12) : "event." + std::to_string(rng() % 50);
    if (event_type.empty() || event_type.find('\0') != std::string::npos) continue;
    add("generated payload " + std::to_string(made), event_type, 1 + static_cast<int>(rng() % 1000), text, {});
    ++made;
  }
  return cases;
}

// ------------------------------------------------------------------------------------
// Accept requests

/// Runs every case of `suite` in order against a fresh schema: the error validate()
/// reports, or the row accept() stored.
json accept_suite(const AcceptSuite& suite) {
  testing::TestSchema db;
  Inbox inbox(db.pool(2), with_schema(suite.options, db.schema()));
  json cases = json::array();
  for (const auto& c : suite.cases) {
    json out = {{"name", c.name}, {"request", request_to_json(c.request, c.payload_text)}};
    if (!c.rule.empty()) out["rule"] = c.rule;
    try {
      const Receipt receipt = inbox.accept(c.request);
      const auto rows = db.query(
          "SELECT scope_kind, scope_id, source, consumer, message_id, event_type, "
          "schema_version, payload::text, metadata::text, fingerprint, ordering_key, "
          "park_after, status FROM {schema}.inbox_receipts WHERE id = " +
          std::to_string(receipt.id));
      const auto& r = rows.at(0);
      out["expect"] = {{"receipt",
                        {{"kind", receipt.kind == Receipt::Kind::Accepted ? "accepted" : "duplicate"},
                         {"status", to_string(receipt.status)}}},
                       {"row",
                        {{"scopeKind", r[0].c_str()},
                         {"scopeId", r[1].c_str()},
                         {"source", r[2].c_str()},
                         {"consumer", r[3].c_str()},
                         {"messageId", r[4].c_str()},
                         {"eventType", r[5].c_str()},
                         {"schemaVersion", r[6].as<int>()},
                         // jsonb's text is not canonical; its canonical form is the contract.
                         {"payload", canonicalize_text(r[7].c_str())},
                         {"metadata", canonicalize_text(r[8].c_str())},
                         {"fingerprint", r[9].c_str()},
                         {"orderingKey", r[10].is_null() ? json(nullptr) : json(r[10].c_str())},
                         {"parkAfter", r[11].is_null() ? json(nullptr) : json(r[11].as<int>())},
                         {"status", r[12].c_str()}}}};
    } catch (const InboxValidationError& e) {
      out["expect"] = {{"error", {{"code", e.code()}, {"field", e.field()}}}};
    } catch (const InboxConflictError& e) {
      out["expect"] = {{"error", {{"code", e.code()}}}};
    }
    cases.push_back(out);
  }
  return {{"name", suite.name}, {"inbox", options_to_json(suite.options)}, {"cases", cases}};
}

// ------------------------------------------------------------------------------------
// Emit requests

json emit_suite(const EmitSuite& suite) {
  testing::TestSchema db;
  auto pool = db.pool(2);
  OutboxEmitter outbox(pool, with_schema(suite.options, db.schema()));
  json cases = json::array();
  for (const auto& c : suite.cases) {
    json out = {{"name", c.name},
                {"event", event_to_json(c.message, c.payload_text)},
                {"options", emit_options_to_json(c.options)}};
    if (!c.rule.empty()) out["rule"] = c.rule;
    Tx tx = pool->begin();
    try {
      const EmittedEvent emitted = outbox.emit(tx, c.message, c.options);
      const auto rows = tx.exec(
          "SELECT event_type, schema_version, topic, message_key, tenant_scope, tenant_id, causation_id, "
          "correlation_id, traceparent, headers::text, payload, ordered, status, event_id::text "
          "FROM " +
          db.qualified("{schema}.outbox_events") + " WHERE id = " + std::to_string(emitted.id));
      const auto& r = rows.at(0);
      const std::string key = r[3].c_str();
      out["expect"] = {{"row",
                        {{"eventType", r[0].c_str()},
                         {"schemaVersion", r[1].as<int>()},
                         {"topic", r[2].c_str()},
                         // The event id is random: a key that is the event id says so.
                         {"messageKey", key == r[13].c_str() ? json({{"eventId", true}}) : json(key)},
                         {"tenantScope", r[4].c_str()},
                         {"tenantId", r[5].c_str()},
                         {"causationId", r[6].c_str()},
                         {"correlationId", r[7].c_str()},
                         {"traceparent", r[8].c_str()},
                         {"headers", canonicalize_text(r[9].c_str())},
                         {"payload", r[10].c_str()},
                         {"ordered", r[11].as<bool>()},
                         {"status", r[12].c_str()}}}};
    } catch (const OutboxValidationError& e) {
      out["expect"] = {{"error", {{"code", e.code()}, {"field", e.field()}}}};
    }
    tx.rollback();
    cases.push_back(out);
  }
  return {{"name", suite.name}, {"outbox", outbox_options_to_json(suite.options)}, {"cases", cases}};
}

// ------------------------------------------------------------------------------------
// Accept sequences: the usage guide's receipts, duplicates and conflicts.

json sequence_scenario(const Scenario& scenario) {
  testing::TestSchema db;
  Inbox inbox(db.pool(2), with_schema(scenario.options, db.schema()));
  json steps = json::array();
  for (const auto& step : scenario.steps) {
    const auto outcome_of = [](const AcceptResult& r) -> json {
      if (r.ok())
        return {{"kind", r.receipt().kind == Receipt::Kind::Accepted ? "accepted" : "duplicate"},
                {"status", to_string(r.receipt().status)}};
      return {{"error", r.error_code()}};
    };
    json s;
    if (step.batch.size() == 1 && !step.many) {
      s["accept"] = request_to_json(step.batch[0], step.payload_texts[0]);
      try {
        s["expect"] = outcome_of(AcceptResult(inbox.accept(step.batch[0])));
      } catch (const Error& e) {
        s["expect"] = {{"error", e.code()}};
      }
    } else {
      json batch = json::array();
      for (std::size_t i = 0; i < step.batch.size(); ++i)
        batch.push_back(request_to_json(step.batch[i], step.payload_texts[i]));
      s["acceptMany"] = batch;
      json expect = json::array();
      for (const auto& r : inbox.accept_many(step.batch)) expect.push_back(outcome_of(r));
      s["expect"] = expect;
    }
    if (!step.sql.empty()) {
      db.execute(step.sql);
      s["sql"] = step.sql;
    }
    steps.push_back(s);
  }
  const auto rows = db.count("SELECT count(*) FROM {schema}.inbox_receipts");
  return {{"name", scenario.name},
          {"rule", scenario.rule},
          {"inbox", options_to_json(scenario.options)},
          {"steps", steps},
          {"storedRows", rows}};
}

void write(const std::string& path, const json& document) {
  std::ofstream out(path, std::ios::binary);
  // One case per line: diffs of a regeneration stay readable.
  out << "{\n";
  bool first_member = true;
  for (const auto& [key, value] : document.items()) {
    out << (first_member ? "" : ",\n") << json(key).dump() << ": ";
    first_member = false;
    if (value.is_array()) {
      out << "[\n";
      for (std::size_t i = 0; i < value.size(); ++i) out << (i ? ",\n" : "") << value[i].dump();
      out << "\n]";
    } else {
      out << value.dump();
    }
  }
  out << "\n}\n";
  if (!out) throw std::runtime_error("cannot write " + path);
  std::cout << path << ": written\n";
}

json with_header(const char* what, json document) {
  document["format"] = 1;
  document["about"] = what;
  document["generator"] = "tests/conformance/generate_vectors.cpp (conformance/README.md)";
  return document;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: BOXCAR_TEST_DATABASE_URL=... " << argv[0] << " CONFORMANCE_DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  try {
    write(
        dir + "/canonical_json.json",
        with_header("JSON text -> its RFC 8785 canonical form, or the error (code, JSON Pointer) "
                    "canonicalize_text reports",
                    {{"limits", {{"maxDepth", CanonicalLimits{}.max_depth}, {"maxBytes", CanonicalLimits{}.max_bytes}}},
                     {"cases", canonical_cases()}}));
    write(dir + "/fingerprints.json",
          with_header("event type, schema version and payload -> canonical payload and content fingerprint",
                      {{"cases", fingerprint_cases()}}));
    json accept = json::array();
    for (const auto& suite : accept_suites()) accept.push_back(accept_suite(suite));
    write(dir + "/accept_requests.json",
          with_header("accept requests, run in order on a fresh schema -> the stored row, or the error (code, field)",
                      {{"suites", accept}}));
    json emit = json::array();
    for (const auto& suite : emit_suites()) emit.push_back(emit_suite(suite));
    write(dir + "/emit_requests.json",
          with_header("emit requests, each in a transaction of its own -> the outbox_events row, or the error "
                      "(code, field)",
                      {{"suites", emit}}));
    json scenarios = json::array();
    for (const auto& scenario : sequence_scenarios()) scenarios.push_back(sequence_scenario(scenario));
    write(dir + "/accept_sequences.json",
          with_header("accept and acceptMany steps on one fresh schema -> each outcome, and the rows stored",
                      {{"scenarios", scenarios}}));
    write(dir + "/rules.json",
          with_header("the rules of the usage guide this project follows; each is covered by the cases that "
                      "name it, or by the tests listed for it",
                      {{"rules", rules_json()}}));
  } catch (const std::exception& e) {
    std::cerr << "generate: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
