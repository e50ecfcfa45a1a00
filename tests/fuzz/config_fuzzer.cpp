// Configuration file parsing: the JSON text of a config file applied as load_config
// applies the file (boxcar::apply_config_file). Properties: nothing crashes; a refusal is
// a ConfigError naming a key (no other exception escapes); an accepted file leaves a
// configuration that describe() can print, one known key per line.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "boxcar/core/error.hpp"
#include "boxcar/runtime/config.hpp"
#include "fuzz_check.hpp"

using boxcar::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  boxcar::RuntimeConfig config;
  try {
    boxcar::apply_config_file(config, input, "fuzz.json");
  } catch (const boxcar::ConfigError& e) {
    check(!e.key().empty(), "a configuration error names the key", input);
    return 0;
  }
  for (const auto& [key, value] : boxcar::describe(config))
    check(boxcar::find_config_key(key) != nullptr, "describe() prints only known keys", input);
  return 0;
}
