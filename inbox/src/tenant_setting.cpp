// The tenant setting: one parameterised statement, and the check of its name.
#include "tenant_setting.hpp"

#include <pqxx/pqxx>

#include "boxcar/inbox/worker.hpp"
#include "worker_queries.hpp"

namespace boxcar {

bool is_custom_setting_name(std::string_view name) noexcept {
  // PostgreSQL accepts any dotted name as a placeholder setting; identifiers only keep
  // the value readable in policies without quoting.
  const auto is_start = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  const auto is_rest = [&](char c) { return is_start(c) || (c >= '0' && c <= '9') || c == '$'; };
  std::size_t parts = 0;
  std::size_t start = 0;
  while (start <= name.size()) {
    const auto dot = name.find('.', start);
    const auto part = name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (part.empty() || !is_start(part.front())) return false;
    for (char c : part)
      if (!is_rest(c)) return false;
    ++parts;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts >= 2;
}

namespace detail {

std::string tenant_setting_value(const Scope& scope) { return scope.kind == Scope::Kind::Tenant ? scope.id : ""; }

void set_tenant(Tx& tx, const std::string& setting, const Scope& scope) {
  if (setting.empty()) return;
  tx.exec(worker_sql::kSetTenant, setting, tenant_setting_value(scope));
}

}  // namespace detail
}  // namespace boxcar
