// Keeps what the server sends a connection as notices, e.g. auto_explain's plans (at
// auto_explain.log_level notice) of the statements a function or trigger runs: plans that
// EXPLAIN of the calling statement does not show.
#pragma once

#include <string>
#include <vector>

#include <pqxx/pqxx>

namespace boxcar::testing {

class NoticeLog final : public pqxx::errorhandler {
 public:
  explicit NoticeLog(pqxx::connection_base& connection) : pqxx::errorhandler(connection) {}
  bool operator()(const char message[]) noexcept override {
    try {
      notices.emplace_back(message);
    } catch (...) {
    }
    return false;
  }
  // The one notice whose plan is of the statement holding `text`, or "" when none.
  std::string plan_of(const std::string& text) const {
    for (const auto& notice : notices)
      if (notice.find("Query Text:") != std::string::npos && notice.find(text) != std::string::npos) return notice;
    return {};
  }
  std::vector<std::string> notices;
};

// Has auto_explain send every plan `connection` runs, nested statements' included, as a
// notice (log_analyze: row counts, no timing).
inline void explain_nested_statements(pqxx::connection_base& connection) {
  pqxx::nontransaction n(connection);
  n.exec("LOAD 'auto_explain'");
  n.exec(
      "SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on; SET auto_explain.log_timing = off; "
      "SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = notice; "
      "SET client_min_messages = notice");
}

}  // namespace boxcar::testing
