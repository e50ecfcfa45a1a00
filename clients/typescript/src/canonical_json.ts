// RFC 8785 (JSON Canonicalization Scheme) for JavaScript values, the strict parser of JSON
// text, and the content fingerprint: byte for byte what the C++ library computes
// (core/include/boxcar/core/canonical_json.hpp), proven by the shared vectors in
// conformance/. Every error names the JSON Pointer of the value it is about, and the
// first error is the one the C++ library reports for the same input.
//
// The number rule (docs/schema.md, "Payload JSON") is the C++ one: a number whose value is
// an integer beyond ±(2^53 − 1) and below 10^21 in magnitude is refused
// (JSON_INTEGER_OUT_OF_RANGE), however it is spelled. Canonical JSON prints such a number
// as plain digits, which 64-bit readers (PostgreSQL jsonb, C++, Python) take as an exact
// integer and JavaScript rounds: the same text, two values. Every other finite number is
// taken, printed as Number.prototype.toString prints it.
import { createHash } from 'node:crypto';
import { TextDecoder } from 'node:util';

import { JsonValueError } from './errors';

export interface CanonicalLimits {
  /** Deepest nesting of arrays/objects accepted; the root container is depth 1. */
  maxDepth: number;
  /** Largest canonical form accepted, in UTF-8 bytes. */
  maxBytes: number;
}

/** The C++ CanonicalLimits defaults: depth 64, 1 MiB. */
export const DEFAULT_CANONICAL_LIMITS: Readonly<CanonicalLimits> = Object.freeze({
  maxDepth: 64,
  maxBytes: 1024 * 1024,
});

/** Largest integer magnitude a JSON number carries exactly through a double: 2^53 − 1. */
export const MAX_SAFE_INTEGER = Number.MAX_SAFE_INTEGER;
/** Smallest magnitude RFC 8785 prints in exponent form ("1e+21"). */
export const MIN_EXPONENT_FORM_MAGNITUDE = 1e21;

function appendPointerToken(path: string, token: string): string {
  return `${path}/${token.replace(/~/g, '~0').replace(/\//g, '~1')}`;
}

/** True for a double whose canonical form would be an integer literal beyond ±(2^53 − 1). */
function isAmbiguousInteger(value: number): boolean {
  const magnitude = Math.abs(value);
  return magnitude > MAX_SAFE_INTEGER && magnitude < MIN_EXPONENT_FORM_MAGNITUDE;
}

/** The index of the first unpaired surrogate in `text` (which has no UTF-8 form), or -1. */
export function firstLoneSurrogate(text: string): number {
  for (let i = 0; i < text.length; ++i) {
    const unit = text.charCodeAt(i);
    if (unit < 0xd800 || unit > 0xdfff) continue;
    if (unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        ++i;
        continue;
      }
    }
    return i;
  }
  return -1;
}

/** True when `text` has a UTF-8 form (no unpaired surrogate): the JavaScript side of the
 * C++ is_valid_utf8. */
export function isWellFormed(text: string): boolean {
  return firstLoneSurrogate(text) < 0;
}

/** The length of well-formed `text` in UTF-8 bytes. */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; ++i) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) continue;
    if (unit < 0x800) {
      bytes += 1;
    } else if (unit >= 0xd800 && unit <= 0xdbff) {
      bytes += 2; // a pair: four bytes for two units
      ++i;
    } else {
      bytes += 2;
    }
  }
  return bytes;
}

const kEscapes: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\b': '\\b',
  '\t': '\\t',
  '\n': '\\n',
  '\f': '\\f',
  '\r': '\\r',
};

// What RFC 8785 escapes: the quote, the backslash and the controls below U+0020; U+007F,
// non-ASCII and U+2028/U+2029 stay raw.
// eslint-disable-next-line no-control-regex
const kNeedsEscape = /["\\\u0000-\u001f]/g;

function quoteString(text: string): string {
  return `"${text.replace(
    kNeedsEscape,
    (c) => kEscapes[c] ?? `\\u00${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  )}"`;
}

/** Where the writer is: one node per enclosing container. Only an error turns the chain
 * into a JSON Pointer. */
interface PathNode {
  parent: PathNode | null;
  name: string | null; // the member's name; null for an array element
  index: number;
}

function pointerOf(at: PathNode | null): string {
  const chain: PathNode[] = [];
  for (let node = at; node !== null; node = node.parent) chain.push(node);
  let path = '';
  for (let i = chain.length - 1; i >= 0; --i) {
    const node = chain[i];
    path = node.name !== null ? appendPointerToken(path, node.name) : `${path}/${node.index}`;
  }
  return path;
}

function isPlainObject(value: object): boolean {
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

function describe(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'bigint') return 'a bigint';
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return 'a symbol';
  const name = (value as object)?.constructor?.name;
  return name ? `an instance of ${name}` : 'an object that is not a plain object';
}

/** Serialises one value tree, mirroring the C++ CanonicalWriter step for step so the
 * first error found is the same one. */
class CanonicalWriter {
  private readonly parts: string[] = [];
  private bytes = 0;
  private readonly ancestors = new Set<object>();

  constructor(private readonly limits: CanonicalLimits) {}

  finish(value: unknown): string {
    this.writeValue(value, 0, null);
    return this.parts.join('');
  }

  private fail(at: PathNode | null, code: string, message: string): never {
    throw new JsonValueError(code, pointerOf(at), message);
  }

  private checkSize(at: PathNode | null): void {
    if (this.bytes > this.limits.maxBytes) {
      this.fail(at, 'JSON_TOO_LARGE', `canonical JSON exceeds ${this.limits.maxBytes} bytes`);
    }
  }

  /** `text` is ASCII, or its UTF-8 length is `bytes`. */
  private append(text: string, at: PathNode | null, bytes = text.length): void {
    this.parts.push(text);
    this.bytes += bytes;
    this.checkSize(at);
  }

  private writeValue(value: unknown, depth: number, at: PathNode | null): void {
    if (value === null) return this.append('null', at);
    switch (typeof value) {
      case 'boolean':
        return this.append(value ? 'true' : 'false', at);
      case 'number': {
        if (!Number.isFinite(value)) {
          this.fail(at, 'JSON_NON_FINITE_NUMBER', 'NaN and Infinity have no JSON representation');
        }
        const text = formatEsNumber(value);
        if (isAmbiguousInteger(value)) {
          this.fail(
            at,
            'JSON_INTEGER_OUT_OF_RANGE',
            `number ${text} is an integer beyond ±2^53-1 that not every reader holds exactly; send it as a string`,
          );
        }
        return this.append(text, at);
      }
      case 'string':
        return this.writeString(value, at);
      case 'object':
        break;
      default:
        this.fail(at, 'JSON_UNSUPPORTED_VALUE', `${describe(value)} has no JSON representation`);
    }
    const container = value as object;
    if (Array.isArray(container)) return this.writeContainer(container, depth + 1, at, true);
    if (!isPlainObject(container)) {
      this.fail(at, 'JSON_UNSUPPORTED_VALUE', `${describe(container)} is not a plain JSON value`);
    }
    if (Object.getOwnPropertySymbols(container).length > 0) {
      this.fail(at, 'JSON_UNSUPPORTED_VALUE', 'an object with symbol keys is not a plain JSON value');
    }
    return this.writeContainer(container, depth + 1, at, false);
  }

  private checkDepth(depth: number, at: PathNode | null): void {
    // Checked before descending, as in C++: maxDepth also bounds this writer's recursion.
    if (depth > this.limits.maxDepth) {
      this.fail(at, 'JSON_TOO_DEEP', `nesting exceeds ${this.limits.maxDepth} levels`);
    }
  }

  private writeContainer(container: object, depth: number, at: PathNode | null, isArray: boolean): void {
    this.checkDepth(depth, at);
    if (this.ancestors.has(container)) {
      this.fail(at, 'JSON_UNSUPPORTED_VALUE', 'a circular reference has no JSON representation');
    }
    this.ancestors.add(container);
    if (isArray) {
      this.writeArray(container as unknown[], depth, at);
    } else {
      this.writeObject(container as Record<string, unknown>, depth, at);
    }
    this.ancestors.delete(container);
  }

  private writeArray(array: unknown[], depth: number, at: PathNode | null): void {
    this.append('[', at);
    const element: PathNode = { parent: at, name: null, index: 0 };
    for (; element.index < array.length; ++element.index) {
      if (element.index !== 0) this.append(',', at);
      // A hole reads as undefined, which is refused like any undefined value.
      this.writeValue(array[element.index], depth, element);
    }
    this.append(']', at);
  }

  private writeObject(object: Record<string, unknown>, depth: number, at: PathNode | null): void {
    // Sorted by UTF-16 code units, RFC 8785's order, which is what the default sort does.
    const names = Object.keys(object).sort();
    // Names are checked before any member is written; a bad name is reported at the path of
    // its object, as in C++ (a pointer quoting it would carry it into logs).
    for (const name of names) {
      if (!isWellFormed(name)) this.fail(at, 'JSON_INVALID_UTF8', 'a member name is not valid UTF-8');
      if (name.includes('\u0000')) this.fail(at, 'JSON_NUL_CHARACTER', 'a member name contains U+0000');
    }
    this.append('{', at);
    let first = true;
    for (const name of names) {
      if (!first) this.append(',', at);
      first = false;
      const member: PathNode = { parent: at, name, index: 0 };
      this.writeString(name, member);
      this.append(':', at);
      this.writeValue(object[name], depth, member);
    }
    this.append('}', at);
  }

  private writeString(text: string, at: PathNode | null): void {
    if (!isWellFormed(text)) this.fail(at, 'JSON_INVALID_UTF8', 'string is not valid UTF-8');
    if (text.includes('\u0000')) this.fail(at, 'JSON_NUL_CHARACTER', 'string contains U+0000');
    const raw = utf8Length(text);
    // Escaping never shrinks text, so an oversized string is refused before copying.
    if (raw + 2 > this.limits.maxBytes || this.bytes > this.limits.maxBytes - raw - 2) {
      this.fail(at, 'JSON_TOO_LARGE', `canonical JSON exceeds ${this.limits.maxBytes} bytes`);
    }
    const quoted = quoteString(text);
    // Escapes are ASCII: the quoted form is the raw bytes plus what the escapes added.
    this.append(quoted, at, raw + quoted.length - text.length);
  }
}

function resolveLimits(limits?: Partial<CanonicalLimits>): CanonicalLimits {
  return { ...DEFAULT_CANONICAL_LIMITS, ...limits };
}

/**
 * The RFC 8785 canonical form of `value`: object members sorted by the UTF-16 code units
 * of their names, no insignificant whitespace, strings escaped minimally, numbers as
 * Number.prototype.toString prints them (-0 as 0).
 *
 * Only plain JSON values are taken: null, booleans, finite numbers, strings, arrays and
 * plain objects (prototype Object.prototype or null).
 * @throws JsonValueError naming the JSON Pointer of the first offending value:
 *   JSON_NON_FINITE_NUMBER, JSON_INTEGER_OUT_OF_RANGE (the number rule),
 *   JSON_UNSUPPORTED_VALUE (undefined, a bigint, a function, a symbol, a class instance
 *   such as a Date or a Map, an array hole, a circular reference), JSON_INVALID_UTF8 (an
 *   unpaired surrogate), JSON_NUL_CHARACTER, JSON_TOO_DEEP, JSON_TOO_LARGE. Nothing is
 *   ever truncated.
 */
export function canonicalize(value: unknown, limits?: Partial<CanonicalLimits>): string {
  return new CanonicalWriter(resolveLimits(limits)).finish(value);
}

/**
 * The RFC 8785 §3.2.2.3 text of a finite number (ECMAScript's Number::toString; -0 as
 * "0"). Serialisation only: no number rule.
 * @throws JsonValueError (JSON_NON_FINITE_NUMBER) for NaN and infinities.
 */
export function formatEsNumber(value: number): string {
  if (!Number.isFinite(value)) {
    throw new JsonValueError('JSON_NON_FINITE_NUMBER', '', 'NaN and Infinity have no JSON representation');
  }
  return Object.is(value, -0) ? '0' : String(value);
}

/** Lower-case hexadecimal SHA-256 of the UTF-8 bytes of `text` (or of `bytes`). */
export function sha256Hex(input: string | Uint8Array): string {
  return createHash('sha256').update(input).digest('hex');
}

/**
 * The content fingerprint of an inbox message or outbox event: SHA-256 (hex) of the
 * canonical form of {"eventType", "payload", "schemaVersion"}. `canonicalPayload` must
 * already be canonical (the output of canonicalize); it is not re-validated here.
 * @throws JsonValueError at path "/eventType" when eventType has an unpaired surrogate or
 *   contains U+0000.
 */
export function contentFingerprint(eventType: string, schemaVersion: number, canonicalPayload: string): string {
  if (!isWellFormed(eventType)) {
    throw new JsonValueError('JSON_INVALID_UTF8', '/eventType', 'string is not valid UTF-8');
  }
  if (eventType.includes('\u0000')) {
    throw new JsonValueError('JSON_NUL_CHARACTER', '/eventType', 'string contains U+0000');
  }
  // The members in canonical order, written directly (eventType < payload < schemaVersion).
  const text = `{"eventType":${quoteString(eventType)},"payload":${canonicalPayload},"schemaVersion":${formatEsNumber(
    schemaVersion,
  )}}`;
  return sha256Hex(text);
}

// ------------------------------------------------------------------------------------
// Strict parsing of JSON text: what the C++ canonicalize_text() does, with the same errors
// at the same paths (its StrictDomBuilder over nlohmann's parser).

const kWhitespace = new Set([0x20, 0x09, 0x0a, 0x0d]);

class ParseFailure {
  constructor(readonly code: string, readonly message: string) {}
}

interface Frame {
  isArray: boolean;
  container: Record<string, unknown> | unknown[];
  path: string; // the container's own pointer
  nextIndex: number;
  pendingMember: string | null; // the pointer of the member whose name was read
  names: Set<string>;
}

/**
 * A recursive-descent parser over a string that fails exactly where nlohmann's parser
 * fails, and reports the path the C++ StrictDomBuilder reports for that moment: the value
 * being read (an array's next element, or the member whose name was read), else the
 * enclosing container; "" at the root. `end` is where the text stops being valid UTF-8
 * (its length when it is valid): reading there fails like any invalid byte.
 */
class StrictParser {
  private pos = 0;
  private readonly frames: Frame[] = [];

  constructor(private readonly text: string, private readonly end: number, private readonly maxDepth: number) {}

  /** The path an error at this moment is reported at. */
  errorPath(): string {
    const frame = this.frames[this.frames.length - 1];
    if (frame === undefined) return '';
    if (frame.isArray) return `${frame.path}/${frame.nextIndex}`;
    return frame.pendingMember ?? frame.path;
  }

  parseDocument(): unknown {
    this.skipWhitespace();
    const root = this.parseValue('');
    this.skipWhitespace();
    if (this.pos < this.text.length) this.syntax('unexpected text after the root value');
    return root;
  }

  private syntax(message: string): never {
    throw new ParseFailure('JSON_PARSE_ERROR', `malformed JSON near byte ${this.pos}: ${message}`);
  }

  private peek(): number {
    // Past `end` the text is not UTF-8: nothing there is a token.
    return this.pos < this.end ? this.text.charCodeAt(this.pos) : -1;
  }

  private skipWhitespace(): void {
    while (this.pos < this.end && kWhitespace.has(this.text.charCodeAt(this.pos))) ++this.pos;
  }

  /** Reads one value whose pointer is `path` (computed by the caller's frame). */
  private parseValue(path: string): unknown {
    const c = this.peek();
    if (c === 0x7b /* { */) return this.parseObject(path);
    if (c === 0x5b /* [ */) return this.parseArray(path);
    if (c === 0x22 /* " */) return this.parseString();
    if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) return this.parseNumber();
    if (this.text.startsWith('true', this.pos) && this.pos + 4 <= this.end) {
      this.pos += 4;
      return true;
    }
    if (this.text.startsWith('false', this.pos) && this.pos + 5 <= this.end) {
      this.pos += 5;
      return false;
    }
    if (this.text.startsWith('null', this.pos) && this.pos + 4 <= this.end) {
      this.pos += 4;
      return null;
    }
    return this.syntax(c < 0 ? 'unexpected end of input' : 'invalid literal');
  }

  private openFrame(isArray: boolean, path: string): Frame {
    const frame: Frame = {
      isArray,
      container: isArray ? [] : (Object.create(null) as Record<string, unknown>),
      path,
      nextIndex: 0,
      pendingMember: null,
      names: new Set(),
    };
    // The container is in place (its path is where errors point) before the depth check.
    if (this.frames.length + 1 > this.maxDepth) {
      throw new JsonValueError('JSON_TOO_DEEP', path, `nesting exceeds ${this.maxDepth} levels`);
    }
    this.frames.push(frame);
    ++this.pos;
    return frame;
  }

  private parseArray(path: string): unknown[] {
    const frame = this.openFrame(true, path);
    const array = frame.container as unknown[];
    this.skipWhitespace();
    if (this.peek() === 0x5d /* ] */) {
      ++this.pos;
      this.frames.pop();
      return array;
    }
    for (;;) {
      this.skipWhitespace();
      const value = this.parseValue(`${path}/${frame.nextIndex}`);
      array.push(value);
      ++frame.nextIndex;
      this.skipWhitespace();
      const c = this.peek();
      if (c === 0x2c /* , */) {
        ++this.pos;
        continue;
      }
      if (c === 0x5d /* ] */) {
        ++this.pos;
        this.frames.pop();
        return array;
      }
      this.syntax("expected ',' or ']'");
    }
  }

  private parseObject(path: string): Record<string, unknown> {
    const frame = this.openFrame(false, path);
    const object = frame.container as Record<string, unknown>;
    this.skipWhitespace();
    if (this.peek() === 0x7d /* } */) {
      ++this.pos;
      this.frames.pop();
      return object;
    }
    for (;;) {
      this.skipWhitespace();
      if (this.peek() !== 0x22) this.syntax('expected a member name');
      const name = this.parseString();
      const memberPath = appendPointerToken(path, name);
      frame.pendingMember = memberPath;
      if (frame.names.has(name)) {
        throw new JsonValueError('JSON_DUPLICATE_KEY', memberPath, 'duplicate member name');
      }
      frame.names.add(name);
      this.skipWhitespace();
      if (this.peek() !== 0x3a /* : */) this.syntax("expected ':'");
      ++this.pos;
      this.skipWhitespace();
      object[name] = this.parseValue(memberPath);
      frame.pendingMember = null;
      this.skipWhitespace();
      const c = this.peek();
      if (c === 0x2c /* , */) {
        ++this.pos;
        continue;
      }
      if (c === 0x7d /* } */) {
        ++this.pos;
        this.frames.pop();
        return object;
      }
      this.syntax("expected ',' or '}'");
    }
  }

  private hex4(): number {
    let value = 0;
    for (let k = 0; k < 4; ++k) {
      const c = this.peek();
      let digit: number;
      if (c >= 0x30 && c <= 0x39) digit = c - 0x30;
      else if (c >= 0x41 && c <= 0x46) digit = c - 0x37;
      else if (c >= 0x61 && c <= 0x66) digit = c - 0x57;
      else return this.syntax("'\\u' must be followed by 4 hex digits");
      value = value * 16 + digit;
      ++this.pos;
    }
    return value;
  }

  private parseString(): string {
    ++this.pos; // the opening quote
    let out = '';
    let run = this.pos;
    for (;;) {
      const c = this.peek();
      if (c < 0) return this.syntax('unterminated string');
      if (c === 0x22) {
        out += this.text.slice(run, this.pos);
        ++this.pos;
        return out;
      }
      if (c < 0x20) return this.syntax('control character in a string must be escaped');
      if (c !== 0x5c /* \ */) {
        ++this.pos;
        continue;
      }
      out += this.text.slice(run, this.pos);
      ++this.pos;
      const e = this.peek();
      ++this.pos;
      switch (e) {
        case 0x22:
          out += '"';
          break;
        case 0x5c:
          out += '\\';
          break;
        case 0x2f:
          out += '/';
          break;
        case 0x62:
          out += '\b';
          break;
        case 0x66:
          out += '\f';
          break;
        case 0x6e:
          out += '\n';
          break;
        case 0x72:
          out += '\r';
          break;
        case 0x74:
          out += '\t';
          break;
        case 0x75: {
          const unit = this.hex4();
          if (unit >= 0xdc00 && unit <= 0xdfff) this.syntax('a low surrogate must follow a high surrogate');
          if (unit >= 0xd800 && unit <= 0xdbff) {
            if (this.peek() !== 0x5c || this.text.charCodeAt(this.pos + 1) !== 0x75 || this.pos + 1 >= this.end) {
              this.syntax('a high surrogate must be followed by a low surrogate');
            }
            this.pos += 2;
            const low = this.hex4();
            if (low < 0xdc00 || low > 0xdfff) this.syntax('a high surrogate must be followed by a low surrogate');
            out += String.fromCharCode(unit, low);
          } else {
            out += String.fromCharCode(unit);
          }
          break;
        }
        default:
          --this.pos;
          return this.syntax('invalid escape');
      }
      run = this.pos;
    }
  }

  private digits(): number {
    const start = this.pos;
    while (this.pos < this.end) {
      const c = this.text.charCodeAt(this.pos);
      if (c < 0x30 || c > 0x39) break;
      ++this.pos;
    }
    return this.pos - start;
  }

  /** RFC 8259's grammar; the literal means its nearest double, as in JSON.parse. */
  private parseNumber(): number {
    const start = this.pos;
    if (this.peek() === 0x2d) ++this.pos;
    const c = this.peek();
    if (c === 0x30) {
      ++this.pos;
    } else if (c >= 0x31 && c <= 0x39) {
      this.digits();
    } else {
      this.syntax('a number needs a digit');
    }
    if (this.peek() === 0x2e /* . */) {
      ++this.pos;
      if (this.digits() === 0) this.syntax('a fraction needs a digit');
    }
    const e = this.peek();
    if (e === 0x65 || e === 0x45) {
      ++this.pos;
      const sign = this.peek();
      if (sign === 0x2b || sign === 0x2d) ++this.pos;
      if (this.digits() === 0) this.syntax('an exponent needs a digit');
    }
    const value = Number(this.text.slice(start, this.pos));
    if (!Number.isFinite(value)) {
      throw new ParseFailure('JSON_NON_FINITE_NUMBER', 'number literal overflows a double');
    }
    return value;
  }
}

/**
 * Parses JSON text strictly and returns its canonical form, as the C++ canonicalize_text
 * does: duplicate member names are JSON_DUPLICATE_KEY, malformed text JSON_PARSE_ERROR,
 * text that is not UTF-8 (bytes that do not decode, or a string with an unpaired
 * surrogate) JSON_INVALID_UTF8, a literal beyond the double range (1e400)
 * JSON_NON_FINITE_NUMBER, nesting beyond limits.maxDepth JSON_TOO_DEEP while parsing; then
 * canonicalize()'s rules on the value. A leading byte order mark is ignored. The whole
 * text is parsed before limits.maxBytes applies: bound the input size upstream.
 */
export function canonicalizeText(text: string | Uint8Array, limits?: Partial<CanonicalLimits>): string {
  return canonicalize(parseStrict(text, limits), limits);
}

/** The value of JSON text under canonicalizeText()'s parsing rules (objects have a null
 * prototype, so a "__proto__" member is a member like any other). */
export function parseStrict(text: string | Uint8Array, limits?: Partial<CanonicalLimits>): unknown {
  const resolved = resolveLimits(limits);
  let source: string;
  let end: number;
  let valid: boolean;
  if (typeof text === 'string') {
    source = text;
    const lone = firstLoneSurrogate(text);
    valid = lone < 0;
    end = valid ? text.length : lone;
  } else {
    const bad = firstInvalidUtf8(text);
    valid = bad < 0;
    source = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true }).decode(valid ? text : text.subarray(0, bad));
    end = source.length;
    if (!valid) source += '\ufffd'; // stands for the undecodable rest, never read
  }
  // A raw NUL is never JSON text, and nothing after it may be ignored.
  const nul = typeof text === 'string' ? text.indexOf('\u0000') : text.indexOf(0);
  if (nul >= 0) {
    if (!valid) throw new JsonValueError('JSON_INVALID_UTF8', '', 'JSON text is not valid UTF-8');
    throw new JsonValueError('JSON_PARSE_ERROR', '', `malformed JSON near byte ${nul}: a NUL byte is not JSON text`);
  }
  let start = 0;
  if (end > 0 && source.charCodeAt(0) === 0xfeff) start = 1;
  const parser = new StrictParser(source.slice(start), end - start, resolved.maxDepth);
  try {
    return parser.parseDocument();
  } catch (e) {
    if (!(e instanceof ParseFailure)) throw e;
    const path = parser.errorPath();
    if (e.code === 'JSON_NON_FINITE_NUMBER') throw new JsonValueError(e.code, path, e.message);
    if (!valid) throw new JsonValueError('JSON_INVALID_UTF8', path, 'JSON text is not valid UTF-8');
    throw new JsonValueError(e.code, path, e.message);
  }
}

/** The offset of the first byte of `bytes` that is not part of well-formed UTF-8, or -1. */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    let length: number;
    let min: number;
    let cp: number;
    if (lead >= 0xc2 && lead <= 0xdf) {
      length = 2;
      min = 0x80;
      cp = lead & 0x1f;
    } else if (lead >= 0xe0 && lead <= 0xef) {
      length = 3;
      min = 0x800;
      cp = lead & 0x0f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      length = 4;
      min = 0x10000;
      cp = lead & 0x07;
    } else {
      return i;
    }
    if (i + length > bytes.length) return i;
    for (let k = 1; k < length; ++k) {
      const next = bytes[i + k];
      if ((next & 0xc0) !== 0x80) return i;
      cp = (cp << 6) | (next & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += length;
  }
  return -1;
}
