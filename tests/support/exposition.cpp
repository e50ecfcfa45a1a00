// The tests' Prometheus text reader.
#include "exposition.hpp"

#include <cstddef>

namespace boxcar::testing {

Exposition::Exposition(const std::string& text) : text_(text) {
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line[0] == '#') continue;
    samples_.push_back(parse(line));
  }
}

std::optional<double> Exposition::value(const std::string& name, const Labels& labels) const {
  for (const auto& sample : samples_)
    if (sample.name == name && sample.labels == labels) return sample.value;
  return std::nullopt;
}

std::size_t Exposition::count(const std::string& name) const {
  std::size_t n = 0;
  for (const auto& sample : samples_) n += sample.name == name ? 1 : 0;
  return n;
}

std::optional<double> Exposition::bucket(const std::string& name, Labels labels, double le) const {
  for (const auto& sample : samples_) {
    if (sample.name != name + "_bucket") continue;
    auto rest = sample.labels;
    const auto bound = rest.find("le");
    if (bound == rest.end()) continue;
    const double upper = std::stod(bound->second);
    rest.erase(bound);
    if (rest == labels && upper == le) return sample.value;
  }
  return std::nullopt;
}

Sample Exposition::parse(const std::string& line) {
  Sample sample;
  std::size_t i = line.find_first_of("{ ");
  sample.name = line.substr(0, i);
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      const auto equals = line.find('=', i);
      const std::string key = line.substr(i, equals - i);
      i = equals + 2;  // skip ="
      std::string value;
      while (i < line.size() && line[i] != '"') {
        if (line[i] == '\\' && i + 1 < line.size()) {
          ++i;
          value += line[i] == 'n' ? '\n' : line[i];
        } else {
          value += line[i];
        }
        ++i;
      }
      ++i;  // closing quote
      if (i < line.size() && line[i] == ',') ++i;
      sample.labels[key] = value;
    }
    ++i;  // closing brace
  }
  sample.value = std::stod(line.substr(line.find(' ', i) + 1));
  return sample;
}

double metric_value(const std::string& exposition, const std::string& name, const Labels& labels) {
  return Exposition(exposition).value(name, labels).value_or(-1);
}

}  // namespace boxcar::testing
