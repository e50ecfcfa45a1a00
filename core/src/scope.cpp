// The stored form of a scope kind, shared by the inbox (scope_kind) and the outbox
// (tenant_scope).
#include "boxcar/core/scope.hpp"

namespace boxcar {

const char* to_string(Scope::Kind kind) noexcept { return kind == Scope::Kind::Global ? "global" : "tenant"; }

std::string to_string(const Scope& scope) {
  return scope.kind == Scope::Kind::Global ? std::string("global") : "tenant:" + scope.id;
}

std::optional<Scope> parse_scope(std::string_view text) {
  constexpr std::string_view kTenant = "tenant:";
  if (text == "global") return Scope::global();
  if (text.size() > kTenant.size() && text.starts_with(kTenant))
    return Scope::tenant(std::string(text.substr(kTenant.size())));
  return std::nullopt;
}

}  // namespace boxcar
