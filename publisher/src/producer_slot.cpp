// The current producer under its mutex, and its replacement when it turns fatal.
#include "producer_slot.hpp"

namespace boxcar::detail {

ProducerSlot::ProducerSlot(std::map<std::string, std::string> properties, std::chrono::milliseconds delivery_timeout)
    : properties_(std::move(properties)),
      delivery_timeout_(delivery_timeout),
      producer_(std::make_shared<KafkaProducer>(properties_, delivery_timeout_)) {}

std::uint32_t ProducerSlot::produce(const std::vector<KafkaRecord>& records) {
  std::lock_guard lock(mutex_);
  return producer_->produce(records);
}

bool ProducerSlot::complete(std::uint32_t batch) {
  std::lock_guard lock(mutex_);
  return producer_->complete(batch);
}

ProducerSlot::Awaited ProducerSlot::await(std::uint32_t batch, std::chrono::milliseconds wait, bool replace_if_fatal) {
  std::lock_guard lock(mutex_);
  Awaited awaited{producer_->await(batch, wait), std::nullopt};
  if (replace_if_fatal && producer_->fatal()) {
    awaited.replaced_after = producer_->fatal_reason();
    std::shared_ptr<KafkaProducer> old;
    {
      std::lock_guard current(current_mutex_);
      old.swap(producer_);
    }
    old.reset();  // the old handle is destroyed before the new one connects (unless a probe still holds it)
    auto fresh = std::make_shared<KafkaProducer>(properties_, delivery_timeout_);
    std::lock_guard current(current_mutex_);
    producer_ = std::move(fresh);
  }
  return awaited;
}

bool ProducerSlot::fatal() {
  std::lock_guard lock(mutex_);
  return producer_->fatal();
}

std::shared_ptr<KafkaProducer> ProducerSlot::current() {
  std::lock_guard lock(current_mutex_);  // not mutex_: an await holds that for seconds
  return producer_;
}

void ProducerSlot::raise_fatal_error(const std::string& reason) {
  std::lock_guard lock(mutex_);
  producer_->raise_fatal_error(reason);
}

}  // namespace boxcar::detail
