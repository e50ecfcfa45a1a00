// The function-call tokens of a SQL text: every name followed by `(`, with the token
// before it, outside comments, string literals and quoted text. The static check that
// Boxcar qualifies its built-ins (builtin_qualification_test.cpp) and the attack test that
// plants a look-alike of each of them (search_path_hijack_test.cpp) read statements
// through this one lexer, so the list of built-ins the attack plants is the list the
// static check found qualified.
#pragma once

#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace boxcar::testing {

struct SqlCall {
  std::string name;      // as written, dotted when qualified: "pg_catalog.now", "{schema}.t", "now"
  std::string previous;  // the word token before it, upper-cased ("AS" before an alias list)
};

/// Every `name (` in `sql`, in order. `{schema}` counts as a name; `$n` parameters,
/// literals ('...', $tag$...$tag$), "quoted" identifiers (kept, quotes removed) and
/// comments (-- and /* */) are understood.
inline std::vector<SqlCall> sql_calls(std::string_view sql) {
  std::vector<SqlCall> calls;
  std::string previous;
  auto is_word_start = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; };
  auto is_word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'; };
  std::size_t i = 0;
  // One name part at i: a word, a "quoted" identifier or {schema}; empty when none.
  auto read_part = [&]() -> std::string {
    if (i < sql.size() && sql[i] == '"') {
      std::string part;
      for (++i; i < sql.size(); ++i) {
        if (sql[i] == '"' && i + 1 < sql.size() && sql[i + 1] == '"') {
          part += '"';
          ++i;
        } else if (sql[i] == '"') {
          ++i;
          break;
        } else {
          part += sql[i];
        }
      }
      return part;
    }
    if (sql.substr(i, 8) == "{schema}") {
      i += 8;
      return "{schema}";
    }
    if (i < sql.size() && is_word_start(sql[i])) {
      const std::size_t start = i;
      while (i < sql.size() && is_word_char(sql[i])) ++i;
      return std::string(sql.substr(start, i - start));
    }
    return {};
  };
  while (i < sql.size()) {
    const char c = sql[i];
    if (sql.substr(i, 2) == "--") {
      i = std::min(sql.size(), sql.find('\n', i));
    } else if (sql.substr(i, 2) == "/*") {
      const auto end = sql.find("*/", i + 2);
      i = end == std::string_view::npos ? sql.size() : end + 2;
    } else if (c == '\'') {
      for (++i; i < sql.size(); ++i) {
        if (sql[i] == '\'' && i + 1 < sql.size() && sql[i + 1] == '\'') {
          ++i;
        } else if (sql[i] == '\'') {
          ++i;
          break;
        }
      }
    } else if (c == '$' && i + 1 < sql.size() && std::isdigit(static_cast<unsigned char>(sql[i + 1]))) {
      for (++i; i < sql.size() && std::isdigit(static_cast<unsigned char>(sql[i]));) ++i;  // $n
    } else if (c == '$') {
      const auto close = sql.find('$', i + 1);  // $tag$ ... $tag$
      if (close == std::string_view::npos) break;
      const std::string tag(sql.substr(i, close - i + 1));
      const auto end = sql.find(tag, close + 1);
      i = end == std::string_view::npos ? sql.size() : end + tag.size();
    } else if (c == '"' || c == '{' || is_word_start(c)) {
      std::string name = read_part();
      if (name.empty()) {
        ++i;
        continue;
      }
      while (i + 1 < sql.size() && sql[i] == '.' && (sql[i + 1] == '"' || is_word_start(sql[i + 1]))) {
        ++i;
        name += "." + read_part();
      }
      std::size_t next = i;
      while (next < sql.size() && std::isspace(static_cast<unsigned char>(sql[next]))) ++next;
      if (next < sql.size() && sql[next] == '(') calls.push_back({name, previous});
      previous = name;
      std::transform(previous.begin(), previous.end(), previous.begin(),
                     [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
    } else {
      ++i;
    }
  }
  return calls;
}

/// SQL keywords that may stand before `(` without being a function looked up through the
/// search_path. The first group is grammar that only looks like a call: PostgreSQL 15
/// parses each into a fixed expression node or a pg_catalog-qualified call ("Although
/// COALESCE, GREATEST, and LEAST are syntactically similar to functions, they are not
/// ordinary functions", docs 9.18; EXTRACT becomes pg_catalog.extract; CAST is a
/// pg_cast lookup; ANY/ALL/EXISTS/IN are subquery and array comparisons, docs 9.23-9.24).
/// The second group is clause structure.
inline const std::set<std::string>& sql_grammar_keywords() {
  static const std::set<std::string> keywords = {
      "COALESCE", "NULLIF", "GREATEST", "LEAST",  "EXTRACT", "CAST",   "ANY",      "ALL",   "SOME",  "EXISTS",
      "IN",       "ROW",    "AS",       "FILTER", "OVER",    "VALUES", "CONFLICT", "FROM",  "WHERE", "AND",
      "OR",       "NOT",    "ON",       "WHEN",   "THEN",    "ELSE",   "SELECT",   "USING", "JOIN",  "LATERAL"};
  return keywords;
}

/// Whether a call token resolves without the search_path: qualified with pg_catalog or
/// with Boxcar's schema, a grammar keyword, or an alias column list (`AS c(id, token)`).
inline bool resolves_without_search_path(const SqlCall& call) {
  if (call.name.rfind("pg_catalog.", 0) == 0 || call.name.rfind("{schema}.", 0) == 0) return true;
  if (call.name.find('.') != std::string::npos) return false;  // another schema: not Boxcar's
  if (call.previous == "AS") return true;
  std::string upper = call.name;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  return sql_grammar_keywords().count(upper) > 0;
}

}  // namespace boxcar::testing
