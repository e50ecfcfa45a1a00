// Hands one BullMQ job to Boxcar's signed webhook ingress (examples/webhook) and turns the
// answer into what BullMQ does with the job:
//
//   202 accepted, 200 duplicate   return: the receipt is durable, BullMQ completes the job
//   other 4xx (400 invalid, 401, 409 IDENTITY_CONFLICT, 413, ...)
//                                 UnrecoverableError: a retry cannot succeed, so the job
//                                 goes straight to the failed set (the dead-letter list)
//   5xx (503 storage failure), 408, 429, timeouts, connection errors
//                                 Error: not (certainly) recorded; BullMQ retries the same
//                                 job id with backoff, and the retry is `accepted` if the
//                                 first attempt never landed, `duplicate` if it did
import { UnrecoverableError } from 'bullmq';

import { sign } from './signature.mjs';

/** Answers worth retrying although they are 4xx. */
const kTransient4xx = new Set([408, 429]);

/**
 * Posts `job` signed with `key` and returns the ingress's JSON answer on 202 or 200.
 * The webhook-id is the job id, which the producer set to its event id: stable across
 * BullMQ's retries and across a producer's redelivery, so Boxcar deduplicates them.
 * The timestamp is fresh on each attempt (it is signed, and must be within ±5 minutes).
 */
export async function deliver(job, { url, key, timeoutMs = 10_000, fetchImpl = fetch }) {
  const eventId = job.data?.id;
  if (typeof eventId !== 'string' || job.id !== eventId) {
    // Without jobId the id is BullMQ's per-queue counter: a redelivered event would get a
    // new id and become a second Boxcar identity. Refuse instead of guessing.
    throw new UnrecoverableError(`job ${job.id}: jobId must be the event id (data.id = ${JSON.stringify(eventId)})`);
  }
  const body = JSON.stringify(job.data);
  const timestamp = String(Math.floor(Date.now() / 1000));

  let response;
  try {
    response = await fetchImpl(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'webhook-id': eventId,
        'webhook-timestamp': timestamp,
        'webhook-signature': sign(key, eventId, timestamp, body),
      },
      body,
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error) {
    // Refused, reset or timed out: the request may or may not have been recorded. Retry.
    throw new Error(`ingress unreachable: ${error.cause?.code ?? error.name}: ${error.message}`);
  }
  const text = await response.text();
  if (response.status === 202 || response.status === 200) return JSON.parse(text);

  const reason = `ingress answered ${response.status}: ${text.slice(0, 500)}`;
  if (response.status >= 400 && response.status < 500 && !kTransient4xx.has(response.status)) {
    throw new UnrecoverableError(reason);
  }
  throw new Error(reason);
}
