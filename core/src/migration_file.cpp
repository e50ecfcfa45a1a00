// Parsing of migration files: version from the name, directives from "-- boxcar:" lines.
#include "boxcar/core/detail/migration_file.hpp"

#include <charconv>
#include <optional>
#include <regex>

#include "boxcar/core/canonical_json.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/migrations/detail/embedded.hpp"

namespace boxcar::detail {
namespace {

constexpr std::string_view kDirective = "-- boxcar:";

[[noreturn]] void malformed(std::string_view file_name, const std::string& why) {
  throw MigrationError("MIGRATION_MALFORMED", "migration " + std::string(file_name) + ": " + why);
}

int parse_int(std::string_view file_name, std::string_view text, const std::string& what) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value <= 0)
    malformed(file_name, what + " is not a positive integer: '" + std::string(text) + "'");
  return value;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

template <class F>
void for_each_line(std::string_view text, F&& f) {
  while (!text.empty()) {
    const auto end = text.find('\n');
    f(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
}

const std::regex& concurrent_index_pattern() {
  static const std::regex pattern(R"(^CREATE\s+(UNIQUE\s+)?INDEX\s+CONCURRENTLY\s)", std::regex::icase);
  return pattern;
}

// The index name of a CREATE INDEX CONCURRENTLY IF NOT EXISTS with an unquoted lower-case
// name (what the runner looks up to drop an INVALID leftover), if `statement` is one.
std::optional<std::string> idempotent_concurrent_index(const std::string& statement) {
  static const std::regex pattern(
      R"(^CREATE\s+(UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+([a-z_][a-z0-9_]*)\s)", std::regex::icase);
  std::smatch match;
  if (!std::regex_search(statement, match, pattern)) return std::nullopt;
  return match[2].str();
}

}  // namespace

std::string generated_concurrent_index(std::string_view file_name, std::string_view statement) {
  const std::string text(trim(statement));
  const auto semicolon = text.find(';');
  const auto index = idempotent_concurrent_index(text);
  if (!index || (semicolon != std::string::npos && semicolon != text.size() - 1))
    throw MigrationError("MIGRATION_FAILED", "migration " + std::string(file_name) +
                                                 " generated a statement that is not one CREATE INDEX CONCURRENTLY "
                                                 "IF NOT EXISTS with an unquoted lower-case name: " +
                                                 text.substr(0, 200));
  return *index;
}

std::string strip_sql_comments(std::string_view sql) {
  std::string out;
  for_each_line(sql, [&](std::string_view line) {
    if (trim(line).starts_with("--")) return;
    out.append(line);
    out.push_back('\n');
  });
  return std::string(trim(out));
}

MigrationFile parse_migration_file(std::string_view file_name, std::string_view sql) {
  MigrationFile m;
  m.name = std::string(file_name);
  m.sql = sql;
  m.checksum = sha256_hex(sql);
  const auto digits = file_name.find('_');
  if (digits == std::string_view::npos || digits == 0) malformed(file_name, "the file name lacks a version");
  m.version = parse_int(file_name, file_name.substr(0, digits), "the version");
  m.compatible_with = m.version;

  for_each_line(sql, [&](std::string_view line) {
    line = trim(line);
    if (!line.starts_with(kDirective)) return;
    line.remove_prefix(kDirective.size());
    const auto space = line.find(' ');
    const std::string_view name = line.substr(0, space);
    const std::string_view value = space == std::string_view::npos ? "" : trim(line.substr(space + 1));
    if (name == "no-transaction" && value.empty()) {
      m.transactional = false;
    } else if (name == "statements-from-query" && value.empty()) {
      m.statements_from_query = true;
    } else if (name == "compatible-with") {
      m.compatible_with = parse_int(file_name, value, "compatible-with");
      if (m.compatible_with > m.version) malformed(file_name, "compatible-with is newer than the file itself");
    } else if (name == "previous-checksum" && std::regex_match(std::string(value), std::regex("[0-9a-f]{64}"))) {
      m.previous_checksums.emplace_back(value);
    } else {
      malformed(file_name, "unknown or malformed directive '-- boxcar:" + std::string(line) + "'");
    }
  });

  if (m.statements_from_query && m.transactional)
    malformed(file_name, "statements-from-query needs no-transaction: the statements it generates run outside one");
  if (!m.transactional) {
    // One statement per step: a failure then leaves nothing half-applied but, at worst, an
    // INVALID index that the next run drops and builds again.
    const std::string statement = strip_sql_comments(sql);
    if (statement.empty() || statement.back() != ';' || statement.find(';') != statement.size() - 1)
      malformed(file_name, "a no-transaction migration holds exactly one statement, ending in ';'");
    if (m.statements_from_query) {
      static const std::regex kQuery(R"(^(SELECT|WITH)\s)", std::regex::icase);
      if (!std::regex_search(statement, kQuery))
        malformed(file_name, "a statements-from-query migration holds one query (SELECT or WITH)");
    } else if (const auto index = idempotent_concurrent_index(statement)) {
      m.concurrent_index = *index;
    } else if (std::regex_search(statement, concurrent_index_pattern())) {
      // Without IF NOT EXISTS, a crash between the build and its schema_migrations row
      // would fail every later run on the index that is already there.
      malformed(file_name, "CREATE INDEX CONCURRENTLY needs IF NOT EXISTS and an unquoted lower-case name");
    }
  }
  return m;
}

std::vector<MigrationFile> embedded_migrations() {
  // Parsed once: readiness probes ask for the newest version on every call.
  static const std::vector<MigrationFile> all = [] {
    std::vector<MigrationFile> parsed;
    for (const auto& file : embedded_migration_files())
      parsed.push_back(parse_migration_file(file.file_name, file.sql));
    return parsed;
  }();
  return all;
}

}  // namespace boxcar::detail
