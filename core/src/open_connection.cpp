// Connection opening with libpq's error text redacted (see open_connection.hpp).
#include "boxcar/core/detail/open_connection.hpp"

#include <pqxx/except>

#include "boxcar/core/redaction.hpp"

namespace boxcar::detail {

std::unique_ptr<pqxx::connection> open_connection(const std::string& conninfo) {
  try {
    return std::make_unique<pqxx::connection>(conninfo);
  } catch (const pqxx::broken_connection& e) {
    throw pqxx::broken_connection(redact_connection_error(e.what(), conninfo));
  } catch (const pqxx::sql_error& e) {
    throw pqxx::sql_error(redact_connection_error(e.what(), conninfo), "", e.sqlstate().c_str());
  } catch (const pqxx::failure& e) {
    throw pqxx::failure(redact_connection_error(e.what(), conninfo));
  }
}

}  // namespace boxcar::detail
