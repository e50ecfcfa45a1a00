// The hand-written inputs of the conformance vectors: one case or more per rule of the
// usage guide and of docs/schema.md ("Payload JSON"), and the boundaries of every
// validation. The generator (generate_vectors.cpp) runs them through the C++ library to
// get their expected outputs; nothing here states an expected output.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "conformance_json.hpp"
#include "payload_generator.hpp"

namespace boxcar::conformance {

struct CanonicalText {
  std::string name;
  std::string text;
  std::string rule{};
};

using namespace std::string_literals;

// JSON texts for canonicalize_text(): numbers, Unicode member order, escapes, parse errors
// at every kind of position (the path an error names depends on where the parser was).
inline const std::vector<CanonicalText> kCanonicalTexts = {
    // Numbers: RFC 8785 §3.2.2.3 (ECMAScript Number::toString) and the number rule.
    {"zero", "0"},
    {"negative zero prints as 0", "-0"},
    {"negative zero as a fraction", "-0.0"},
    {"one point zero", "1.0"},
    {"an exponent spelling of an integer", "1E2"},
    {"a negative exponent", "1e-7"},
    {"the last plain fraction", "0.000001"},
    {"one tenth", "0.1"},
    {"a third", "0.3333333333333333"},
    {"the smallest subnormal", "5e-324"},
    {"below the smallest subnormal rounds to zero", "1e-400"},
    {"the largest double", "1.7976931348623157e308"},
    {"a literal beyond the double range", "1e400", "guide.payload.non-finite"},
    {"a negative literal beyond the double range", "-1e400", "guide.payload.non-finite"},
    {"a literal beyond the double range inside an array", "[1,2,1e999]", "guide.payload.non-finite"},
    {"a literal beyond the double range as a member", R"({"a":{"b":1e999}})", "guide.payload.non-finite"},
    {"the largest safe integer", "9007199254740991"},
    {"the smallest safe integer", "-9007199254740991"},
    {"2^53 is refused", "9007199254740992"},
    {"2^53 + 1 is refused", "9007199254740993"},
    {"1e17 is refused", "1e17"},
    {"1e17 spelled as digits is refused", "100000000000000000"},
    {"1e17 spelled with a fraction is refused", "1.0e17"},
    {"2^60 is refused", "1152921504606846976"},
    {"an integer beyond 64 bits below 1e21 is refused", "99999999999999999999"},
    {"just below 1e21 is refused", "999999999999999900000"},
    {"1e21 prints in exponent form", "1e21"},
    {"an integer literal of 1e21 prints in exponent form", "1000000000000000000000"},
    {"a 30-digit integer literal", "123456789012345678901234567890"},
    {"1e300", "1E+300"},
    {"a large fraction", "4503599627370495.5"},
    {"a fraction that rounds to 2^53 is refused", "9007199254740991.5"},
    {"a refused number nested in an array", R"({"items":[1,{"n":9007199254740993}]})"},
    {"numbers in an array", "[1,-1,0.5,-0.5,1e-6,1e-7,123e-20,1e20,1e21,1e22]"},
    {"many digits", "3.14159265358979323846264338327950288"},
    {"a leading zero is malformed", "01"},
    {"a leading plus is malformed", "+1"},
    {"a bare fraction dot is malformed", "1."},
    {"a leading dot is malformed", ".5"},
    {"an exponent without digits is malformed", "1e"},
    {"a minus without digits is malformed", "-"},
    {"NaN is not JSON", "NaN"},
    {"Infinity is not JSON", "[Infinity]"},
    // Strings and escapes: RFC 8785 §3.2.2.2.
    {"control characters escape as \\u00xx", R"("\u0001\u001f\u0010")"},
    {"the short escapes", R"("\b\t\n\f\r\"\\")"},
    {"a solidus escape becomes a plain solidus", R"("a\/b")"},
    {"DEL stays raw", "\"\x7f\""},
    {"U+2028 and U+2029 stay raw", R"("\u2028\u2029")"},
    {"non-ASCII escapes become raw UTF-8", R"("\u00e9\u4e2d\ud83d\ude00")"},
    {"upper-case hex escapes", R"("\u00E9\uD83D\uDE00")"},
    {"raw non-BMP characters", "\"\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF\""},
    {"a byte order mark inside a string", R"("\ufeff")"},
    {"U+0000 in a string is refused", R"({"a":["x\u0000y"]})"},
    {"U+0000 in a member name is refused at its object", R"({"a":{"b\u0000":1}})"},
    {"a lone high surrogate escape is malformed", R"(["\ud800"])"},
    {"a lone low surrogate escape is malformed", R"({"a":"\udc00"})"},
    {"a high surrogate followed by a non-surrogate escape is malformed", R"("\ud800\u0041")"},
    {"an invalid escape is malformed", R"({"a":"\x"})"},
    {"a short unicode escape is malformed", R"(["\u12"])"},
    {"a raw control character in a string is malformed", "[\"a\tb\"]"},
    {"a raw newline in a member name is malformed", "{\"a\nb\":1}"},
    {"an unterminated string", R"({"a":"abc)"},
    {"ill-formed UTF-8 in a string", "[\"a\xC3\x28\"]"},
    {"an overlong encoding in a string", "{\"a\":\"\xC0\xAF\"}"},
    {"a surrogate encoded in UTF-8", "[\"\xED\xA0\x80\"]"},
    {"a code point beyond U+10FFFF", "\"\xF4\x90\x80\x80\""},
    {"a truncated UTF-8 sequence at the end", "\"\xE2\x82"},
    {"ill-formed UTF-8 outside a string", "[1,\xFF]"},
    {"ill-formed UTF-8 after a syntax error", "[1 2,\"\xFF\"]"},
    {"ill-formed UTF-8 in a member name", "{\"ok\":1,\"\xFF\":2}"},
    // Member order: UTF-16 code units (RFC 8785 §3.2.3, its own example).
    {"RFC 8785's sorting example",
     R"({"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"})",
     "guide.fingerprint.key-order"},
    {"non-BMP names sort before U+E000 and later", R"({"\ue000":1,"\ud83d\ude00":2,"\uffff":3,"\ud800\udc00":4})",
     "guide.fingerprint.key-order"},
    {"names sort by code unit, not by length", R"({"ab":1,"a":2,"b":3,"aa":4,"":5})", "guide.fingerprint.key-order"},
    {"upper case sorts before lower case", R"({"b":1,"B":2,"a":3,"A":4,"_":5})", "guide.fingerprint.key-order"},
    {"array order is kept", "[3,1,2]", "guide.fingerprint.array-order"},
    {"nested objects are sorted too", R"({"z":{"y":1,"x":[{"b":1,"a":2}]},"a":null})", "guide.fingerprint.key-order"},
    // Literals, whitespace, structure.
    {"the literals", "[true,false,null]"},
    {"whitespace between every token", " \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\" : { } }\n "},
    {"an empty object and array", R"({"a":{},"b":[]})"},
    {"a byte order mark before the text is ignored", "\xEF\xBB\xBF{\"a\":1}"},
    {"a byte order mark after whitespace is malformed", " \xEF\xBB\xBF{}"},
    {"empty text", ""},
    {"only whitespace", "  "},
    {"text after the value", "{} {}"},
    {"a comment is malformed", "{\"a\":1 /* no */}"},
    {"a trailing comma in an array", "[1,2,]"},
    {"a trailing comma in an object", R"({"a":1,})"},
    {"a missing comma in an array", "[1 2]"},
    {"a missing colon", R"({"a" 1})"},
    {"a missing value after a colon", R"({"a":})"},
    {"a member name that is not a string", R"({a:1})"},
    {"a number as a member name", R"({"x":{1:2}})"},
    {"an unclosed array", "[[1,2]"},
    {"an unclosed object", R"({"a":{"b":1})"},
    {"a mismatched bracket", R"({"a":[1}})"},
    {"a misspelt literal", "[tru]"},
    {"a literal followed by a letter", "[truex]"},
    {"a single quote is malformed", "['a']"},
    {"a raw NUL byte is never JSON", "[1]\0 trailing"s},
    {"a raw NUL byte inside a string", "[\"a\0b\"]"s},
    {"a duplicate member name", R"({"a":1,"a":2})"},
    {"a duplicate member name nested", R"({"x":[{"k":1,"j":2,"k":3}]})"},
    {"a duplicate member name with other escapes", R"({"\u00e9":1,"é":2})"},
    {"a duplicate member name before a missing colon", R"({"a":1,"a" 2})"},
    {"member names with pointer characters in an error path", R"({"a/b":{"c~d":[1,9007199254740993]}})"},
    {"a deep error path", R"({"a":[{"b":[[{"c":1e400}]]}]})"},
};

struct FingerprintCase {
  std::string name;
  std::string event_type;
  int schema_version;
  std::string payload;
  std::string rule{};
};

inline const std::vector<FingerprintCase> kFingerprintCases = {
    {"an order", "order.created", 1, R"({"orderId":"o-1","total":12.5})"},
    {"the same order with its members in another order", "order.created", 1, R"({"total":12.5,"orderId":"o-1"})",
     "guide.fingerprint.key-order"},
    {"the same order with other whitespace and spellings", "order.created", 1,
     "{ \"total\" : 1.25e1 , \"orderId\" : \"o\\u002d1\" }", "guide.fingerprint.key-order"},
    {"an array", "order.lines", 1, R"({"lines":[1,2,3]})", "guide.fingerprint.array-order"},
    {"the array in another order", "order.lines", 1, R"({"lines":[3,2,1]})", "guide.fingerprint.array-order"},
    {"another event type", "order.updated", 1, R"({"orderId":"o-1","total":12.5})", "guide.fingerprint.content"},
    {"another schema version", "order.created", 2, R"({"orderId":"o-1","total":12.5})", "guide.fingerprint.content"},
    {"a non-ASCII event type", "commande.cr\xC3\xA9\xC3\xA9\x65", 1, "{}", "guide.fingerprint.content"},
    {"a quote and a backslash in the event type", "a\"b\\c", 7, "null"},
    {"a scalar payload", "counter.tick", 1, "42"},
    {"a string payload", "note.added", 1, R"("\u00e9t\u00e9")"},
    {"a null payload", "ping", 1, "null"},
    {"a large schema version", "order.created", 2147483647, "[]"},
};

struct AcceptCase {
  std::string name;
  AcceptRequest request;
  std::string payload_text;
  std::string rule{};
};

struct AcceptSuite {
  std::string name;
  InboxOptions options;
  std::vector<AcceptCase> cases;
};

struct EmitCase {
  std::string name;
  OutboxMessage message;
  std::string payload_text;
  EmitOptions options;
  std::string rule{};
};

struct EmitSuite {
  std::string name;
  OutboxOptions options;
  std::vector<EmitCase> cases;
};

struct Step {
  std::vector<AcceptRequest> batch;
  std::vector<std::string> payload_texts;
  bool many = false;
  /// Run after the step, with {schema} replaced (e.g. to make a receipt DEAD).
  std::string sql{};
};

struct Scenario {
  std::string name;
  std::string rule;
  InboxOptions options;
  std::vector<Step> steps;
};

inline const std::string kConsumer = "orders.projection.v1";

/// The accept request of the usage guide, with message id `id` and `payload_text`.
inline AcceptCase guide_request(std::string name, const std::string& id,
                                const std::string& payload_text = R"({"orderId":"o-1"})") {
  return {std::move(name),
          AcceptRequest{.scope = Scope::tenant("tenant-7"),
                        .source = "orders-service",
                        .consumer = kConsumer,
                        .message_id = id,
                        .event_type = "order.created",
                        .schema_version = 1,
                        .payload = nlohmann::json::parse(payload_text)},
          payload_text};
}

inline std::string repeat(const std::string& unit, std::size_t times) {
  std::string out;
  for (std::size_t i = 0; i < times; ++i) out += unit;
  return out;
}

inline std::vector<AcceptSuite> accept_suites() {
  std::vector<AcceptSuite> suites;
  {
    AcceptSuite s{"the usage guide's inbox", {.consumers = {kConsumer, "audit.v1"}}, {}};
    int n = 0;
    const auto id = [&] { return "m-" + std::to_string(++n); };
    const auto add = [&](AcceptCase c, const std::string& rule = {}) {
      c.rule = rule;
      s.cases.push_back(std::move(c));
    };
    const auto mutate = [&](const std::string& name, auto&& change, const std::string& rule = {}) {
      AcceptCase c = guide_request(name, id());
      change(c.request);
      add(c, rule);
    };
    add(guide_request("the usage guide's request", id()));
    mutate(
        "a global scope", [](AcceptRequest& r) { r.scope = Scope::global(); }, "guide.scope.global");
    mutate(
        "a tenant scope without its id", [](AcceptRequest& r) { r.scope = Scope::tenant(""); },
        "guide.scope.tenant-id");
    mutate(
        "a global scope with a tenant id",
        [](AcceptRequest& r) {
          r.scope = {Scope::Kind::Global, "t"};
        },
        "guide.scope.global");
    mutate("a tenant id of 512 bytes", [](AcceptRequest& r) { r.scope.id = repeat("\xC3\xA9", 256); });
    mutate("a tenant id of 513 bytes", [](AcceptRequest& r) { r.scope.id = repeat("\xC3\xA9", 256) + "x"; });
    mutate("a tenant id with U+0000", [](AcceptRequest& r) { r.scope.id = "t\0x"s; });
    for (const char* field : {"source", "consumer", "message_id", "event_type"}) {
      const auto set = [field](AcceptRequest& r, const std::string& value) {
        const std::string f = field;
        (f == "source"       ? r.source
         : f == "consumer"   ? r.consumer
         : f == "message_id" ? r.message_id
                             : r.event_type) = value;
      };
      mutate(std::string("an empty ") + field, [&](AcceptRequest& r) { set(r, ""); });
      mutate(std::string("a ") + field + " of 513 bytes", [&](AcceptRequest& r) { set(r, repeat("a", 513)); });
      mutate(std::string("a ") + field + " of 512 bytes in non-BMP characters",
             [&](AcceptRequest& r) { set(r, repeat("\xF0\x9F\x98\x80", 128)); });
      mutate(std::string("a ") + field + " with U+0000", [&](AcceptRequest& r) { set(r, "a\0b"s); });
    }
    mutate("an undeclared consumer", [](AcceptRequest& r) { r.consumer = "orders.projection.v2"; });
    mutate("the other declared consumer", [](AcceptRequest& r) { r.consumer = "audit.v1"; });
    mutate("the first invalid field is reported: source before consumer", [](AcceptRequest& r) {
      r.source = "";
      r.consumer = "";
    });
    mutate("the first invalid field is reported: scope before source", [](AcceptRequest& r) {
      r.scope = Scope::tenant("");
      r.source = "";
    });
    mutate("the first invalid field is reported: an unknown consumer after the event type", [](AcceptRequest& r) {
      r.consumer = "nobody.v1";
      r.event_type = "";
    });
    for (const int version : {0, -1, 2, 2147483647})
      mutate("schema version " + std::to_string(version), [&](AcceptRequest& r) { r.schema_version = version; });
    mutate("all metadata", [](AcceptRequest& r) {
      r.metadata = {.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                    .tracestate = "congo=t61rcWkgMzE",
                    .correlation_id = "corr-1",
                    .causation_id = "cause-1",
                    .headers = {{"x-source", "webhook"}, {"\xC3\xA9t\xC3\xA9", "\xE2\x82\xAC"}, {"b", "a\"b\\c"}}};
    });
    mutate("metadata with control characters", [](AcceptRequest& r) {
      r.metadata.correlation_id = "a\tb\nc";
      r.metadata.headers = {{"k", "\x01"}};
    });
    mutate("a metadata header with U+0000", [](AcceptRequest& r) { r.metadata.headers = {{"k", "a\0b"s}}; });
    mutate("a correlation id with U+0000", [](AcceptRequest& r) { r.metadata.correlation_id = "a\0b"s; });
    mutate("metadata over 64 KiB", [](AcceptRequest& r) { r.metadata.tracestate = repeat("abcdefgh", 8200); });
    // Payloads: every rule of docs/schema.md, "Payload JSON".
    const auto payload = [&](const std::string& name, const std::string& text, const std::string& rule = {}) {
      add(guide_request(name, id(), text), rule);
    };
    payload("a payload with members in any order", R"({"b":1,"a":{"d":[3,2,1],"c":null}})",
            "guide.fingerprint.key-order");
    payload("an integer beyond 2^53 in the payload", R"({"orderId":"o-1","amount":9007199254740993})");
    payload("1e17 in the payload", R"({"lines":[{"qty":1e17}]})");
    payload("a number from 1e21 on is taken", R"({"big":1e21,"bigger":1.5e300})");
    payload("U+0000 in a payload string", R"({"note":"a\u0000b"})");
    payload("U+0000 in a payload member name", R"({"x":{"a\u0000":1}})");
    payload("a payload nested 64 deep", repeat("[", 64) + "1" + repeat("]", 64), "guide.payload.excessive-depth");
    payload("a payload nested 65 deep", repeat("[", 65) + "1" + repeat("]", 65), "guide.payload.excessive-depth");
    payload("a payload of non-BMP member names", R"({"\ud83d\ude00":1,"\ue000":2,"z":3})",
            "guide.fingerprint.key-order");
    payload("a scalar payload", "42");
    payload("a null payload", "null");
    payload("an integral fraction in the payload", R"({"total":5.0,"n":-0.0})");
    // Generated payloads: the number rule decides each one.
    testing::PayloadGenerator generator(52, 6);
    for (int i = 0; i < 150; ++i) {
      const nlohmann::json value = generator.payload();
      payload("generated payload " + std::to_string(i), value.dump());
    }
    suites.push_back(std::move(s));
  }
  {
    AcceptSuite s{
        "consumers ordered by key",
        {.consumers = {"orders.v1", "audit.v1", "ledger.v1", "plain.v1"},
         .ordering = {{"orders.v1",
                       {.key = OrderingKey::payload_pointer("/order/id"), .head_of_line = HeadOfLine::park_after(3)}},
                      {"audit.v1", {.key = OrderingKey::metadata_header("aggregate-id")}},
                      {"ledger.v1", {.key = OrderingKey::payload_pointer("/a~1b/c~0d/1")}}}},
        {}};
    int n = 0;
    const auto keyed = [&](const std::string& name, const std::string& consumer, const std::string& payload_text,
                           const std::map<std::string, std::string>& headers = {}) {
      AcceptCase c = guide_request(name, "k-" + std::to_string(++n), payload_text);
      c.request.consumer = consumer;
      c.request.metadata.headers = headers;
      s.cases.push_back(std::move(c));
    };
    keyed("a string key", "orders.v1", R"({"order":{"id":"o-1"}})");
    keyed("the same key again waits behind its head", "orders.v1", R"({"order":{"id":"o-1"}})");
    keyed("an integer key", "orders.v1", R"({"order":{"id":42}})");
    keyed("a negative integer key", "orders.v1", R"({"order":{"id":-7}})");
    keyed("an integral fraction is the integer key", "orders.v1", R"({"order":{"id":5.0}})");
    keyed("the integer key of 5 again waits behind 5.0", "orders.v1", R"({"order":{"id":5}})");
    keyed("the largest safe integer key", "orders.v1", R"({"order":{"id":9007199254740991}})");
    keyed("a fraction is not a key", "orders.v1", R"({"order":{"id":1.5}})");
    keyed("true is not a key", "orders.v1", R"({"order":{"id":true}})");
    keyed("null is not a key", "orders.v1", R"({"order":{"id":null}})");
    keyed("an object is not a key", "orders.v1", R"({"order":{"id":{"nested":1}}})");
    keyed("an array is not a key", "orders.v1", R"({"order":{"id":["a"]}})");
    keyed("a missing key", "orders.v1", R"({"order":{"no":"id"}})");
    keyed("a missing parent of the key", "orders.v1", R"({"other":1})");
    keyed("a scalar payload has no key", "orders.v1", R"("o-1")");
    keyed("an empty key", "orders.v1", R"({"order":{"id":""}})");
    keyed("a key of 513 bytes", "orders.v1", R"({"order":{"id":")" + repeat("k", 513) + R"("}})");
    keyed("a key with U+0000", "orders.v1", R"({"order":{"id":"a\u0000b"}})");
    keyed("a payload error comes before a key error", "orders.v1", R"({"x":9007199254740993})");
    keyed("a key through escaped pointer tokens", "ledger.v1", R"({"a/b":{"c~d":["first","second"]}})");
    keyed("an array index beyond the end", "ledger.v1", R"({"a/b":{"c~d":["first"]}})");
    keyed("a header key", "audit.v1", "{}", {{"aggregate-id", "agg-1"}});
    keyed("a missing header key", "audit.v1", "{}", {{"other", "x"}});
    keyed("an empty header key", "audit.v1", "{}", {{"aggregate-id", ""}});
    keyed("a header key of 513 bytes", "audit.v1", "{}", {{"aggregate-id", repeat("h", 513)}});
    keyed("an unordered consumer has no key", "plain.v1", R"({"order":{"id":"o-1"}})");
    suites.push_back(std::move(s));
  }
  {
    AcceptSuite s{
        "small limits",
        {.consumers = {kConsumer}, .payload_limits = {.max_depth = 3, .max_bytes = 200}, .max_statement_bytes = 800},
        {}};
    int n = 0;
    const auto add = [&](const std::string& name, const std::string& payload_text, const std::string& source,
                         const std::string& rule) {
      AcceptCase c = guide_request(name, "s-" + std::to_string(++n), payload_text);
      c.request.source = source;
      c.rule = rule;
      s.cases.push_back(std::move(c));
    };
    add("a payload at the depth limit", R"({"a":{"b":[1]}})", "orders-service", "guide.payload.excessive-depth");
    add("a payload beyond the depth limit", R"({"a":{"b":[[1]]}})", "orders-service", "guide.payload.excessive-depth");
    for (const std::size_t length : {180, 185, 186, 187, 190, 250}) {
      add("a payload string of " + std::to_string(length) + " characters", R"({"s":")" + repeat("x", length) + "\"}",
          "orders-service", "guide.payload.oversized");
    }
    add("a payload that escapes past the size limit", R"({"s":")" + repeat("\\n", 100) + "\"}", "orders-service",
        "guide.payload.oversized");
    add("an item too large for a statement", R"({"s":")" + repeat("x", 150) + "\"}", repeat("s", 512),
        "guide.payload.oversized");
    add("an item just within a statement", R"({"s":"x"})", repeat("s", 512), {});
    suites.push_back(std::move(s));
  }
  return suites;
}

inline EmitCase guide_event(std::string name, const std::string& payload_text = R"({"orderId":"o-1"})") {
  return {std::move(name),
          OutboxMessage{.event_type = "order.projected",
                        .schema_version = 1,
                        .topic = "orders.projected",
                        .payload = nlohmann::json::parse(payload_text)},
          payload_text, EmitOptions{.scope = Scope::tenant("tenant-7"), .causation_id = "m-1"}};
}

inline std::vector<EmitSuite> emit_suites() {
  std::vector<EmitSuite> suites;
  {
    EmitSuite s{"any topic", {}, {}};
    const auto add = [&](const std::string& name, auto&& change, const std::string& rule = {}) {
      EmitCase c = guide_event(name);
      change(c);
      c.rule = rule;
      s.cases.push_back(std::move(c));
    };
    add(
        "the usage guide's event", [](EmitCase&) {}, "guide.outbox.emit");
    add(
        "a global event", [](EmitCase& c) { c.options.scope = Scope::global(); }, "guide.outbox.emit");
    add("a global event with a key", [](EmitCase& c) {
      c.options.scope = Scope::global();
      c.options.key = "k-1";
    });
    add("an explicit key is ordered", [](EmitCase& c) { c.options.key = "order-1"; });
    add("an explicit key opted out of order", [](EmitCase& c) {
      c.options.key = "order-1";
      c.options.ordered = false;
    });
    add("tracing fields", [](EmitCase& c) {
      c.options.correlation_id = "corr-1";
      c.options.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    });
    add("custom headers", [](EmitCase& c) {
      c.options.headers = {{"x-source", "webhook"}, {"\xC3\xA9t\xC3\xA9", "\xE2\x82\xAC"}, {"q", "a\"b"}};
    });
    for (const char* reserved : {"event_id", "event_type", "schema_version", "tenant_scope", "tenant_id",
                                 "causation_id", "correlation_id", "traceparent"})
      add(std::string("the reserved header ") + reserved, [&](EmitCase& c) {
        c.options.headers = {{"a-custom", "1"}, {reserved, "x"}};
      });
    add("an empty header name", [](EmitCase& c) { c.options.headers = {{"", "x"}, {"a", "1"}}; });
    add("a header value with U+0000", [](EmitCase& c) { c.options.headers = {{"h", "a\0b"s}}; });
    add("an empty event type", [](EmitCase& c) { c.message.event_type = ""; });
    add("an event type of 513 bytes", [](EmitCase& c) { c.message.event_type = repeat("e", 513); });
    add("an event type with U+0000", [](EmitCase& c) { c.message.event_type = "a\0b"s; });
    add("schema version 0", [](EmitCase& c) { c.message.schema_version = 0; });
    add("an empty topic", [](EmitCase& c) { c.message.topic = ""; });
    add("a topic of 249 bytes", [](EmitCase& c) { c.message.topic = repeat("t", 249); });
    add("a topic of 250 bytes", [](EmitCase& c) { c.message.topic = repeat("t", 250); });
    add("a topic with a blank", [](EmitCase& c) { c.message.topic = "orders projected"; });
    add("a topic with a slash", [](EmitCase& c) { c.message.topic = "orders/projected"; });
    add("a topic with non-ASCII", [](EmitCase& c) { c.message.topic = "ord\xC3\xA9rs"; });
    add("a topic with every allowed character", [](EmitCase& c) { c.message.topic = "aZ09._-"; });
    add("a tenant event without its tenant id", [](EmitCase& c) { c.options.scope = Scope::tenant(""); });
    add("a global event with a tenant id", [](EmitCase& c) { c.options.scope = {Scope::Kind::Global, "t"}; });
    add("a key of 513 bytes", [](EmitCase& c) { c.options.key = repeat("k", 513); });
    add("a causation id with U+0000", [](EmitCase& c) { c.options.causation_id = "a\0b"s; });
    add("a correlation id of 513 bytes", [](EmitCase& c) { c.options.correlation_id = repeat("c", 513); });
    add("a traceparent with U+0000", [](EmitCase& c) { c.options.traceparent = "a\0b"s; });
    add("the first invalid field is reported: event type before topic", [](EmitCase& c) {
      c.message.event_type = "";
      c.message.topic = "";
    });
    const auto payload = [&](const std::string& name, const std::string& text) {
      EmitCase c = guide_event(name, text);
      s.cases.push_back(std::move(c));
    };
    payload("a payload in any member order", R"({"z":1,"a":[{"y":2,"b":3}]})");
    payload("an integer beyond 2^53 in the payload", R"({"amount":9007199254740993})");
    payload("U+0000 in the payload", R"({"a":["\u0000"]})");
    payload("a payload nested 65 deep", repeat("[", 65) + "1" + repeat("]", 65));
    testing::PayloadGenerator generator(5252, 6);
    for (int i = 0; i < 120; ++i) payload("generated payload " + std::to_string(i), generator.payload().dump());
    suites.push_back(std::move(s));
  }
  {
    EmitSuite s{"declared topics and a small record",
                {.payload_limits = {.max_depth = 4, .max_bytes = 1000},
                 .max_record_bytes = 400,
                 .topics = {"orders.projected", "audit"}},
                {}};
    const auto add = [&](const std::string& name, auto&& change) {
      EmitCase c = guide_event(name);
      change(c);
      s.cases.push_back(std::move(c));
    };
    add("a declared topic", [](EmitCase&) {});
    add("the other declared topic", [](EmitCase& c) { c.message.topic = "audit"; });
    add("an undeclared topic", [](EmitCase& c) { c.message.topic = "orders.created"; });
    add("an invalid topic is invalid before it is undeclared", [](EmitCase& c) { c.message.topic = "a b"; });
    for (const std::size_t length : {100, 140, 150, 151, 152, 160, 200, 900})
      add("a payload string of " + std::to_string(length) + " bytes", [&](EmitCase& c) {
        c.message.payload = {{"s", repeat("x", length)}};
      });
    add("headers count against the record", [](EmitCase& c) {
      c.message.payload = {{"s", repeat("x", 100)}};
      c.options.headers = {{"h", repeat("v", 60)}};
    });
    add("a payload beyond the depth limit", [](EmitCase& c) {
      c.message.payload = {{"a", {{"b", {{"c", {{"d", {1}}}}}}}}};
    });
    add("a payload beyond the size limit", [](EmitCase& c) { c.message.payload = {{"s", repeat("x", 1000)}}; });
    // The payload text of these is their value's dump.
    for (auto& c : s.cases) c.payload_text = c.message.payload.dump();
    suites.push_back(std::move(s));
  }
  return suites;
}

inline Step one(const AcceptCase& c) { return Step{{c.request}, {c.payload_text}}; }

inline std::vector<Scenario> sequence_scenarios() {
  const InboxOptions options{.consumers = {kConsumer, "orders.projection.v2"}};
  std::vector<Scenario> scenarios;
  const AcceptCase base = guide_request("", "evt-1", R"({"orderId":"o-1","total":12.5})");
  const auto changed = [&](auto&& change) {
    AcceptCase c = base;
    change(c);
    c.request.payload = nlohmann::json::parse(c.payload_text);
    return c;
  };
  scenarios.push_back({"a new identity is accepted and its redelivery is a duplicate",
                       "guide.accept.duplicate",
                       options,
                       {one(base), one(base), one(base)}});
  scenarios.push_back({"the identity is scope + source + consumer + message id: changing any one is a new receipt",
                       "guide.identity.tuple",
                       options,
                       {one(base), one(changed([](AcceptCase& c) { c.request.scope = Scope::tenant("tenant-8"); })),
                        one(changed([](AcceptCase& c) { c.request.scope = Scope::global(); })),
                        one(changed([](AcceptCase& c) { c.request.source = "billing-service"; })),
                        one(changed([](AcceptCase& c) { c.request.message_id = "evt-2"; })), one(base)}});
  scenarios.push_back({"renaming the consumer permits another processing of the same message",
                       "guide.identity.consumer-rename",
                       options,
                       {one(base), one(changed([](AcceptCase& c) { c.request.consumer = "orders.projection.v2"; }))}});
  scenarios.push_back(
      {"distinct event ids for the same business action are distinct receipts",
       "guide.identity.distinct-ids",
       options,
       {one(base), one(changed([](AcceptCase& c) { c.request.message_id = "evt-1-resent-with-a-new-id"; }))}});
  scenarios.push_back(
      {"reusing an identity with different content is a conflict and the stored record is kept",
       "guide.identity.conflict",
       options,
       {one(base), one(changed([](AcceptCase& c) { c.payload_text = R"({"orderId":"o-1","total":13})"; })),
        one(base)}});
  scenarios.push_back({"event type and schema version are content: changing either under one identity is a conflict",
                       "guide.fingerprint.content",
                       options,
                       {one(base), one(changed([](AcceptCase& c) { c.request.event_type = "order.updated"; })),
                        one(changed([](AcceptCase& c) { c.request.schema_version = 2; })), one(base)}});
  scenarios.push_back({"metadata does not participate: a redelivery with other trace headers is a duplicate",
                       "guide.fingerprint.metadata",
                       options,
                       {one(base), one(changed([](AcceptCase& c) {
                          c.request.metadata = {
                              .traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                              .correlation_id = "other",
                              .causation_id = "other",
                              .headers = {{"x-retry", "3"}}};
                        }))}});
  scenarios.push_back({"object key order does not matter: a redelivery with its members reordered is a duplicate",
                       "guide.fingerprint.key-order",
                       options,
                       {one(base), one(changed([](AcceptCase& c) {
                          c.payload_text = "{ \"total\" : 1.25e1, \"orderId\" : \"o-1\" }";
                        }))}});
  scenarios.push_back({"array order matters: a redelivery with its array reordered is a conflict",
                       "guide.fingerprint.array-order",
                       options,
                       {one(changed([](AcceptCase& c) { c.payload_text = R"({"lines":[1,2]})"; })),
                        one(changed([](AcceptCase& c) { c.payload_text = R"({"lines":[2,1]})"; }))}});
  {
    Step dead = one(base);
    dead.sql =
        "UPDATE {schema}.inbox_receipts SET status = 'DEAD', dead_reason = 'HANDLER_PERMANENT' "
        "WHERE message_id = 'evt-1'";
    scenarios.push_back({"a duplicate of a DEAD receipt reports DEAD and does not reset it",
                         "guide.duplicate.dead",
                         options,
                         {dead, one(base), one(base)}});
  }
  {
    Step batch;
    batch.many = true;
    const AcceptCase other = changed([](AcceptCase& c) { c.request.message_id = "evt-2"; });
    const AcceptCase conflicting = changed([](AcceptCase& c) { c.payload_text = R"({"orderId":"o-9"})"; });
    const AcceptCase invalid = changed([](AcceptCase& c) { c.request.source = ""; });
    for (const AcceptCase* c : {&base, &other, &base, &conflicting, &invalid, &other}) {
      batch.batch.push_back(c->request);
      batch.payload_texts.push_back(c->payload_text);
    }
    Step again = batch;
    scenarios.push_back(
        {"a batch: an identity's first item is accepted, its repeats duplicates, other content a conflict, an "
         "invalid item refused alone; the same batch again is all duplicates",
         "guide.accept-many",
         options,
         {batch, again}});
  }
  return scenarios;
}

/// The rules of the usage guide the vectors cover (rules.json). A rule no JSON case can
/// express (a JavaScript value that is not JSON) names the client tests that cover it.
inline nlohmann::json rules_json() {
  const auto rule = [](const char* id, const char* text) { return nlohmann::json{{"id", id}, {"text", text}}; };
  auto only_typescript = [](const char* id, const char* text, const char* test) {
    return nlohmann::json{{"id", id}, {"text", text}, {"typescriptTest", test}};
  };
  return nlohmann::json::array({
      rule("guide.accept.duplicate",
           "accept() returns accepted for a new durable receipt and duplicate for a retained identity"),
      rule("guide.identity.tuple", "The unique identity is the tuple scope + source + consumer + message ID"),
      rule("guide.identity.consumer-rename", "Renaming a consumer permits another processing operation"),
      rule("guide.identity.distinct-ids",
           "Distinct event IDs remain distinct Inbox identities even when they describe the same business action"),
      rule("guide.identity.conflict",
           "Reusing an identity with different content throws IDENTITY_CONFLICT and preserves the existing record"),
      rule("guide.scope.tenant-id", "A tenant scope carries the tenant id from authenticated context"),
      rule("guide.scope.global", "{ kind: 'global' } is an intentional global scope"),
      rule("guide.fingerprint.content",
           "The content fingerprint covers the event type, event schema version, and canonical JSON payload"),
      rule("guide.fingerprint.key-order", "Object key order does not affect the fingerprint"),
      rule("guide.fingerprint.array-order", "Array order affects the fingerprint"),
      rule("guide.fingerprint.metadata",
           "Trace headers, correlation ID, and causation ID are metadata and do not participate"),
      rule("guide.payload.non-finite", "Non-finite numbers are rejected"),
      only_typescript("guide.payload.undefined", "undefined is rejected",
                      "guide.payload.undefined: undefined anywhere in a payload is JSON_UNSUPPORTED_VALUE"),
      only_typescript("guide.payload.class-instances", "Arbitrary class instances are rejected",
                      "guide.payload.class-instances: a Date, a Map or a class instance is JSON_UNSUPPORTED_VALUE"),
      only_typescript("guide.payload.circular", "Circular references are rejected",
                      "guide.payload.circular: a circular reference is JSON_UNSUPPORTED_VALUE"),
      rule("guide.payload.excessive-depth", "Excessive depth is rejected"),
      rule("guide.payload.oversized", "Oversized values are rejected without silent truncation"),
      rule("guide.duplicate.dead", "A duplicate may refer to a DEAD record; it is not reset"),
      rule("guide.accept-many", "A transport's batch is accepted in one call with one result per item"),
      rule("guide.outbox.emit",
           "emit() writes the event in the caller's transaction; the publisher delivers it with a stable event id"),
  });
}

}  // namespace boxcar::conformance
