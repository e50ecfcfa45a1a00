// `boxcar`: the generic operator binary. Needs no application code.
//
//   boxcar migrate [--database-url URL] [--schema NAME]
//
// BOXCAR_DATABASE_URL and BOXCAR_SCHEMA are read from the environment; flags win.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "boxcar/runtime/error.hpp"
#include "boxcar/runtime/migrate.hpp"

namespace {

constexpr const char* kUsage =
    "usage: boxcar migrate [--database-url URL] [--schema NAME]\n"
    "  --database-url  libpq URL (default: $BOXCAR_DATABASE_URL)\n"
    "  --schema        schema holding Boxcar's tables (default: $BOXCAR_SCHEMA or boxcar)\n";

std::string env_or(const char* name, std::string fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::string(value) : std::move(fallback);
}

int run_migrate(const std::vector<std::string>& args) {
  std::string url = env_or("BOXCAR_DATABASE_URL", "");
  boxcar::MigrateOptions options{.schema = env_or("BOXCAR_SCHEMA", "boxcar")};
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw boxcar::ConfigError(args[i], "expects a value");
      return args[++i];
    };
    if (args[i] == "--database-url") url = value();
    else if (args[i] == "--schema") options.schema = value();
    else throw boxcar::ConfigError(args[i], "unknown option for 'boxcar migrate'");
  }
  if (url.empty())
    throw boxcar::ConfigError("BOXCAR_DATABASE_URL", "set it or pass --database-url");
  const auto report = boxcar::migrate(url, options);
  if (report.applied.empty()) {
    std::cout << "schema '" << options.schema << "' is up to date at version " << report.version << "\n";
  } else {
    for (int version : report.applied) std::cout << "applied migration " << version << "\n";
    std::cout << "schema '" << options.schema << "' is at version " << report.version << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + (argc > 1 ? 2 : 1), argv + argc);
  const std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command == "migrate") return run_migrate(args);
    if (command == "--help" || command == "-h" || command == "help") {
      std::cout << kUsage;
      return 0;
    }
    std::cerr << (command.empty() ? "missing command\n" : "unknown command '" + command + "'\n")
              << kUsage;
    return 2;
  } catch (const boxcar::ConfigError& e) {
    std::cerr << "boxcar: " << e.code() << ": " << e.what() << "\n";
    return 2;
  } catch (const boxcar::Error& e) {
    std::cerr << "boxcar: " << e.code() << ": " << e.what() << "\n";
    return 1;
  }
}
