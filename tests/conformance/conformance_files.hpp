// Reading the conformance vectors (conformance/*.json) in the C++ tests that replay them.
// BOXCAR_CONFORMANCE_DIR is the source tree's conformance/ (tests/CMakeLists.txt).
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace boxcar::conformance {

inline nlohmann::json load(const std::string& file) {
  const std::string path = std::string(BOXCAR_CONFORMANCE_DIR) + "/" + file;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

/// A canonical-JSON case's input: "text", or "textHex" for bytes that are not UTF-8.
inline std::string case_text(const nlohmann::json& c) {
  if (c.contains("text")) return c.at("text").get<std::string>();
  const auto hex = c.at("textHex").get<std::string>();
  std::string bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return bytes;
}

}  // namespace boxcar::conformance
