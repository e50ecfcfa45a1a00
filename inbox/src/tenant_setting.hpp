// worker.tenant_setting: the message's tenant in a transaction-local custom setting, for
// the row-level-security recipe of docs/security.md (section 4).
#pragma once

#include <string>

#include "boxcar/core/scope.hpp"
#include "boxcar/core/tx.hpp"

namespace boxcar::detail {

/// The value the setting takes for `scope`: its tenant id, or "" for a global scope (a
/// policy `tenant_id = current_setting(...)` then matches no tenant's rows).
std::string tenant_setting_value(const Scope& scope);

/// Sets `setting` to tenant_setting_value(scope) in `tx` until it ends (SET LOCAL), so a
/// batch may set it again before each handler. Does nothing when `setting` is empty.
/// @throws pqxx errors from the statement (the attempt fails like any handler statement).
void set_tenant(Tx& tx, const std::string& setting, const Scope& scope);

}  // namespace boxcar::detail
