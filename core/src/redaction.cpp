// Tokenizers for libpq's two connection-string forms that find where secrets are, as byte
// ranges of the original text, so redaction replaces exactly those and keeps the rest.
#include "boxcar/core/redaction.hpp"
#include "replace_all.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <vector>

namespace boxcar {
namespace {

constexpr std::string_view kMask = "***";

// Every keyword libpq 15 accepts (and a few of 16's), for telling where a malformed
// password ends: a word that is not one of these is taken as more of the password.
constexpr std::array<std::string_view, 44> kKeywords = {"host",
                                                        "hostaddr",
                                                        "port",
                                                        "dbname",
                                                        "user",
                                                        "password",
                                                        "passfile",
                                                        "channel_binding",
                                                        "connect_timeout",
                                                        "client_encoding",
                                                        "options",
                                                        "application_name",
                                                        "fallback_application_name",
                                                        "keepalives",
                                                        "keepalives_idle",
                                                        "keepalives_interval",
                                                        "keepalives_count",
                                                        "tcp_user_timeout",
                                                        "replication",
                                                        "sslmode",
                                                        "sslcompression",
                                                        "sslcert",
                                                        "sslkey",
                                                        "sslpassword",
                                                        "sslrootcert",
                                                        "sslcrl",
                                                        "sslcrldir",
                                                        "sslsni",
                                                        "requirepeer",
                                                        "ssl_min_protocol_version",
                                                        "ssl_max_protocol_version",
                                                        "gssencmode",
                                                        "krbsrvname",
                                                        "gsslib",
                                                        "gssdelegation",
                                                        "service",
                                                        "target_session_attrs",
                                                        "load_balance_hosts",
                                                        "require_auth",
                                                        "sslcertmode",
                                                        "requiressl",
                                                        "authtype",
                                                        "tty",
                                                        "sslnegotiation"};

struct Span {
  std::size_t begin;
  std::size_t end;
};

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_secret_key(std::string_view key) {
  const auto k = lower(key);
  return k == "password" || k == "sslpassword";
}

bool is_keyword(std::string_view key) {
  const auto k = lower(key);
  return std::find(kKeywords.begin(), kKeywords.end(), k) != kKeywords.end();
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

bool starts_with_ci(std::string_view text, std::size_t at, std::string_view prefix) {
  if (text.size() - at < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[at + i])) != prefix[i]) return false;
  return true;
}

std::size_t uri_prefix_length(std::string_view text, std::size_t at = 0) {
  if (at > text.size()) return 0;
  if (starts_with_ci(text, at, "postgresql://")) return 13;
  if (starts_with_ci(text, at, "postgres://")) return 11;
  return 0;
}

// --- keyword/value form -----------------------------------------------------------------

// Skips a value starting at `i` (quoted with '...' and backslash escapes, or bare up to
// whitespace with backslash escapes); returns the index after it. An unterminated quote
// runs to the end, as libpq reads it.
std::size_t skip_value(std::string_view s, std::size_t i) {
  if (i < s.size() && s[i] == '\'') {
    for (++i; i < s.size(); ++i) {
      if (s[i] == '\\' && i + 1 < s.size()) {
        ++i;
      } else if (s[i] == '\'') {
        return i + 1;
      }
    }
    return s.size();
  }
  for (; i < s.size() && !is_space(s[i]); ++i)
    if (s[i] == '\\' && i + 1 < s.size()) ++i;
  return i;
}

// Whether a known keyword, then optional spaces and '=', starts at `i`.
bool keyword_assignment_at(std::string_view s, std::size_t i) {
  std::size_t end = i;
  while (end < s.size() && !is_space(s[end]) && s[end] != '=') ++end;
  if (end == i || !is_keyword(s.substr(i, end - i))) return false;
  while (end < s.size() && is_space(s[end])) ++end;
  return end < s.size() && s[end] == '=';
}

std::vector<Span> keyword_value_secrets(std::string_view s) {
  std::vector<Span> spans;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    const std::size_t key_begin = i;
    while (i < s.size() && !is_space(s[i]) && s[i] != '=') ++i;
    const std::string_view key = s.substr(key_begin, i - key_begin);
    std::size_t j = i;
    while (j < s.size() && is_space(s[j])) ++j;
    if (j >= s.size() || s[j] != '=') continue;  // a bare word: libpq rejects it, skip it
    ++j;
    while (j < s.size() && is_space(s[j])) ++j;
    const std::size_t value_begin = j;
    i = skip_value(s, j);
    if (!is_secret_key(key)) continue;
    // A word libpq would reject after the password (`password=a b` means "a b" to a
    // human) is redacted with it, up to the next known keyword assignment.
    std::size_t end = i;
    while (true) {
      std::size_t next = end;
      while (next < s.size() && is_space(s[next])) ++next;
      if (next >= s.size() || keyword_assignment_at(s, next)) break;
      end = skip_value(s, next);
    }
    spans.push_back({value_begin, end});
    i = end;
  }
  return spans;
}

// --- URI form ---------------------------------------------------------------------------

// The password parameters of the query that starts after `question` (the '?') and
// ends at `end`.
void query_secrets(std::string_view s, std::size_t question, std::size_t end, std::vector<Span>& spans) {
  std::size_t i = question + 1;
  while (i < end) {
    const auto amp = s.substr(i, end - i).find('&');
    std::size_t param_end = amp == std::string_view::npos ? end : i + amp;
    const std::string_view param = s.substr(i, param_end - i);
    const auto eq = param.find('=');
    if (eq != std::string_view::npos && is_secret_key(param.substr(0, eq))) {
      // A parameter that is not a known keyword after a password is more of it
      // (`password=a&b` from a password "a&b").
      while (param_end < end) {
        const std::size_t next = param_end + 1;
        const auto next_amp = s.substr(next, end - next).find('&');
        const std::size_t next_end = next_amp == std::string_view::npos ? end : next + next_amp;
        const std::string_view next_param = s.substr(next, next_end - next);
        const auto next_eq = next_param.find('=');
        if (next_eq != std::string_view::npos && is_keyword(next_param.substr(0, next_eq))) break;
        param_end = next_end;
      }
      spans.push_back({i + eq + 1, param_end});
    }
    i = param_end + 1;
  }
}

// Secrets of the URI that starts at `begin` and ends at `end` in `s`. libpq ends the
// user info at the first '@' or '/', but a password holding '@', '/' or '?' is still
// meant as one, and a password in the query may hold '@'. Both readings are taken, the
// user info ending at the last '@' anywhere and at the last '@' before the first '?',
// and the secrets of both redacted: more than libpq's reading, never less.
void uri_secrets(std::string_view s, std::size_t begin, std::size_t end, std::vector<Span>& spans) {
  const std::size_t after_scheme = begin + uri_prefix_length(s, begin);
  const std::string_view body = s.substr(after_scheme, end - after_scheme);
  const auto first_question = body.find('?');
  for (const auto at : {body.rfind('@'), body.substr(0, first_question).rfind('@')}) {
    std::size_t rest = after_scheme;
    if (at != std::string_view::npos) {
      const auto colon = body.substr(0, at).find(':');
      if (colon != std::string_view::npos) spans.push_back({after_scheme + colon + 1, after_scheme + at});
      rest = after_scheme + at + 1;
    }
    const auto question = s.substr(rest, end - rest).find('?');
    if (question != std::string_view::npos) query_secrets(s, rest + question, end, spans);
  }
}

std::vector<Span> connection_string_secrets(std::string_view conninfo) {
  std::size_t lead = 0;
  while (lead < conninfo.size() && is_space(conninfo[lead])) ++lead;
  if (uri_prefix_length(conninfo, lead) > 0) {
    std::vector<Span> spans;
    uri_secrets(conninfo, lead, conninfo.size(), spans);
    return spans;
  }
  return keyword_value_secrets(conninfo);
}

std::string replace_spans(std::string_view text, std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  std::string out;
  std::size_t at = 0;
  for (const auto& span : spans) {
    if (span.end <= at) continue;
    const std::size_t begin = std::max(span.begin, at);
    out.append(text.substr(at, begin - at));
    out.append(kMask);
    at = span.end;
  }
  out.append(text.substr(std::min(at, text.size())));
  return out;
}

// --- decoding, for the forms libpq echoes -------------------------------------------------

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decoded(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() + 0 && hex_value(text[i + 1]) >= 0 && hex_value(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string unescaped(std::string_view text) {
  if (!text.empty() && text.front() == '\'') text.remove_prefix(1);
  if (!text.empty() && text.back() == '\'') text.remove_suffix(1);
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) ++i;
    out += text[i];
  }
  return out;
}

bool overlaps_secret(std::string_view conninfo, std::string_view fragment, const std::vector<Span>& spans) {
  for (auto pos = conninfo.find(fragment); pos != std::string_view::npos; pos = conninfo.find(fragment, pos + 1))
    for (const auto& span : spans)
      if (pos < span.end && span.begin < pos + fragment.size()) return true;
  return false;
}

// --- secrets inside free text ---------------------------------------------------------------

// The end of a URI embedded in text: whitespace, or for a URI that a '"' opens (libpq
// quotes a malformed URI whole), the last '"' on the line.
std::size_t embedded_uri_end(std::string_view text, std::size_t begin) {
  if (begin > 0 && text[begin - 1] == '"') {
    const auto line_end = text.find('\n', begin);
    const auto quote =
        text.substr(begin, line_end == std::string_view::npos ? text.size() - begin : line_end - begin).rfind('"');
    if (quote != std::string_view::npos) return begin + quote;
  }
  std::size_t end = begin;
  while (end < text.size() && !is_space(text[end]) && text[end] != '"') ++end;
  return end;
}

// `password = value` pairs anywhere in text, any case, '...' or "..." quoted or bare.
void keyword_secrets_in_text(std::string_view text, std::vector<Span>& spans) {
  for (std::size_t i = 0; i + 8 <= text.size(); ++i) {
    if (!starts_with_ci(text, i, "password")) continue;
    if (i > 0 && (std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_') &&
        !(i >= 3 && starts_with_ci(text, i - 3, "ssl")))
      continue;
    std::size_t j = i + 8;
    while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
    if (j >= text.size() || text[j] != '=') continue;
    ++j;
    while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
    std::size_t end = j;
    if (j < text.size() && text[j] == '"') {
      end = text.find('"', j + 1);
      end = end == std::string_view::npos ? text.size() : end + 1;
    } else if (j < text.size() && text[j] == '\'') {
      end = skip_value(text, j);
    } else {
      while (end < text.size() && !is_space(text[end]) && text[end] != '&' && text[end] != '"') {
        if (text[end] == '\\' && end + 1 < text.size()) ++end;
        ++end;
      }
    }
    spans.push_back({j, std::min(end, text.size())});
    i = end > i ? end - 1 : i;
  }
}

}  // namespace

std::string redact_connection_string(std::string_view conninfo) {
  return replace_spans(conninfo, connection_string_secrets(conninfo));
}

std::string redact_secrets(std::string_view text) {
  std::vector<Span> spans;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (uri_prefix_length(text, i) == 0) continue;
    const std::size_t end = embedded_uri_end(text, i);
    uri_secrets(text, i, end, spans);
    i = end > i ? end - 1 : i;
  }
  keyword_secrets_in_text(text, spans);
  return replace_spans(text, std::move(spans));
}

std::string redact_connection_error(std::string_view error, std::string_view conninfo) {
  std::string out(error);
  const auto spans = connection_string_secrets(conninfo);
  if (!conninfo.empty()) detail::replace_all(out, conninfo, redact_connection_string(conninfo));

  // The secrets as written and as libpq decodes them, longest first.
  std::vector<std::string> secrets;
  for (const auto& span : spans) {
    const auto raw = conninfo.substr(span.begin, span.end - span.begin);
    secrets.emplace_back(raw);
    secrets.push_back(percent_decoded(raw));
    secrets.push_back(unescaped(raw));
  }
  std::sort(secrets.begin(), secrets.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  for (const auto& secret : secrets) detail::replace_all(out, secret, kMask);

  // A fragment libpq quoted ("ss@host", "pa") that overlaps a secret, or lies inside one.
  std::string scrubbed;
  std::size_t at = 0;
  while (at < out.size()) {
    const auto open = out.find('"', at);
    const auto close = open == std::string::npos ? std::string::npos : out.find('"', open + 1);
    if (close == std::string::npos) break;
    const std::string_view fragment = std::string_view(out).substr(open + 1, close - open - 1);
    bool secret = !fragment.empty() && overlaps_secret(conninfo, fragment, spans);
    for (const auto& s : secrets) secret = secret || (!fragment.empty() && s.find(fragment) != std::string::npos);
    scrubbed.append(out, at, open + 1 - at);
    scrubbed.append(secret ? kMask : fragment);
    scrubbed += '"';
    at = close + 1;
  }
  scrubbed.append(out, std::min(at, out.size()));
  return redact_secrets(scrubbed);
}

}  // namespace boxcar
