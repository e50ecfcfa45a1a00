// Strict UTF-8 validation: the gate that keeps fingerprinted text identical across
// languages, since every JCS implementation must see the same code points.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "boxcar/core/canonical_json.hpp"

namespace boxcar {

bool is_valid_utf8(std::string_view text) noexcept {
  // Follows the well-formed byte sequence table (Unicode Standard, Table 3-7). The
  // narrowed second-byte ranges after E0, ED, F0 and F4 are what exclude overlong
  // forms, UTF-16 surrogates and code points above U+10FFFF.
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t size = text.size();
  std::size_t i = 0;
  while (i < size) {
    const unsigned char lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      // Mostly ASCII text: skip eight bytes at a time while none has its high bit set.
      std::uint64_t chunk;
      while (size - i >= sizeof chunk) {
        std::memcpy(&chunk, bytes + i, sizeof chunk);
        if ((chunk & 0x8080808080808080ULL) != 0) break;
        i += sizeof chunk;
      }
      continue;
    }

    std::size_t length = 0;
    unsigned char second_min = 0x80;
    unsigned char second_max = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead == 0xE0) {
      length = 3;
      second_min = 0xA0;  // below is an overlong 2-byte form
    } else if (lead == 0xED) {
      length = 3;
      second_max = 0x9F;  // above encodes U+D800..U+DFFF
    } else if (lead >= 0xE1 && lead <= 0xEF) {
      length = 3;
    } else if (lead == 0xF0) {
      length = 4;
      second_min = 0x90;  // below is an overlong 3-byte form
    } else if (lead >= 0xF1 && lead <= 0xF3) {
      length = 4;
    } else if (lead == 0xF4) {
      length = 4;
      second_max = 0x8F;  // above is beyond U+10FFFF
    } else {
      return false;  // continuation byte, C0/C1 (always overlong) or F5..FF
    }

    if (size - i < length) {
      return false;
    }
    if (bytes[i + 1] < second_min || bytes[i + 1] > second_max) {
      return false;
    }
    for (std::size_t k = 2; k < length; ++k) {
      if ((bytes[i + k] & 0xC0) != 0x80) {
        return false;
      }
    }
    i += length;
  }
  return true;
}

}  // namespace boxcar
