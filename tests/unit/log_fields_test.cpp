// Escaping of log fields: a sender's value (message id, event type, handler error) can
// never start a new line or add a field, in the text format or the JSON encoding.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "boxcar/core/detail/log_fields.hpp"
#include "boxcar/core/logging.hpp"

using namespace boxcar;
using namespace boxcar::detail;
using Catch::Matchers::Contains;

TEST_CASE("a text field is verbatim when plain and quoted with escapes otherwise") {
  CHECK(escape_text_field("m-1") == "m-1");
  CHECK(escape_text_field("") == "\"\"");
  CHECK(escape_text_field("a b") == "\"a b\"");
  CHECK(escape_text_field("x outcome=completed") == "\"x outcome=completed\"");
  CHECK(escape_text_field("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(escape_text_field("a\nb\rc\td") == "\"a\\nb\\rc\\td\"");
  CHECK(escape_text_field("a\x1e"
                          "b\x1f"
                          "c\x7f") == "\"a\\x1eb\\x1fc\\x7f\"");
  CHECK(escape_text_field("\xc2\x85|\xe2\x80\xa8|\xe2\x80\xa9") == "\"\\u0085|\\u2028|\\u2029\"");
  CHECK(escape_text_field("caf\xc3\xa9") == "caf\xc3\xa9");  // ordinary non-ASCII stays
  CHECK(escape_text_field("bad\xff") == "\"bad\\xff\"");
}

TEST_CASE("JSON escaping leaves no control character or separator in a value") {
  CHECK(json_escaped("a\"b\\c") == "a\\\"b\\\\c");
  CHECK(json_escaped("a\nb\x1e"
                     "c\x1f"
                     "d\x7f") == "a\\nb\\u001ec\\u001fd\\u007f");
  CHECK(json_escaped("\xe2\x80\xa8") == "\\u2028");
  CHECK(json_escaped("bad\xff") == "bad\\\\xff");
}

TEST_CASE("whole text lines keep quotes and backslashes and lose their control characters") {
  CHECK(escape_control_characters("message \"m\\1\"\nforged line") == "message \"m\\1\"\\nforged line");
}

TEST_CASE("a hostile message id logged by log_event stays one line and one field in the text format") {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  sink->set_pattern("%v");
  spdlog::logger log("escape-test", sink);
  set_json_log_fields(false);
  log_event(
      log, LogLevel::Warn, "receipt is DEAD: boom\nforged",
      {{"message_id", "m-1\n[2026-01-01 00:00:00.000] [worker] [info] forged outcome=completed"}, {"outcome", "dead"}});
  const std::string line = out.str();
  CHECK(line ==
        "receipt is DEAD: boom\\nforged message_id=\"m-1\\n[2026-01-01 00:00:00.000] [worker] [info] forged "
        "outcome=completed\" outcome=dead\n");
}

TEST_CASE("a hostile message id cannot add a separator to a JSON-mode log_event line") {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  sink->set_pattern("%v");
  spdlog::logger log("escape-test-json", sink);
  set_json_log_fields(true);
  log_event(log, LogLevel::Warn, "m",
            {{"message_id",
              "a\x1f"
              "forged\x1f"
              "yes\x1e"},
             {"outcome", "dead"}});
  set_json_log_fields(false);
  const std::string line = out.str();
  // Exactly the encoder's own separators: one start, three between two keys and values.
  CHECK(std::count(line.begin(), line.end(), kLogFieldsStart) == 1);
  CHECK(std::count(line.begin(), line.end(), kLogFieldSeparator) == 3);
  CHECK_THAT(line, Contains("a\\u001fforged\\u001fyes\\u001e"));
}
