// Standard Webhooks signing (https://www.standardwebhooks.com), the sender's half of
// examples/webhook/signature.cpp: an HMAC-SHA256 over `{id}.{timestamp}.{body}` with the
// base64-decoded part of a `whsec_` secret, sent as `webhook-signature: v1,<base64>`.
import { createHmac } from 'node:crypto';

const kPrefix = 'whsec_';

/** The HMAC key of a `whsec_<base64>` secret. Throws naming what is wrong, never the secret. */
export function decodeSecret(secret) {
  if (typeof secret !== 'string' || !secret.startsWith(kPrefix)) {
    throw new Error('WEBHOOK_SECRET: expected whsec_<base64>');
  }
  const key = Buffer.from(secret.slice(kPrefix.length), 'base64');
  if (key.length === 0) throw new Error('WEBHOOK_SECRET: the key after whsec_ is empty or not base64');
  return key;
}

/** `v1,<base64 HMAC>` over exactly the bytes that will be sent. */
export function sign(key, id, timestamp, body) {
  const mac = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`, 'utf8').digest('base64');
  return `v1,${mac}`;
}
