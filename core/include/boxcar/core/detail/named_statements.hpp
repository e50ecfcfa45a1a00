// Every library lists its named SQL statements through a `boxcar::detail::<part>_statements()`
// function, so one test (tests/host/named_statements_test.cpp) can prepare all of them
// against a migrated schema: the stand-in for sqlc, a typo fails in CI. Not public API.
#pragma once

#include <algorithm>
#include <optional>
#include <string_view>
#include <vector>

namespace boxcar::detail {

/// One statement of a component's queries file: `name` is "<component>.<statement>",
/// `sql` the text with its `{schema}` placeholders (see with_schema()).
struct NamedStatement {
  std::string_view name;
  std::string_view sql;
};

/// The SQL of the statement `name` in `statements` ({schema} not yet replaced), or nullopt:
/// the one lookup behind the tests' plan checks and the benchmarks' baselines that run a
/// library's own statements.
inline std::optional<std::string_view> find_statement(const std::vector<NamedStatement>& statements,
                                                      std::string_view name) {
  const auto it = std::find_if(statements.begin(), statements.end(), [&](const auto& s) { return s.name == name; });
  if (it == statements.end()) return std::nullopt;
  return it->sql;
}

/// The core's own statements (migration lock, notifier).
std::vector<NamedStatement> core_statements();

/// The core's SQL that cannot be PREPAREd (DDL, RESET, the multi-statement session reset):
/// not in core_statements(), but read by the check that every built-in is qualified
/// (tests/host/builtin_qualification_test.cpp).
std::vector<NamedStatement> core_unprepared_statements();

}  // namespace boxcar::detail
