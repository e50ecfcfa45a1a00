// `boxcar`: the generic operator binary. It registers no handlers, so it offers the
// commands that need no application code: migrate, publisher, ingress, status, dead,
// purge and config check (see run_cli and docs/runtime.md).
#include "boxcar/runtime/runtime.hpp"

int main(int argc, char** argv) { return boxcar::run_cli(argc, argv); }
