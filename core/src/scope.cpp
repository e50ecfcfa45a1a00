// The stored form of a scope kind, shared by the inbox (scope_kind) and the outbox
// (tenant_scope).
#include "boxcar/core/scope.hpp"

namespace boxcar {

const char* to_string(Scope::Kind kind) noexcept { return kind == Scope::Kind::Global ? "global" : "tenant"; }

}  // namespace boxcar
