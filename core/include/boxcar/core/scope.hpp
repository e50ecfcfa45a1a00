// The tenant scope of a message or an event: a tenant id derived from authenticated
// context, or an intentional global scope. One vocabulary for the inbox (an identity's
// scope) and the outbox (an event's scope), so a handler passes context.scope through.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace boxcar {

struct Scope {
  enum class Kind { Tenant, Global };

  Kind kind = Kind::Tenant;
  /// The verified tenant id; must be empty for Kind::Global.
  std::string id{};

  static Scope tenant(std::string verified_id) { return Scope{Kind::Tenant, std::move(verified_id)}; }
  static Scope global() { return Scope{Kind::Global, {}}; }

  friend bool operator==(const Scope&, const Scope&) = default;
};

/// "tenant" or "global", as stored in the inbox's scope_kind and the outbox's tenant_scope.
const char* to_string(Scope::Kind kind) noexcept;

/// How operators read and write a scope: "global", or "tenant:" followed by the tenant id
/// (`boxcar status`, `boxcar dead unblock --scope`, metric labels).
std::string to_string(const Scope& scope);

/// The scope `text` names in to_string(const Scope&)'s form; nullopt for anything else
/// ("tenant:" needs a non-empty id). Never throws.
std::optional<Scope> parse_scope(std::string_view text);

}  // namespace boxcar
