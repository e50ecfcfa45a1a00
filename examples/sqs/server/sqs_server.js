#!/usr/bin/env node
// A local SQS-compatible server for the Boxcar SQS ingress example and its test:
// local-aws-sqs (pinned in package.json / package-lock.json; `npm ci` installs it).
//
//   node sqs_server.js [--host 127.0.0.1] [--port 0] [--port-file PATH]
//
// Port 0 picks a free port; the port actually bound is printed and, with --port-file,
// written to PATH (via a rename, so a reader never sees a partial file). It speaks both
// the AWS JSON 1.0 protocol (X-Amz-Target: AmazonSQS.<Action>) and the query protocol,
// and does not check request signatures. Queues live in memory only.
'use strict';

const fs = require('fs');
const { createSqsServer } = require('local-aws-sqs');

function option(name, fallback) {
  const index = process.argv.indexOf(`--${name}`);
  return index > 0 && index + 1 < process.argv.length ? process.argv[index + 1] : fallback;
}

const host = option('host', '127.0.0.1');
const port = Number(option('port', '0'));
const portFile = option('port-file', '');

createSqsServer({
  hostname: host,
  port,
  // Tests delete and recreate queues by name at once; AWS would make them wait 60 s.
  emulateQueueCreationLifecycle: false,
}).then((server) => {
  const bound = server.address().port;
  if (portFile) {
    fs.writeFileSync(`${portFile}.tmp`, `${bound}\n`);
    fs.renameSync(`${portFile}.tmp`, portFile);
  }
  console.log(`sqs server listening on http://${host}:${bound}`);
  const stop = () => server.close(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}, (error) => {
  console.error(`sqs server: ${error.message}`);
  process.exit(1);
});
