// Paces the NOTIFY wake-ups of one channel, like the C++ detail::AsyncNotifier: a wake-up
// rides on an accept's own insert when one is due, and otherwise the consumers are marked
// and sent by the notifier's own autocommit statement once the interval has passed.
//
// Why not a NOTIFY in every insert: PostgreSQL serialises the commits of all notifying
// transactions behind one lock held through each one's WAL flush (docs/schema.md,
// "Wake-ups from the accept path"). So at most one wake-up is in flight at a time, at most
// one per interval. Notifications are hints: C++ workers also poll, so a lost one only
// costs latency, and a failed send is dropped, never an accept's error.
import type { Pool } from 'pg';

import { kNotifyMany } from './queries';

export interface Ride {
  /** What the statement notifies: its own consumers and every one pending. */
  payloads: string[];
  /** The consumers that were pending when the ride began. */
  taken: string[];
}

export type RideEnd = 'carried' | 'nothing-inserted' | 'failed';

export class WakeupNotifier {
  private readonly pending = new Set<string>();
  private inFlight = false;
  private lastSend = 0;
  private timer: NodeJS.Timeout | null = null;
  private sending: Promise<void> | null = null;
  private closed = false;

  constructor(
    private readonly pool: Pool,
    private readonly channel: string,
    private readonly intervalMs = 2,
  ) {}

  /** A ride for a statement about to insert rows for `own`, when a send is due. */
  beginRide(own: readonly string[]): Ride | null {
    if (this.inFlight || this.closed || Date.now() - this.lastSend < this.intervalMs) return null;
    this.inFlight = true;
    const taken = [...this.pending];
    this.pending.clear();
    const payloads = [...new Set([...own, ...taken])];
    return { payloads, taken };
  }

  endRide(ride: Ride, how: RideEnd, own: readonly string[]): void {
    this.inFlight = false;
    if (how === 'carried') {
      this.lastSend = Date.now();
    } else {
      // Nothing inserted: only the consumers taken over still need a wake-up; a failure or
      // an unknown commit: every one.
      for (const key of ride.taken) this.pending.add(key);
      if (how === 'failed') for (const key of own) this.pending.add(key);
    }
    this.schedule();
  }

  /** Marks `key` for a wake-up, for rows that committed before the call. */
  notify(key: string): void {
    if (this.closed) return;
    this.pending.add(key);
    this.schedule();
  }

  /** Sends what is pending and stops; later marks are dropped. */
  async close(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.sending) await this.sending;
    if (this.pending.size > 0) await this.send();
    this.closed = true;
  }

  private schedule(): void {
    if (this.timer || this.sending || this.pending.size === 0) return;
    const wait = Math.max(0, this.lastSend + this.intervalMs - Date.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.inFlight) return; // the ride's end schedules again
      this.sending = this.send().finally(() => {
        this.sending = null;
        this.schedule();
      });
    }, wait);
    this.timer.unref();
  }

  private async send(): Promise<void> {
    const keys = [...this.pending];
    this.pending.clear();
    this.inFlight = true;
    try {
      await this.pool.query(kNotifyMany, [this.channel, keys]);
    } catch {
      // A hint only: workers poll. Nothing to retry here.
    } finally {
      this.inFlight = false;
      this.lastSend = Date.now();
    }
  }
}
