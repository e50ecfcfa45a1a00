// The console page's files (runtime/console/), embedded at build time: runtime/
// CMakeLists.txt turns each into a string of the generated console_assets.cpp, so the
// binary serves the page with nothing on disk and nothing fetched.
#pragma once

#include <string_view>
#include <vector>

namespace boxcar::detail {

struct ConsoleAsset {
  /// "/index.html", "/console.css", "/console.js".
  std::string_view path;
  std::string_view content_type;
  std::string_view body;
};

const std::vector<ConsoleAsset>& console_assets();

}  // namespace boxcar::detail
