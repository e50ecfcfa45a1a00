// The producer side: enqueues events as BullMQ jobs whose jobId IS the event id, with the
// retry policy the worker relies on. Reads one event per line (JSON) from a file or stdin:
//
//   {"id":"evt-1001","type":"order.created","version":1,"data":{"orderId":"o-42","total":99.5}}
//
//   node producer.mjs events.jsonl        (or: ... | node producer.mjs)
//
//   REDIS_URL, BULLMQ_QUEUE    see config.mjs
//   BULLMQ_ATTEMPTS=8          tries per job before it lands in the failed set
//   BULLMQ_BACKOFF_MS=1000     exponential backoff base: 1 s, 2 s, 4 s, ...
//
// Prints `enqueued <id>` per event. While BullMQ still holds a job with that id (waiting,
// completed, failed, ...), it ignores the add; once the job is removed, the same id makes
// a new job, and Boxcar answers it `duplicate`.
import { readFileSync } from 'node:fs';

import { Queue } from 'bullmq';

import { connection, intFromEnv, queueName } from './config.mjs';

/** The options every job gets. Exported so tools and tests enqueue exactly like this. */
export function jobOptions(eventId) {
  return {
    jobId: eventId,  // the stable identity: BullMQ's retries and Boxcar's webhook-id reuse it
    attempts: intFromEnv('BULLMQ_ATTEMPTS', 8),
    backoff: { type: 'exponential', delay: intFromEnv('BULLMQ_BACKOFF_MS', 1000) },
    removeOnComplete: { age: 24 * 3600 },  // Boxcar holds the durable record from here on
    removeOnFail: false,  // the failed set is the dead-letter list: keep it for an operator
  };
}

export function parseEvents(text) {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line, index) => {
      const event = JSON.parse(line);
      if (typeof event.id !== 'string' || event.id === '') throw new Error(`line ${index + 1}: "id" must be a non-empty string`);
      return event;
    });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const events = parseEvents(readFileSync(process.argv[2] ?? 0, 'utf8'));
  const queue = new Queue(queueName, { connection: connection() });
  for (const event of events) {
    await queue.add(event.type ?? 'event', event, jobOptions(event.id));
    console.log(`enqueued ${event.id}`);
  }
  await queue.close();
}
