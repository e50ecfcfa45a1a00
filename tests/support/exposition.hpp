// The one Prometheus text-format reader of Boxcar's tests: enough to look samples up by
// name and labels, whatever order the labels come in.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace boxcar::testing {

using Labels = std::map<std::string, std::string>;

struct Sample {
  std::string name;
  Labels labels;
  double value = 0;
};

class Exposition {
 public:
  explicit Exposition(const std::string& text);

  /// The value of the sample `name{labels}` (exactly these labels), if present.
  std::optional<double> value(const std::string& name, const Labels& labels = {}) const;
  /// The cumulative count of histogram `name` in the bucket with upper bound `le`.
  std::optional<double> bucket(const std::string& name, Labels labels, double le) const;
  /// How many samples (series) named `name` there are.
  std::size_t count(const std::string& name) const;
  bool has_line(const std::string& line) const { return text_.find(line + "\n") != std::string::npos; }
  const std::string& text() const { return text_; }

 private:
  static Sample parse(const std::string& line);

  std::string text_;
  std::vector<Sample> samples_;
};

/// The value of the sample `name{labels}` in Prometheus text `exposition`, -1 when absent.
double metric_value(const std::string& exposition, const std::string& name, const Labels& labels = {});

}  // namespace boxcar::testing
