// The errors of the Boxcar client, with the same stable codes as the C++ library
// (core/include/boxcar/core/error.hpp, inbox/include/boxcar/inbox/errors.hpp,
// outbox/include/boxcar/outbox/errors.hpp). Callers branch on `code`, never on messages.
//
//   BoxcarError
//   ├── JsonValueError              JSON_*              a value is not plain, fingerprintable JSON (path)
//   ├── InboxValidationError        INBOX_*, JSON_*     reject / dead-letter the delivery (field)
//   ├── InboxConflictError          IDENTITY_CONFLICT   reject / dead-letter: the identity was reused
//   ├── InboxStorageError           STORAGE_FAILURE,    do not acknowledge; redeliver the same identity
//   │                               STORAGE_UNCERTAIN
//   ├── OutboxValidationError       OUTBOX_*, JSON_*    the event can never be written (field)
//   └── OutboxPartitionMissingError OUTBOX_PARTITION_MISSING  roll back and retry later

export class BoxcarError extends Error {
  /** Stable, documented identifier of the failure (e.g. "IDENTITY_CONFLICT"). */
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.code = code;
    this.name = new.target.name;
  }
}

/** A JSON value cannot be canonicalised or fingerprinted exactly. `path` is an RFC 6901
 * JSON Pointer to the offending value ("" is the root). */
export class JsonValueError extends BoxcarError {
  readonly path: string;

  constructor(code: string, path: string, message: string) {
    super(code, `${message} at '${path}'`);
    this.path = path;
  }
}

/** The accept request is malformed. `field` names it as the C++ library does: "source",
 * "consumer", "message_id", "scope.id", "event_type", "schema_version",
 * "metadata/<pointer>", "metadata.headers/<name>", or "payload" followed by the JSON
 * Pointer of the offending value ("payload/items/3"). */
export class InboxValidationError extends BoxcarError {
  readonly field: string;

  constructor(code: string, field: string, message: string) {
    super(code, `${field}: ${message}`);
    this.field = field;
  }
}

/** The identity is already retained with a different fingerprint; the stored record is
 * unchanged. */
export class InboxConflictError extends BoxcarError {
  readonly existingId: string;

  constructor(existingId: string, message: string) {
    super('IDENTITY_CONFLICT', message);
    this.existingId = existingId;
  }
}

/** The database could not record the message. When `uncertain` the connection was lost
 * while the write may have committed: redeliver the same identity, and accept() answers
 * duplicate if it landed and accepted if it did not. */
export class InboxStorageError extends BoxcarError {
  readonly uncertain: boolean;
  /** The server's SQLSTATE when it sent one, else "". */
  readonly sqlstate: string;

  constructor(message: string, sqlstate: string, uncertain: boolean) {
    super(uncertain ? 'STORAGE_UNCERTAIN' : 'STORAGE_FAILURE', message);
    this.sqlstate = sqlstate;
    this.uncertain = uncertain;
  }
}

/** The event or its options are malformed; thrown by emit() before anything is written.
 * `field` names the input as the C++ emitter does: "event_type", "schema_version",
 * "topic", "scope.id", "key", "causation_id", "correlation_id", "traceparent",
 * "headers/<name>", or "payload" + JSON Pointer. */
export class OutboxValidationError extends BoxcarError {
  readonly field: string;

  constructor(code: string, field: string, message: string) {
    super(code, `${field}: ${message}`);
    this.field = field;
  }
}

/** No outbox partition covers the event's id (docs/schema.md, "Outbox partitions"). The
 * insert failed, so the caller's transaction is aborted: roll it back and retry later. */
export class OutboxPartitionMissingError extends BoxcarError {
  constructor(message: string) {
    super('OUTBOX_PARTITION_MISSING', message);
  }
}
