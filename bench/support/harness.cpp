// Time-boxed measurements, interleaved rounds and result printing for the benchmarks.
#include "harness.hpp"

#include "boxcar/core/detail/with_schema.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include <pqxx/pqxx>

namespace boxcar::bench {
namespace {

double parse_number(const std::string& flag, const std::string& text) {
  try {
    std::size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size() && value > 0) return value;
  } catch (const std::exception&) {
  }
  throw UsageError(flag + " needs a positive number, got '" + text + "'");
}

}  // namespace

std::string usage(const std::string& program) {
  return "usage: " + program + " --database-url URL [--seconds S (default 2)] [--rounds N (default 5, at least 3)]";
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") throw UsageError("");
    if (i + 1 >= argc) throw UsageError(flag + ": missing value (or unknown flag)");
    const std::string value = argv[++i];
    if (flag == "--database-url") {
      options.database_url = value;
    } else if (flag == "--seconds") {
      options.seconds = parse_number(flag, value);
    } else if (flag == "--rounds") {
      const double rounds = parse_number(flag, value);
      if (rounds < 3 || rounds != static_cast<int>(rounds))
        throw UsageError("--rounds needs a whole number of at least 3");
      options.rounds = static_cast<int>(rounds);
    } else {
      throw UsageError("unknown flag " + flag);
    }
  }
  if (options.database_url.empty()) throw UsageError("--database-url is required");
  return options;
}

Measurement run_timed(int threads, double seconds, const std::function<Step(int)>& make_step) {
  using Clock = std::chrono::steady_clock;
  std::mutex mutex;
  std::condition_variable changed;
  int ready = 0;
  bool go = false;
  std::atomic<bool> stop{false};
  std::exception_ptr error;
  std::vector<std::uint64_t> units(static_cast<std::size_t>(threads), 0);

  auto fail = [&](std::exception_ptr e) {
    {
      std::lock_guard lock(mutex);
      if (!error) error = std::move(e);
      stop = true;
    }
    changed.notify_all();
  };

  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      Step step;
      try {
        step = make_step(t);
      } catch (...) {
        fail(std::current_exception());
      }
      {
        std::unique_lock lock(mutex);
        ++ready;
        changed.notify_all();
        changed.wait(lock, [&] { return go; });
      }
      if (!step) return;
      std::uint64_t done = 0;
      try {
        while (!stop.load(std::memory_order_relaxed)) done += step();
      } catch (...) {
        fail(std::current_exception());
      }
      units[static_cast<std::size_t>(t)] = done;
    });
  }

  Clock::time_point start;
  {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return ready == threads; });
    go = true;
    start = Clock::now();
  }
  changed.notify_all();
  {
    std::unique_lock lock(mutex);
    changed.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return error != nullptr; });
  }
  stop = true;
  for (auto& worker : workers) worker.join();
  const auto end = Clock::now();
  if (error) std::rethrow_exception(error);

  Measurement m;
  for (auto u : units) m.units += u;
  m.seconds = std::chrono::duration<double>(end - start).count();
  return m;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::vector<double> CaseResult::round_ratios() const {
  std::vector<double> ratios;
  for (std::size_t i = 0; i < std::min(baseline.size(), boxcar.size()); ++i)
    ratios.push_back(baseline[i] > 0 ? boxcar[i] / baseline[i] : 0);
  return ratios;
}

double CaseResult::ratio() const { return median(round_ratios()); }

double CaseResult::ratio_of_medians() const {
  const double base = baseline_median();
  return base > 0 ? boxcar_median() / base : 0;
}

CaseResult compare(const std::string& name, const std::string& detail, int rounds, const std::function<void()>& prepare,
                   const std::function<Measurement()>& baseline, const std::function<Measurement()>& boxcar,
                   std::ostream& log) {
  CaseResult result{.name = name, .detail = detail};
  const auto measure = [&](const std::function<Measurement()>& side) {
    prepare();
    return side();
  };
  for (int round = 1; round <= rounds; ++round) {
    Measurement b, x;
    if (boxcar_first(round)) {
      x = measure(boxcar);
      b = measure(baseline);
    } else {
      b = measure(baseline);
      x = measure(boxcar);
    }
    result.baseline.push_back(b.rate());
    result.boxcar.push_back(x.rate());
    log << "  " << name << " round " << round << "/" << rounds << ": baseline " << fixed(b.rate(), 0) << "/s ("
        << b.units << " in " << fixed(b.seconds, 2) << " s)  boxcar " << fixed(x.rate(), 0) << "/s (" << x.units
        << " in " << fixed(x.seconds, 2) << " s)  ratio " << fixed(b.rate() > 0 ? x.rate() / b.rate() : 0, 2)
        << (boxcar_first(round) ? "  (boxcar first)" : "") << std::endl;
  }
  return result;
}

void print_table(std::ostream& out, const std::vector<CaseResult>& results) {
  std::size_t name_width = 4, detail_width = 6;
  for (const auto& r : results) {
    name_width = std::max(name_width, r.name.size());
    detail_width = std::max(detail_width, r.detail.size());
  }
  const auto row = [&](const std::string& name, const std::string& detail, const std::string& base,
                       const std::string& boxcar, const std::string& ratio) {
    out << std::left << std::setw(static_cast<int>(name_width)) << name << "  "
        << std::setw(static_cast<int>(detail_width)) << detail << "  " << std::right << std::setw(11) << base << "  "
        << std::setw(11) << boxcar << "  " << std::setw(5) << ratio << "\n";
  };
  row("case", "detail", "baseline/s", "boxcar/s", "ratio");
  for (const auto& r : results)
    row(r.name, r.detail, fixed(r.baseline_median(), 0), fixed(r.boxcar_median(), 0), fixed(r.ratio(), 2));
  out << "\n";
  for (const auto& r : results) {
    out << "  " << r.name << ": ratio " << fixed(r.ratio(), 2) << ", the median of the rounds'";
    for (const double ratio : r.round_ratios()) out << " " << fixed(ratio, 2);
    out << "; ratio of the medians " << fixed(r.ratio_of_medians(), 2) << "\n";
  }
  out.flush();
}

void print_ratio_line(std::ostream& out, const CaseResult& result, double target) {
  out << "ratio " << result.name << " " << fixed(result.ratio(), 2) << " " << fixed(target, 2) << std::endl;
}

void print_info_line(std::ostream& out, const CaseResult& result) {
  out << "info " << result.name << " " << fixed(result.ratio(), 2) << std::endl;
}

Admin::Admin(const std::string& url) : connection_(std::make_unique<pqxx::connection>(url)) {
#ifndef __OPTIMIZE__
  // Outside scripts/bench's Release tree the benchmarks are built at -O0 (bench/CMakeLists.txt):
  // their baselines run unoptimised there, so their ratios mean nothing.
  static const bool warned = [] {
    std::cerr << "bench: built without optimisation; measure with scripts/bench (build-bench/, Release)\n";
    return true;
  }();
  (void)warned;
#endif
}

void Admin::exec(const std::string& sql) { pqxx::nontransaction(*connection_).exec(sql); }

void Admin::checkpoint() {
  if (!can_checkpoint_) return;
  try {
    exec("CHECKPOINT");
  } catch (const pqxx::sql_error& e) {
    can_checkpoint_ = false;
    std::cerr << "note: CHECKPOINT not permitted, measurements start without one: " << e.what();
  }
}

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void wait_until(const std::function<bool()>& done) {
  while (!done()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

std::string fixed(double value, int decimals) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(decimals) << value;
  return out.str();
}

std::string library_sql(const std::vector<boxcar::detail::NamedStatement>& statements, const std::string& name,
                        const std::string& schema) {
  const auto sql = boxcar::detail::find_statement(statements, name);
  if (!sql) throw std::runtime_error("the library has no statement named " + name);
  return boxcar::detail::with_schema(*sql, schema);
}

std::string uuid_v7_sql(const std::string& at_sql) {
  const std::string millis = "pg_catalog.lpad(pg_catalog.to_hex(pg_catalog.floor(pg_catalog.date_part('epoch', " +
                             at_sql + ") * 1000)::bigint), 12, '0')";
  return "(pg_catalog.substr(" + millis + ", 1, 8) || '-' || pg_catalog.substr(" + millis +
         ", 9, 4) || '-7' || pg_catalog.substr(pg_catalog.gen_random_uuid()::text, 16))::uuid";
}

}  // namespace boxcar::bench
