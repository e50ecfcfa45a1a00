// The test kit's named statements, for the test that prepares every component's SQL.
#include "boxcar/testing/detail/named_statements.hpp"

#include "testing_queries.hpp"

namespace boxcar::detail {

std::vector<NamedStatement> testing_statements() {
  return {{"testing.receipt_state", testing_sql::kReceiptState},
          {"testing.capture_published", testing_sql::kCapturePublished},
          {"testing.template_state", testing_sql::kTemplateState},
          {"testing.lock_template", testing_sql::kLockTemplate},
          {"testing.templates", testing_sql::kTemplates}};
}

}  // namespace boxcar::detail
