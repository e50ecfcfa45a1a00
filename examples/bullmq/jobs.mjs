// Looks at jobs by id, for operators and for the integration test:
//
//   node jobs.mjs show <id>...     one JSON object: id -> {state, attemptsMade, result, failedReason}
//   node jobs.mjs failed           the failed set (the dead-letter list), the same shape
//   node jobs.mjs retry <id>...    moves failed jobs back to wait (after fixing the cause)
//   node jobs.mjs remove <id>...   removes jobs, so their ids can be enqueued again
//
//   REDIS_URL, BULLMQ_QUEUE    see config.mjs
import { Queue } from 'bullmq';

import { connection, queueName } from './config.mjs';

function describe(job, state) {
  return {
    state,
    attemptsMade: job.attemptsMade,
    result: job.returnvalue ?? null,
    failedReason: job.failedReason ?? null,
  };
}

const [command, ...ids] = process.argv.slice(2);
const queue = new Queue(queueName, { connection: connection() });
const out = {};
let status = 0;
try {
  if (command === 'show') {
    for (const id of ids) {
      // The state first: BullMQ writes a job's result in the same step that makes it
      // completed, so a job read after its state was 'completed' has its result. Read the
      // other way round, a job that completes in between shows completed without it.
      const state = await queue.getJobState(id);
      const job = await queue.getJob(id);
      out[id] = job ? describe(job, state) : { state: 'missing' };
    }
  } else if (command === 'failed') {
    for (const job of await queue.getFailed()) out[job.id] = describe(job, 'failed');
  } else if (command === 'retry' || command === 'remove') {
    for (const id of ids) {
      const job = await queue.getJob(id);
      if (!job) {
        out[id] = 'missing';
        status = 1;
      } else {
        await (command === 'retry' ? job.retry('failed') : job.remove());
        out[id] = command === 'retry' ? 'retried' : 'removed';
      }
    }
  } else {
    console.error('usage: node jobs.mjs show|retry|remove <id>... | node jobs.mjs failed');
    status = 2;
  }
} finally {
  await queue.close();
}
if (status !== 2) console.log(JSON.stringify(out));
process.exit(status);
