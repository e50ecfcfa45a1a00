// Every statement each component lists in boxcar::detail::<part>_statements(), for the
// tests that check them all (named_statements_test: each prepares; builtin_qualification_test:
// each calls built-ins qualified). Includes nothing from the components' src/.
#pragma once

#include <vector>

#include "boxcar/core/detail/named_statements.hpp"
#include "boxcar/inbox/detail/named_statements.hpp"
#include "boxcar/ops/detail/named_statements.hpp"
#include "boxcar/outbox/detail/named_statements.hpp"
#include "boxcar/publisher/detail/named_statements.hpp"
#include "boxcar/testing/detail/named_statements.hpp"

namespace boxcar::testing {

/// The statements Boxcar prepares, from every component.
inline std::vector<detail::NamedStatement> every_named_statement() {
  std::vector<detail::NamedStatement> all;
  for (auto part : {detail::core_statements(), detail::inbox_statements(), detail::outbox_statements(),
                    detail::publisher_statements(), detail::ops_statements(), detail::testing_statements()})
    all.insert(all.end(), part.begin(), part.end());
  return all;
}

}  // namespace boxcar::testing
