// How log_event() fields are encoded, and the escaping that keeps a sender's field (a
// message id, an event type, a handler's error text) from forging a log line or a field.
// Core encodes; the runtime's formatters decode. Not public API.
#pragma once

#include <string>
#include <string_view>

namespace boxcar::detail {

// The separators log_event() uses in JSON mode between the (already JSON-escaped)
// message, keys and values; the runtime's JSON formatter splits on them. Escaping turns
// any such byte inside a value into \u001e / \u001f first, so a value cannot add a key.
inline constexpr char kLogFieldsStart = '\x1e';
inline constexpr char kLogFieldSeparator = '\x1f';

// The source_loc file name that marks a log_event() line (line 0, so formatters print
// no location): the JSON formatter splits fields only on lines carrying this address,
// which no message text can forge.
inline constexpr char kLogEventSource[] = "boxcar::log_event";

// What is escaped everywhere: C0 controls, DEL, C1 controls (U+0080..U+009F), U+2028 and
// U+2029 (line breaks to JavaScript), and bytes that are not well-formed UTF-8.

/// A text-format field value: verbatim if it holds only safe characters and no space,
/// '=', '"' or '\'; else in double quotes with \" \\ \n \r \t \xNN (bytes) and \uXXXX
/// (code points) escapes. A value can then never end its field or its line early.
std::string escape_text_field(std::string_view value);

/// `text` with control characters and separators escaped (\n, \xNN, \uXXXX) and
/// everything else, backslashes and quotes included, unchanged: for whole text lines
/// whose sender-supplied parts were formatted into the message.
std::string escape_control_characters(std::string_view text);

/// `text` as the inside of a JSON string: quotes, backslashes and everything above.
std::string json_escaped(std::string_view text);

}  // namespace boxcar::detail
