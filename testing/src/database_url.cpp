// with_database(): another database's connection string on the same server.
#include "boxcar/testing/detail/database_url.hpp"

#include <string_view>

namespace boxcar::detail {
namespace {

// The query of a URL without its dbname parameters ("" or "?a=b&c=d").
std::string without_dbname(std::string_view query) {
  std::string kept;
  while (!query.empty()) {
    const auto end = query.find('&');
    const std::string_view parameter = query.substr(0, end);
    if (!parameter.empty() && parameter.rfind("dbname=", 0) != 0) {
      kept += kept.empty() ? "?" : "&";
      kept += parameter;
    }
    if (end == std::string_view::npos) break;
    query.remove_prefix(end + 1);
  }
  return kept;
}

}  // namespace

std::string with_database(const std::string& url, const std::string& database) {
  for (const std::string_view scheme : {"postgresql://", "postgres://"}) {
    if (url.compare(0, scheme.size(), scheme) != 0) continue;
    const auto query = url.find('?', scheme.size());
    auto path = url.find('/', scheme.size());
    if (path > query) path = query;  // a '/' in the query (host=/run/postgresql) is not the path
    const std::string authority = url.substr(0, path);
    const std::string parameters =
        query == std::string::npos ? std::string() : without_dbname(std::string_view(url).substr(query + 1));
    return authority + "/" + database + parameters;
  }
  return url + " dbname=" + database;
}

}  // namespace boxcar::detail
