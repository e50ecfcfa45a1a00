// The one HTTP client of Boxcar's tests: a blocking HTTP/1.1 request over loopback, read to
// EOF, for the /metrics, /healthz and /readyz endpoints and the console's API.
#pragma once

#include <string>
#include <vector>

namespace boxcar::testing {

struct HttpResponse {
  int status = 0;
  std::string headers;  // the status line and header lines, without the blank line
  std::string body;
};

/// `method path` to http://127.0.0.1:port with an empty body and `Connection: close`.
/// Sends and reads time out after 5 s, so a server that hangs fails the test instead of
/// hanging it. @throws std::runtime_error when it cannot connect, times out or gets no
/// HTTP answer.
HttpResponse http_request(int port, const std::string& method, const std::string& path);

/// http_request(port, "GET", path).
HttpResponse http_get(int port, const std::string& path);

/// `method path` with extra header lines ("Name: value", without CRLF) and `body`; Host is
/// 127.0.0.1:port. Same timeouts and errors as http_request.
HttpResponse http_send(int port, const std::string& method, const std::string& path,
                       const std::vector<std::string>& headers, const std::string& body);

}  // namespace boxcar::testing
