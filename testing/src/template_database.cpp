// The template database of TestSchemaOptions::from_template: made and migrated by the first
// test that needs it, then copied with CREATE DATABASE ... TEMPLATE for each test.
#include "template_database.hpp"

#include <exception>
#include <string_view>

#include <pqxx/pqxx>

#include "boxcar/core/canonical_json.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/detail/migration_file.hpp"
#include "boxcar/testing/detail/database_url.hpp"
#include "testing_queries.hpp"

namespace boxcar::testing {
namespace {

// The schema each template holds; every copy renames it to the test's own.
constexpr std::string_view kTemplateSchema = "boxcar_template";
constexpr std::string_view kTemplatePrefix = "boxcar_template_";

// Twelve hex digits of a SHA-256 over every embedded migration's version and checksum:
// a migration edited or added makes a template of another name.
const std::string& migrations_checksum() {
  static const std::string checksum = [] {
    std::string all;
    for (const auto& migration : detail::embedded_migrations())
      all += std::to_string(migration.version) + ' ' + migration.checksum + '\n';
    return sha256_hex(all).substr(0, 12);
  }();
  return checksum;
}

// "boxcar_template_<checksum>_": the template's name without its day.
std::string template_stem() { return std::string(kTemplatePrefix) + migrations_checksum() + "_"; }

// Days are YYYYMMDD, so their order as integers is their order in time; two apart or
// more, no test of this kit still copies the older template (each checks the day first).
bool at_least_two_days_before(const std::string& day, const std::string& today) {
  try {
    return std::stol(today) - std::stol(day) >= 2 && day.size() == 8;
  } catch (const std::exception&) {
    return false;
  }
}

// Run with the template lock held: the template of `day` from nothing (again, when a
// creator died half-way), then the templates two days old or more go.
void make_template(pqxx::connection& server, const std::string& url, const std::string& day) {
  const std::string name = template_stem() + day;
  const std::string quoted = quote_identifier(name);
  pqxx::nontransaction tx(server);
  tx.exec("DROP DATABASE IF EXISTS " + quoted + " WITH (FORCE)");
  tx.exec("CREATE DATABASE " + quoted + " TEMPLATE template0");
  migrate(detail::with_database(url, name), {.schema = std::string(kTemplateSchema)});
  // ALLOW_CONNECTIONS false: a session in a template makes every copy fail ("being
  // accessed by other users"). IS_TEMPLATE true is the mark the others wait for.
  tx.exec("ALTER DATABASE " + quoted + " WITH ALLOW_CONNECTIONS false IS_TEMPLATE true");
  for (const auto& row : tx.exec_params(testing_sql::kTemplates, std::string(kTemplatePrefix))) {
    const auto old = row["datname"].as<std::string>();
    if (!at_least_two_days_before(row["day"].as<std::string>(), day)) continue;
    tx.exec("ALTER DATABASE " + quote_identifier(old) + " WITH IS_TEMPLATE false");
    tx.exec("DROP DATABASE IF EXISTS " + quote_identifier(old) + " WITH (FORCE)");
  }
}

// The name of today's template, made first when there is none (or only a dead creator's).
std::string ready_template(pqxx::connection& server, const std::string& url) {
  const auto state = [&] {
    return pqxx::nontransaction(server).exec_params1(testing_sql::kTemplateState, template_stem());
  };
  auto row = state();
  if (row["ready"].is_null() || !row["ready"].as<bool>()) {
    pqxx::nontransaction(server).exec(testing_sql::kLockTemplate);
    row = state();  // another test may have made it while this one waited
    if (row["ready"].is_null() || !row["ready"].as<bool>()) make_template(server, url, row["day"].as<std::string>());
    // The lock goes with the session, when `server` closes.
  }
  return template_stem() + row["day"].as<std::string>();
}

std::string with_literals(std::string_view sql, pqxx::connection& c, const std::string& from, const std::string& to) {
  std::string out(sql);
  for (const auto& [placeholder, value] : {std::pair{std::string("{from}"), c.quote(from)}, {"{to}", c.quote(to)}})
    for (auto at = out.find(placeholder); at != std::string::npos; at = out.find(placeholder, at + value.size()))
      out.replace(at, placeholder.size(), value);
  return out;
}

}  // namespace

std::string copy_template_database(const std::string& url, const std::string& name) {
  std::string copy_url;
  try {
    {
      pqxx::connection server(url);
      const std::string source = ready_template(server, url);
      pqxx::nontransaction(server).exec("CREATE DATABASE " + quote_identifier(name) + " TEMPLATE " +
                                        quote_identifier(source));
    }
    copy_url = detail::with_database(url, name);
    try {
      pqxx::connection copy(copy_url);
      pqxx::nontransaction(copy).exec(
          with_literals(testing_sql::kRenameTemplateSchema, copy, std::string(kTemplateSchema), name));
    } catch (...) {
      try {
        drop_database(url, name);
      } catch (...) {
        // The error that matters is the rename's; a leftover test database is harmless.
      }
      throw;
    }
  } catch (const Error&) {
    throw;
  } catch (...) {
    throw detail::to_database_error(std::current_exception(), "copying the test template database", false);
  }
  return copy_url;
}

void drop_database(const std::string& url, const std::string& name) {
  try {
    pqxx::connection server(url);
    pqxx::nontransaction(server).exec("DROP DATABASE IF EXISTS " + quote_identifier(name) + " WITH (FORCE)");
  } catch (...) {
    throw detail::to_database_error(std::current_exception(), "dropping a test database", false);
  }
}

}  // namespace boxcar::testing
