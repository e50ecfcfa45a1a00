// The tenant scope of a message identity: a tenant id derived from authenticated
// context, or an intentional global scope. Never a default.
#pragma once

#include <string>

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

/// "tenant" or "global", as stored in scope_kind.
const char* to_string(Scope::Kind kind) noexcept;

}  // namespace boxcar
