// The commit of boxcar::Tx's libpqxx transaction, with the command its owner chose.
#include "transaction_work.hpp"

namespace boxcar::detail {

void TransactionWork::do_commit() {
  try {
    direct_exec(commit_command_.c_str());
  } catch (const pqxx::statement_completion_unknown& e) {
    throw pqxx::in_doubt_error(std::string("commit of transaction '") + name() +
                               "' may or may not have happened: " + e.what());
  } catch (const std::exception& e) {
    if (!conn().is_open())
      throw pqxx::in_doubt_error(std::string("connection lost while committing transaction '") + name() +
                                 "': " + e.what());
    throw;
  }
}

}  // namespace boxcar::detail
