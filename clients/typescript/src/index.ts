// Boxcar's TypeScript client: accept into the inbox, emit into the outbox, read status.
// No worker: receipts are processed by a Boxcar worker in C++ (README.md).
export * from './errors';
export {
  CanonicalLimits,
  DEFAULT_CANONICAL_LIMITS,
  MAX_SAFE_INTEGER,
  canonicalize,
  canonicalizeText,
  contentFingerprint,
  formatEsNumber,
  parseStrict,
  sha256Hex,
} from './canonical_json';
export { Scope } from './scope';
export {
  AcceptRequest,
  Metadata,
  OrderingKeySource,
  OrderingRule,
  PreparedRequest,
  MAX_IDENTITY_BYTES,
  DEFAULT_MAX_STATEMENT_BYTES,
} from './accept_request';
export { Inbox, InboxOptions, Receipt, ReceiptStatus, AcceptResult } from './inbox';
export {
  OutboxEmitter,
  OutboxOptions,
  OutboxMessage,
  EmitOptions,
  EmittedEvent,
  RESERVED_HEADERS,
  DEFAULT_MAX_RECORD_BYTES,
} from './outbox';
export { status, StatusOptions, StatusDocument, XminHolder, STATUS_FORMAT_VERSION } from './status';
export { uuidV7, isUuidV7 } from './uuid';
