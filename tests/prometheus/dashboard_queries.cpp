#include "dashboard_queries.hpp"

#include <regex>
#include <set>

namespace boxcar::testing {
namespace {

void collect_panels(const nlohmann::json& panels, std::vector<DashboardQuery>& out) {
  for (const auto& panel : panels) {
    const std::string title = panel.value("title", "(untitled)");
    for (const auto& target : panel.value("targets", nlohmann::json::array()))
      if (target.contains("expr"))
        out.push_back({"panel \"" + title + "\", target " + target.value("refId", "?"), target.at("expr")});
    if (panel.contains("panels")) collect_panels(panel.at("panels"), out);  // a collapsed row
  }
}

}  // namespace

std::vector<DashboardQuery> dashboard_queries(const nlohmann::json& dashboard) {
  std::vector<DashboardQuery> out;
  collect_panels(dashboard.value("panels", nlohmann::json::array()), out);
  for (const auto& variable :
       dashboard.value("templating", nlohmann::json::object()).value("list", nlohmann::json::array())) {
    if (variable.value("type", "") != "query") continue;
    const auto& query = variable.at("query");
    out.push_back({"variable " + variable.value("name", "?"),
                   query.is_string() ? query.get<std::string>() : query.at("query").get<std::string>()});
  }
  return out;
}

std::string instantiate(std::string expr, const std::string& rate_interval) {
  static const std::regex variable(R"(\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*))");
  std::string out;
  auto begin = std::sregex_iterator(expr.begin(), expr.end(), variable);
  std::size_t last = 0;
  for (auto m = begin; m != std::sregex_iterator(); ++m) {
    const std::string name = (*m)[1].matched ? (*m)[1].str() : (*m)[2].str();
    out += expr.substr(last, static_cast<std::size_t>(m->position()) - last);
    out += (name == "__rate_interval" || name == "__interval") ? rate_interval : ".*";
    last = static_cast<std::size_t>(m->position() + m->length());
  }
  return out + expr.substr(last);
}

std::vector<std::string> metric_names_in(const std::string& expr) {
  static const std::regex name(R"(\bboxcar_[a-z0-9_]+\b)");
  std::set<std::string> names;
  for (auto m = std::sregex_iterator(expr.begin(), expr.end(), name); m != std::sregex_iterator(); ++m)
    names.insert(m->str());
  return {names.begin(), names.end()};
}

}  // namespace boxcar::testing
