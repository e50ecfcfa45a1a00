// Cooperative cancellation: a CancellationSource fires once; every CancellationSignal
// copied from it sees cancelled() and runs its registered callbacks.
//
// Thread-safety: all members are thread-safe. Callbacks run on the thread that calls
// cancel() (or, when registered after cancellation, on the registering thread).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace boxcar {

namespace detail {
struct CancellationState {
  std::mutex mutex;
  bool cancelled = false;
  std::vector<std::function<void()>> callbacks;
};
}  // namespace detail

class CancellationSignal {
 public:
  CancellationSignal() : state_(std::make_shared<detail::CancellationState>()) {}

  bool cancelled() const {
    std::lock_guard lock(state_->mutex);
    return state_->cancelled;
  }

  /// Runs `callback` once when the source is cancelled (at once if it already is).
  /// Keep callbacks short and non-throwing: they run on the cancelling thread.
  void on_cancel(std::function<void()> callback) const {
    {
      std::lock_guard lock(state_->mutex);
      if (!state_->cancelled) {
        state_->callbacks.push_back(std::move(callback));
        return;
      }
    }
    callback();
  }

 private:
  friend class CancellationSource;
  std::shared_ptr<detail::CancellationState> state_;
};

class CancellationSource {
 public:
  CancellationSignal signal() const { return signal_; }

  /// Fires the signal; later calls do nothing.
  void cancel() {
    std::vector<std::function<void()>> callbacks;
    {
      std::lock_guard lock(signal_.state_->mutex);
      if (signal_.state_->cancelled) return;
      signal_.state_->cancelled = true;
      callbacks.swap(signal_.state_->callbacks);
    }
    for (auto& callback : callbacks) {
      try {
        callback();
      } catch (...) {
        // A callback must not stop the others from running.
      }
    }
  }

 private:
  CancellationSignal signal_;
};

}  // namespace boxcar
