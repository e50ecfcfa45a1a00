// The BullMQ worker: completes a job only after Boxcar has durably accepted it. Each job
// is posted, signed, to the webhook ingress (examples/webhook); see deliver.mjs for how
// each answer maps to complete / retry / fail. See README.md.
//
//   REDIS_URL, BULLMQ_QUEUE                       see config.mjs
//   WEBHOOK_URL=http://127.0.0.1:8080/webhooks/orders/tenant-a   the tenant is the ingress's key id
//   WEBHOOK_SECRET=whsec_...                      (required) the key names the tenant
//   WORKER_CONCURRENCY=8                          jobs in flight at once
//   WEBHOOK_TIMEOUT_MS=10000                      per request; a timeout is retried
//
// Runs until SIGTERM or SIGINT, then lets in-flight jobs finish and exits 0.
import { Worker } from 'bullmq';

import { connection, intFromEnv, queueName } from './config.mjs';
import { deliver } from './deliver.mjs';
import { decodeSecret } from './signature.mjs';

const url = process.env.WEBHOOK_URL || 'http://127.0.0.1:8080/webhooks/orders/tenant-a';
let key;
let concurrency;
let timeoutMs;
try {
  key = decodeSecret(process.env.WEBHOOK_SECRET);
  concurrency = intFromEnv('WORKER_CONCURRENCY', 8);
  timeoutMs = intFromEnv('WEBHOOK_TIMEOUT_MS', 10_000);
} catch (error) {
  console.error(`bullmq worker: ${error.message}`);
  process.exit(2);
}

const log = (fields) => console.log(JSON.stringify({ at: new Date().toISOString(), ...fields }));

const worker = new Worker(queueName, (job) => deliver(job, { url, key, timeoutMs }), {
  connection: connection(),
  concurrency,
});

// Identities and outcomes only, never payloads or secrets.
// attemptsMade counts the attempt that just ended.
worker.on('completed', (job, answer) =>
  log({ job: job.id, outcome: 'completed', result: answer?.result, attempts: job.attemptsMade }));
worker.on('failed', (job, error) =>
  log({
    job: job?.id,
    outcome: job?.finishedOn ? 'failed' : 'retrying',  // only a final failure sets finishedOn
    attempts: job?.attemptsMade,
    reason: error.message,
  }));
worker.on('error', (error) => log({ outcome: 'error', reason: error.message }));
await worker.waitUntilReady();
log({ outcome: 'ready', queue: queueName, url, concurrency });

let stopping = false;
const stop = async (signal) => {
  if (stopping) return;
  stopping = true;
  log({ outcome: 'stopping', signal });
  await worker.close();  // waits for the jobs in flight: none is left half-done
  process.exit(0);
};
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
