// A second, independent RFC 8785 (JCS) implementation for the differential fuzzer
// (jcs_differential_fuzzer.cpp): JSON.parse, then JSON.stringify for every scalar (ES
// Number::toString for numbers, RFC 8785's minimal string escaping) and object members
// sorted by the UTF-16 code units of their names (Array.prototype.sort's default order).
//
// Protocol, over stdin/stdout: each request line is "j" and the base64 of one JSON text
// (UTF-8, as Boxcar received it; the "j" keeps an empty text from reading as the end of a
// batch); an empty line ends a batch. For each request of the batch, in
// order, one response line: "ok <base64 of the canonical UTF-8>" or "err <reason>".
// Responses are written only at the end of a batch, so the writer never blocks on a full
// pipe while the reader is still writing.
import { createInterface } from 'node:readline';

function canonicalize(value) {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return '[' + value.map(canonicalize).join(',') + ']';
  return (
    '{' +
    Object.keys(value)
      .sort()
      .map((name) => JSON.stringify(name) + ':' + canonicalize(value[name]))
      .join(',') +
    '}'
  );
}

function answer(line) {
  try {
    let text = Buffer.from(line.slice(1), 'base64').toString('utf8');
    if (text.startsWith('\uFEFF')) text = text.slice(1); // as Boxcar: RFC 8259 §8.1 allows a BOM
    return 'ok ' + Buffer.from(canonicalize(JSON.parse(text)), 'utf8').toString('base64');
  } catch (e) {
    return 'err ' + String(e.message).replace(/[\r\n]/g, ' ');
  }
}

let pending = [];
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  if (line.length > 0) {
    pending.push(answer(line));
    return;
  }
  process.stdout.write(pending.map((response) => response + '\n').join(''));
  pending = [];
});
