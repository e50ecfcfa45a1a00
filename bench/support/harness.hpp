// Shared machinery of the benchmarks that scripts/bench NAME runs: the command line,
// time-boxed multi-threaded measurements, baseline/boxcar rounds interleaved for noise
// control, the result table and the final `ratio CASE VALUE TARGET` lines.
//
// Benchmarks compare Boxcar with a plain-libpqxx baseline measured in the same run on
// the same database, because the machines they run on are shared and noisy: only the
// ratio means something. Timings never fail a run; errors do.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <pqxx/connection>

#include "boxcar/core/detail/named_statements.hpp"

namespace boxcar::bench {

/// A bad command line: main() prints it with the usage text and exits with 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string database_url{};
  /// Length of one timed measurement.
  double seconds = 2.0;
  /// Interleaved baseline/boxcar rounds per case; each side reports its median.
  int rounds = 5;
};

/// Parses `--database-url URL [--seconds S] [--rounds N]`.
/// @throws UsageError
Options parse_options(int argc, char** argv);
std::string usage(const std::string& program);

/// Work done in one timed measurement.
struct Measurement {
  std::uint64_t units = 0;  // messages, rows, ...
  double seconds = 0;
  double rate() const { return seconds > 0 ? static_cast<double>(units) / seconds : 0; }
};

/// One thread's operation: performs it once and returns the units it completed.
using Step = std::function<std::uint64_t()>;

/// Runs `threads` threads. Thread i first calls make_step(i) (untimed: open
/// connections, build requests), then all start together and call their step until
/// `seconds` have passed; each finishes the step in flight and the clock stops when the
/// last one has. The first exception thrown by any thread stops all and is rethrown.
Measurement run_timed(int threads, double seconds, const std::function<Step(int)>& make_step);

double median(std::vector<double> values);

/// Seconds from `start` to now (steady clock).
double since(std::chrono::steady_clock::time_point start);

/// Returns once `done()` holds, checking every 10 ms. A drain measured against a baseline
/// that waits by joining its threads must not pay a wake-up per millisecond the baseline
/// does not: on 2 saturated cores that cost the Worker about 8% (docs/benchmarks.md, "How a
/// measurement is made"). 10 ms adds at most 0.1% to a 10-second drain, against it.
void wait_until(const std::function<bool()>& done);

/// `value` with `decimals` digits after the point, for tables.
std::string fixed(double value, int decimals);

/// A SQL expression: a version-7 UUID whose 48-bit time is `at_sql` (an SQL timestamptz
/// expression) and whose other bits are random. For rows a benchmark writes into
/// outbox_events by hand, which is partitioned by event_id's time (docs/schema.md,
/// "Outbox partitions"): an id of another version lands in no partition.
std::string uuid_v7_sql(const std::string& at_sql);

/// The SQL text a library runs as `name`, found in `statements` (a component's
/// boxcar::detail::*_statements()) with `{schema}` set to `schema`: a baseline that runs the
/// library's own statements can never drift from them.
/// @throws std::runtime_error when no statement has that name
std::string library_sql(const std::vector<boxcar::detail::NamedStatement>& statements, const std::string& name,
                        const std::string& schema);

/// The outcome of one case: per-round rates of each side.
struct CaseResult {
  std::string name;    // e.g. accept_t16
  std::string detail;  // e.g. "16 threads, msg/s"
  std::vector<double> baseline{};
  std::vector<double> boxcar{};

  double baseline_median() const { return median(baseline); }
  double boxcar_median() const { return median(boxcar); }
  /// boxcar / baseline of each round, the two sides measured back to back.
  std::vector<double> round_ratios() const;
  /// The figure a target is compared against: the median of round_ratios(). Each round's
  /// two sides ran seconds apart, so a ratio within a round cancels the machine's speed
  /// of the moment, which the medians of each side over all rounds do not: on the shared
  /// 2-core machine one side's rate moved by a factor of 2.5 within half a minute.
  double ratio() const;
  /// boxcar_median() / baseline_median(): printed beside ratio(), to show how far the
  /// machine moved between rounds.
  double ratio_of_medians() const;
};

/// Whether round `round` (from 1) measures Boxcar before its baseline: in even rounds, so
/// that neither side always follows the other (a drift of the machine, or what the first
/// measurement leaves to autovacuum, falls on both alike). Every benchmark's rounds follow it.
constexpr bool boxcar_first(int round) { return round % 2 == 0; }

/// Runs `rounds` rounds, each a prepared measurement of both sides back to back in the
/// order boxcar_first() gives, and prints one line per round to `log`. `prepare` runs
/// before every measurement (reset tables, checkpoint).
CaseResult compare(const std::string& name, const std::string& detail, int rounds, const std::function<void()>& prepare,
                   const std::function<Measurement()>& baseline, const std::function<Measurement()>& boxcar,
                   std::ostream& log);

/// case | detail | baseline/s | boxcar/s | ratio: the medians of each side and ratio(); then,
/// indented, each case's round ratios and ratio_of_medians().
void print_table(std::ostream& out, const std::vector<CaseResult>& results);

/// `ratio CASE VALUE TARGET`, VALUE and TARGET with two decimals. Informational: a
/// value below its target is reported, never turned into a failure.
void print_ratio_line(std::ostream& out, const CaseResult& result, double target);

/// `info CASE VALUE`, VALUE with two decimals: a case reported without a target.
void print_info_line(std::ostream& out, const CaseResult& result);

/// An autocommit connection for setup between measurements (DDL, TRUNCATE, CHECKPOINT).
class Admin {
 public:
  explicit Admin(const std::string& url);
  void exec(const std::string& sql);
  /// CHECKPOINT, so that every measurement starts without dirty buffers and pays the
  /// same full-page writes; skipped (once warned) when the role may not checkpoint.
  void checkpoint();

 private:
  std::unique_ptr<pqxx::connection> connection_;
  bool can_checkpoint_ = true;
};

}  // namespace boxcar::bench
