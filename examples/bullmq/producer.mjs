// The producer side: enqueues events as BullMQ jobs whose jobId IS the event id, with the
// retry policy the worker relies on. Reads one event per line (JSON) from a file or stdin:
//
//   {"id":"evt-1001","type":"order.created","version":1,"data":{"orderId":"o-42","total":99.5}}
//
//   node producer.mjs events.jsonl        (or: ... | node producer.mjs)
//
//   REDIS_URL, BULLMQ_QUEUE    see config.mjs
//   BULLMQ_ATTEMPTS=12         tries per job before it lands in the failed set
//   BULLMQ_BACKOFF_MS=1000     exponential backoff base: up to 1 s, 2 s, 4 s, ... 17 min;
//                              12 attempts ride out a database outage of 17 to 34 minutes
//
// Prints `enqueued <id>` per event. While BullMQ still holds a job with that id (waiting,
// completed, failed, ...), it ignores the add; once the job is removed, the same id makes
// a new job, and Boxcar answers it `duplicate`.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

import { Queue } from 'bullmq';

import { connection, intFromEnv, queueName } from './config.mjs';

/** The options every job gets; exported for producers that import this module. */
export function jobOptions(eventId) {
  return {
    jobId: eventId,  // the stable identity: BullMQ's retries and Boxcar's webhook-id reuse it
    attempts: intFromEnv('BULLMQ_ATTEMPTS', 12),
    // jitter 0.5: each delay is drawn from [d/2, d], so the jobs an outage held back do
    // not all come back in the same instant.
    backoff: { type: 'exponential', delay: intFromEnv('BULLMQ_BACKOFF_MS', 1000), jitter: 0.5 },
    removeOnComplete: { age: 24 * 3600 },  // Boxcar holds the durable record from here on
    removeOnFail: false,  // the failed set is the dead-letter list: keep it for an operator
  };
}

/** One event per non-empty line; throws naming the line. */
export function parseEvents(text) {
  return text
    .split('\n')
    .map((line, index) => ({ line, number: index + 1 }))
    .filter(({ line }) => line.trim() !== '')
    .map(({ line, number }) => {
      let event;
      try {
        event = JSON.parse(line);
      } catch (error) {
        throw new Error(`line ${number}: ${error.message}`);
      }
      if (typeof event?.id !== 'string' || event.id === '') {
        throw new Error(`line ${number}: "id" must be a non-empty string`);
      }
      return event;
    });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {  // run, not imported
  const events = parseEvents(readFileSync(process.argv[2] ?? 0, 'utf8'));
  const queue = new Queue(queueName, { connection: connection() });
  for (const event of events) {
    await queue.add(event.type ?? 'event', event, jobOptions(event.id));
    console.log(`enqueued ${event.id}`);
  }
  await queue.close();
}
