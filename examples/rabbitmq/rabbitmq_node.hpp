// A throw-away RabbitMQ node for integration tests: started from the Debian
// rabbitmq-server package as a non-root user (the package's `rabbitmq` account when the
// test runs as root), on free loopback ports, with its data, logs, config, Erlang cookie
// and its own epmd in a temporary directory; stopped and removed again when destroyed.
//
// Startup takes about 6 s (an Erlang VM boot), so a test starts one node and uses it for
// all of its steps.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amqp_session.hpp"

namespace boxcar::examples::testing {

/// A broker user loaded at boot (from a definitions file), for per-tenant publishers.
struct BrokerUser {
  std::string name;
  std::string password;
  /// Permission regexes on vhost "/".
  std::string configure = "^$";
  std::string write = "^amq\\.default$";  // publish to the default exchange only
  std::string read = "^$";
};

class RabbitMqNode {
 public:
  /// Why no node can be started here (the package or its user is missing), or nullopt.
  static std::optional<std::string> unavailable_reason();

  /// Starts a node and waits until it accepts an AMQP login (up to 60 s), retrying with
  /// other ports if the first ones were taken meanwhile. The node knows `guest` (an
  /// administrator, loopback only) and `users`.
  /// @throws std::runtime_error with the node's log tail when it does not come up.
  explicit RabbitMqNode(std::vector<BrokerUser> users = {});
  /// Stops the node (SIGTERM, then SIGKILL after 20 s), its epmd, and deletes its files.
  ~RabbitMqNode();
  RabbitMqNode(const RabbitMqNode&) = delete;
  RabbitMqNode& operator=(const RabbitMqNode&) = delete;

  /// Login options for the node's default `guest` user (allowed from loopback).
  AmqpOptions amqp() const;
  /// Login options for one of the users given to the constructor.
  AmqpOptions amqp_as(const BrokerUser& user) const;
  int amqp_port() const noexcept { return amqp_port_; }
  const std::string& directory() const noexcept { return dir_; }
  /// The last lines of the node's logs, for failure messages.
  std::string log_tail() const;

 private:
  bool try_start(std::string& failure);
  void stop() noexcept;

  std::vector<BrokerUser> users_;
  std::string dir_;
  std::string nodename_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  pid_t pid_ = -1;
  int amqp_port_ = 0;
  int dist_port_ = 0;
  int epmd_port_ = 0;
};

}  // namespace boxcar::examples::testing
