// The publisher's named statements, for the test that prepares every component's SQL.
#include "boxcar/publisher/detail/named_statements.hpp"

#include "publisher_queries.hpp"

namespace boxcar::detail {

std::vector<NamedStatement> publisher_statements() {
  return {{"publisher.claim", publisher_sql::kClaim},
          {"publisher.recover_expired", publisher_sql::kRecoverExpired},
          {"publisher.mark_published", publisher_sql::kMarkPublished},
          {"publisher.mark_failed", publisher_sql::kMarkFailed},
          {"publisher.mark_refused", publisher_sql::kMarkRefused}};
}

}  // namespace boxcar::detail
