// UUIDv7 generation: milliseconds + a per-process counter (monotonic within a
// millisecond, RFC 9562 method 1) + random bits from the OS.
#include "boxcar/core/uuid.hpp"

#include <openssl/rand.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <stdexcept>

namespace boxcar {

std::string uuid_v7() {
  static std::mutex mutex;
  static std::uint64_t last_ms = 0;
  static std::uint16_t counter = 0;  // 12 bits in rand_a

  std::array<unsigned char, 16> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1)
    throw std::runtime_error("uuid_v7: the OS random generator failed");
  std::uint64_t ms;
  std::uint16_t sequence;
  {
    std::lock_guard lock(mutex);
    ms = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    if (ms <= last_ms) {
      ms = last_ms;
      if (++counter > 0x0FFF) {  // counter exhausted: borrow the next millisecond
        ++ms;
        counter = 0;
      }
    } else {
      counter = static_cast<std::uint16_t>((bytes[6] << 4 | bytes[7] >> 4) & 0x03FF);  // random start, room to grow
    }
    last_ms = ms;
    sequence = counter;
  }
  for (int i = 0; i < 6; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<unsigned char>(ms >> (40 - 8 * i));
  bytes[6] = static_cast<unsigned char>(0x70 | ((sequence >> 8) & 0x0F));
  bytes[7] = static_cast<unsigned char>(sequence & 0xFF);
  bytes[8] = static_cast<unsigned char>(0x80 | (bytes[8] & 0x3F));

  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  text.reserve(36);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    text += kHex[bytes[i] >> 4];
    text += kHex[bytes[i] & 0x0F];
  }
  return text;
}

bool is_uuid_v7(const std::string& text) noexcept {
  if (text.size() != 36) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return text[14] == '7' && (text[19] == '8' || text[19] == '9' || text[19] == 'a' || text[19] == 'b');
}

}  // namespace boxcar
