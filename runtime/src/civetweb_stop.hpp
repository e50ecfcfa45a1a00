// Stopping a civetweb server without waiting out its accept loop's poll.
#pragma once

struct mg_context;

namespace boxcar::detail {

/// mg_stop(context), returning as soon as civetweb has stopped. civetweb 1.15 polls its
/// listening sockets with a 2-second timeout and sees the stop request only when a poll
/// returns, so a plain mg_stop() on an idle server takes up to 2 s: that much longer
/// for every graceful shutdown. Meanwhile this connects to the server's own port on
/// loopback every 10 ms, which ends the poll at once. The connections carry no request,
/// so nothing is served. A server bound to another address only is not reached that way
/// and stops as mg_stop() alone would.
void stop_promptly(mg_context* context) noexcept;

}  // namespace boxcar::detail
