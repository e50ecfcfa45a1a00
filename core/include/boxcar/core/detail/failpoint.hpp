// Failpoints: named places where the fault campaign (scripts/chaos) makes a process fail,
// e.g. SIGKILL between a handler's completion guard and its COMMIT. Not public API.
//
// They exist only in a build configured with -DBOXCAR_FAILPOINTS=ON (scripts/chaos makes
// its own build-chaos/ tree). Otherwise BOXCAR_FAILPOINT(name) compiles to nothing: no
// call, no name string, no environment lookup, so release binaries carry none.
//
// At run time a failpoint fires only when named in the environment:
//   BOXCAR_FAILPOINT=<name>:<action>[:<probability>][,<name>:<action>[:<probability>]...]
// with <action> kill (SIGKILL itself), abort, stop (SIGSTOP itself) or sleep<ms>
// (e.g. sleep3000), and <probability> in (0, 1] per hit, 1 by default.
#pragma once

#if defined(BOXCAR_FAILPOINTS) && BOXCAR_FAILPOINTS

namespace boxcar::detail {

// Does what BOXCAR_FAILPOINT configures for this name, if anything. Thread-safe.
void failpoint_hit(const char* name);

}  // namespace boxcar::detail

#define BOXCAR_FAILPOINT(name) ::boxcar::detail::failpoint_hit(name)

#else

#define BOXCAR_FAILPOINT(name) static_cast<void>(0)

#endif
