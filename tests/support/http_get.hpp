// A minimal blocking HTTP/1.0 GET over loopback for tests that scrape /metrics.
#pragma once

#include <string>

namespace boxcar::testing {

struct HttpResponse {
  int status = 0;
  std::string body;
};

/// GET http://127.0.0.1:port/path; throws std::runtime_error when it cannot connect.
HttpResponse http_get(int port, const std::string& path);

/// The value of the sample `name{labels}` (labels exactly as serialised, e.g.
/// `consumer="a",result="accepted"`; empty for none) in Prometheus text, or -1 if absent.
double metric_value(const std::string& exposition, const std::string& name, const std::string& labels = "");

}  // namespace boxcar::testing
