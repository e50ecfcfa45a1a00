// The PromQL of a Grafana dashboard JSON, made runnable against a plain Prometheus: the
// panels' target expressions and the `label_values(metric, label)` variable queries, with
// Grafana's variables replaced by what "All" and the rate interval would give.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace boxcar::testing {

struct DashboardQuery {
  std::string where;  // "panel <title>, target <refId>" or "variable <name>"
  std::string expr;   // as written in the dashboard
};

/// Every target expression of every panel (rows' nested panels included) and every
/// query variable's query, in dashboard order.
std::vector<DashboardQuery> dashboard_queries(const nlohmann::json& dashboard);

/// `expr` with `$var` / `${var}` replaced: `$__rate_interval` and `$__interval` by
/// `rate_interval`, any other variable by `.*` (Grafana's "All" for a regex matcher).
std::string instantiate(std::string expr, const std::string& rate_interval);

/// The boxcar_* metric names `expr` mentions (histogram series names such as
/// `..._bucket` as written).
std::vector<std::string> metric_names_in(const std::string& expr);

}  // namespace boxcar::testing
