// UUIDv7 (RFC 9562) as the C++ core/src/uuid.cpp makes it: 48-bit Unix milliseconds, a
// 12-bit counter that keeps ids of one millisecond in creation order within the process
// (method 1, random start), then random bits. The outbox partitions by the id's time, and
// the publisher's consumers deduplicate on it.
import { randomBytes } from 'node:crypto';

let lastMs = 0;
let counter = 0;

/** A new UUIDv7 in canonical lower-case text form (8-4-4-4-12). */
export function uuidV7(): string {
  const bytes = randomBytes(16);
  let ms = Date.now();
  if (ms <= lastMs) {
    ms = lastMs;
    if (++counter > 0x0fff) {
      // Counter exhausted: borrow the next millisecond.
      ++ms;
      counter = 0;
    }
  } else {
    counter = ((bytes[6] << 4) | (bytes[7] >> 4)) & 0x03ff; // random start, room to grow
  }
  lastMs = ms;
  // 48 bits of milliseconds, big-endian (beyond 32 bits, so no bitwise operators).
  let rest = ms;
  for (let i = 5; i >= 0; --i) {
    bytes[i] = rest % 256;
    rest = Math.floor(rest / 256);
  }
  bytes[6] = 0x70 | ((counter >> 8) & 0x0f);
  bytes[7] = counter & 0xff;
  bytes[8] = 0x80 | (bytes[8] & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** True when `text` is a canonical lower-case UUID with version 7 and the RFC variant. */
export function isUuidV7(text: string): boolean {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(text);
}
