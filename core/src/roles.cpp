// apply_roles(): the least-privilege group roles of one schema (roles.hpp).
#include "boxcar/core/roles.hpp"

#include <pqxx/pqxx>

#include <cctype>
#include <map>

#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/detail/open_connection.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "replace_all.hpp"
#include "roles_queries.hpp"

namespace boxcar {
namespace {

namespace sql = detail::roles_sql;

constexpr std::size_t kMaxPrefix = 40;  // + "publisher" stays well inside NAMEDATALEN - 1 (63)

std::string validate_prefix(const std::string& prefix) {
  const auto bad = [&](const std::string& why) { throw ConfigError("roles.role_prefix", why); };
  if (prefix.empty()) bad("must not be empty");
  if (prefix.size() > kMaxPrefix) bad("must be at most " + std::to_string(kMaxPrefix) + " characters");
  const auto lower_or_underscore = [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; };
  if (!lower_or_underscore(prefix.front())) bad("must start with a lower-case letter or '_'");
  for (char c : prefix)
    if (!lower_or_underscore(c) && !(c >= '0' && c <= '9')) bad("may hold only lower-case letters, digits and '_'");
  return prefix;
}

// `text` with each placeholder replaced.
std::string bind_placeholders(std::string text, const std::map<std::string, std::string>& placeholders) {
  for (const auto& [from, to] : placeholders) detail::replace_all(text, from, to);
  return text;
}

}  // namespace

RoleNames role_names(const RolesOptions& options) {
  const std::string p = validate_prefix(options.role_prefix);
  return {p + "migrator", p + "ingress", p + "worker", p + "publisher", p + "operator", p + "console"};
}

RolesReport apply_roles(const std::string& connection_string, const RolesOptions& options) {
  const std::string schema = validate_schema_name(options.schema);
  const RoleNames names = role_names(options);
  const std::vector<std::string> all = {names.migrator,  names.ingress,   names.worker,
                                        names.publisher, names.operator_, names.console};
  const SchemaCompatibility compatibility = check_schema_compatibility(connection_string, {.schema = schema});
  if (compatibility.applied_version < compatibility.build_version)
    throw MigrationError("ROLES_NEED_MIGRATE", "roles for schema '" + schema + "': " + compatibility.detail);

  const std::map<std::string, std::string> placeholders = {{"{schema}", quote_identifier(schema)},
                                                           {"{migrator}", quote_identifier(names.migrator)},
                                                           {"{ingress}", quote_identifier(names.ingress)},
                                                           {"{worker}", quote_identifier(names.worker)},
                                                           {"{publisher}", quote_identifier(names.publisher)},
                                                           {"{operator}", quote_identifier(names.operator_)},
                                                           {"{console}", quote_identifier(names.console)}};

  RolesReport report;
  try {
    const auto connection = detail::open_connection(connection_string);
    pqxx::work tx(*connection);
    tx.exec(sql::kLock);
    const bool may_create = tx.exec1(sql::kMayCreateRoles)["allowed"].as<bool>();
    for (const auto& role : all) {
      if (tx.exec_params1(sql::kRoleExists, role)["present"].as<bool>()) continue;
      if (!may_create) throw RoleMissingError(role);
      tx.exec(bind_placeholders(sql::kCreateRole, {{"{role}", quote_identifier(role)}}));
      report.created.push_back(role);
    }
    if (!tx.exec_params1(sql::kIsMember, names.migrator)["member"].as<bool>())
      tx.exec(bind_placeholders(sql::kJoinMigrator, placeholders));
    for (const char* statement : sql::kOwnership) tx.exec(bind_placeholders(statement, placeholders));
    for (const char* statement : sql::kRevoke) tx.exec(bind_placeholders(statement, placeholders));
    for (const char* statement : sql::kGrant) tx.exec(bind_placeholders(statement, placeholders));
    tx.commit();
  } catch (const Error&) {
    throw;
  } catch (...) {
    throw detail::to_database_error(std::current_exception(), "granting the roles of schema '" + schema + "'", false);
  }
  log_event(
      *logger("migrate"), LogLevel::Info, "roles granted",
      {{"schema", schema}, {"role_prefix", options.role_prefix}, {"created", std::to_string(report.created.size())}});
  return report;
}

}  // namespace boxcar
