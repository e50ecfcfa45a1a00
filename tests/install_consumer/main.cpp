// Links against the installed boxcar::inbox and checks a fingerprint end to end.
#include <iostream>

#include "boxcar/inbox/inbox.hpp"

int main() {
  const auto canonical = boxcar::canonicalize(nlohmann::json::parse(R"({"b":1,"a":[true,null]})"));
  std::cout << canonical << " " << boxcar::content_fingerprint("e", 1, canonical) << "\n";
  return canonical == R"({"a":[true,null],"b":1})" ? 0 : 1;
}
