// An inbox handler written as a lambda, for tests (and small applications) that do not want
// a class per event type:
//
//   worker.register_handler("order.placed", 1, boxcar::testing::handler(
//       [&](const nlohmann::json& order, boxcar::HandlerContext& context) {
//         context.tx.exec("INSERT INTO projection ...");
//       }));
//
// Thread-safety: handle() calls the lambda on the worker's threads; it must be safe there.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <utility>

#include <nlohmann/json.hpp>

#include "boxcar/inbox/handler.hpp"

namespace boxcar::testing {

/// An InboxHandler whose handle() calls `body` with the payload and the context.
class LambdaHandler final : public InboxHandler {
 public:
  using Body = std::function<void(const nlohmann::json&, HandlerContext&)>;
  explicit LambdaHandler(Body body) : body_(std::move(body)) {}
  void handle(const nlohmann::json& payload, HandlerContext& context) override { body_(payload, context); }

 private:
  Body body_;
};

/// `body` as a handler to register with a Worker.
inline std::shared_ptr<InboxHandler> handler(LambdaHandler::Body body) {
  return std::make_shared<LambdaHandler>(std::move(body));
}

/// An InboxBatchHandler whose handle_batch() calls `body` with the messages and the context.
class LambdaBatchHandler final : public InboxBatchHandler {
 public:
  using Body = std::function<BatchOutcomes(std::span<const InboxMessage>, BatchContext&)>;
  explicit LambdaBatchHandler(Body body) : body_(std::move(body)) {}
  BatchOutcomes handle_batch(std::span<const InboxMessage> messages, BatchContext& context) override {
    return body_(messages, context);
  }

 private:
  Body body_;
};

/// `body` as a batch handler to register with a Worker (HandlerRegistration::batch_handler).
inline std::shared_ptr<InboxBatchHandler> batch_handler(LambdaBatchHandler::Body body) {
  return std::make_shared<LambdaBatchHandler>(std::move(body));
}

}  // namespace boxcar::testing
