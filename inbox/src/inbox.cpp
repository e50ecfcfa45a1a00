// accept() and accept_many(): durable, deduplicated recording of incoming messages.
#include <pqxx/pqxx>

#include "boxcar/inbox/inbox.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/detail/async_notifier.hpp"
#include "boxcar/core/detail/pg_array.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/core/tx.hpp"
#include "boxcar/core/detail/with_schema.hpp"
#include "accept_coalescer.hpp"
#include "inbox_queries.hpp"
#include "prepared_request.hpp"

namespace boxcar {
namespace {

InboxStorageError storage_error(std::exception_ptr error, std::string_view doing, bool commit_in_flight) {
  const DatabaseError e = detail::to_database_error(std::move(error), doing, commit_in_flight);
  return InboxStorageError(e.what(), e.sqlstate(), e.uncertain());
}

InboxConflictError conflict_error(const detail::PreparedRequest& p, std::int64_t existing_id) {
  return InboxConflictError(existing_id, "identity (" + p.scope_kind + (p.scope_id.empty() ? "" : ":" + p.scope_id) +
                                             ", " + p.source + ", " + p.consumer + ", " + p.message_id +
                                             ") is already retained as receipt " + std::to_string(existing_id) +
                                             " with different content; the stored record is unchanged");
}

// A storage attempt that should simply run again: a concurrent batch deadlocked with
// ours, or a retained row vanished between insert and lookup (purge).
struct RetryBatch {};
constexpr int kMaxRounds = 3;

// SQLSTATE program_limit_exceeded: what pg_notify raises when the notification queue is
// full (a listener that stopped reading holds it).
constexpr std::string_view kNotifyQueueFull = "54000";

// Whether a failed write that carried a wake-up runs again without NOTIFY: it failed on a
// full notification queue, so it recorded nothing (a statement fails whole, a transaction
// rolls back whole), and the write must not fail with its wake-up. The ride's keys are
// pending again once it ends, for the notifier's own connection.
bool again_without_notify(const DatabaseError& e, bool riding, int round, std::string_view doing) {
  if (!riding || e.sqlstate() != kNotifyQueueFull || round >= kMaxRounds) return false;
  spdlog::warn("{}: NOTIFY failed ({}), recording without it: {}", doing, e.sqlstate(), e.what());
  return true;
}

using RideEnd = detail::AsyncNotifier::RideEnd;

// A wake-up riding on the accept path's statements (detail::AsyncNotifier::begin_ride):
// taken when one is due, ended exactly once: Carried only when a statement that notified
// is known to have committed, Failed when it ends unended (an exception). In a
// transaction a riding statement that inserted queues its NOTIFY (queue()), which the
// COMMIT sends (committed()); an autocommit statement's commits at once.
class RideTicket {
 public:
  RideTicket(detail::AsyncNotifier* notifier, std::span<const std::string> consumers) : notifier_(notifier) {
    if (!notifier_) return;
    ride_ = notifier_->begin_ride(consumers);
    if (!ride_) return;
    detail::PgArrayBuilder array;
    for (const auto& payload : ride_->payloads) array.add(std::string_view(payload));
    payloads_ = std::move(array).finish();
  }
  RideTicket(const RideTicket&) = delete;
  RideTicket& operator=(const RideTicket&) = delete;
  ~RideTicket() { end(detail::AsyncNotifier::RideEnd::Failed); }

  bool active() const { return ride_.has_value(); }
  /// kRideColumn's $14.
  const std::string& payloads() const { return payloads_; }
  /// A riding statement inserted a row: its NOTIFY goes out when its transaction commits.
  void queue() {
    if (ride_) queued_ = true;
  }
  /// The transaction of a queued NOTIFY committed: the ride carried the wake-up.
  void committed() {
    if (queued_) end(RideEnd::Carried);
  }
  /// Whether the ride ended Carried: every consumer it names was woken after the commit.
  bool carried() const { return carried_; }
  void end(detail::AsyncNotifier::RideEnd how) {
    if (!ride_) return;
    notifier_->end_ride(std::move(*ride_), how);
    ride_.reset();
    queued_ = false;
    carried_ = how == RideEnd::Carried;
  }

 private:
  detail::AsyncNotifier* notifier_;
  std::optional<detail::AsyncNotifier::Ride> ride_;
  std::string payloads_;
  bool queued_ = false;
  bool carried_ = false;
};

// accept_many's statements on one pooled connection in autocommit, for a batch that is a
// single statement. `committing` turns true before each statement: once one has run, the
// batch may be recorded whatever happens to the connection after it.
struct AutocommitStatements {
  PooledConnection connection;
  bool& committing;
  template <typename... Args>
  pqxx::result exec_prepared(const std::string& name, const std::string& sql, Args&&... args) {
    pqxx::nontransaction statement(*connection);
    committing = true;
    return connection.exec_named(statement, name, sql, std::forward<Args>(args)...);
  }
};

// The row an identity of the batch ended up with.
struct Stored {
  std::int64_t id;
  ReceiptStatus status;
  /// The stored row's fingerprint, read by kLookupMany; empty for a row this batch
  /// inserted, whose fingerprint is its leader's.
  std::string looked_up_fingerprint;
  bool inserted;
};

// The identity of a prepared item, in PreparedRequest::identity_key()'s order: comparing
// these tuples orders items as their keys do, without a string built per item.
auto identity_of(const detail::PreparedRequest& p) {
  return std::tie(p.consumer, p.source, p.scope_kind, p.scope_id, p.message_id);
}

// kInsertMany's RETURNING list, by position.
enum InsertedColumn : int { kId, kStatus, kScopeKind, kScopeId, kSource, kConsumer, kMessageId };

// One per item of a batch, in input order; null for an item that failed validation.
using PreparedBatch = std::vector<const detail::PreparedRequest*>;

// One statement's share of a batch: the input indexes of its leaders in insertion order
// (array position n is leaders[n - 1]) and their twelve column arrays, kInsertMany's $1..$12.
struct BatchSlice {
  std::vector<std::size_t> leaders;
  std::size_t bytes = 0;
  std::array<std::string, 12> columns;

  // kInsertMany's $8 and $9 (array positions 7 and 8): JSON arrays, the canonical texts
  // joined, which need no escaping; every other column is an array literal.
  static constexpr std::size_t kPayloads = 7, kMetadata = 8;
  static constexpr bool is_json_column(std::size_t c) { return c == kPayloads || c == kMetadata; }

  void build_columns(const PreparedBatch& prepared) {
    std::array<detail::PgArrayBuilder, 12> arrays;  // the JSON columns' two stay unused
    const auto text_of = [](const detail::PreparedRequest& p) {
      return std::array<const std::string*, 6>{&p.scope_kind, &p.scope_id,   &p.source,
                                               &p.consumer,   &p.message_id, &p.event_type};
    };
    // Room for each column up front, without a pass over every byte to count escapes
    // (identities rarely hold a quote); a literal that needs more grows once.
    std::array<std::size_t, 12> sizes{};
    sizes.fill(2);
    for (const std::size_t i : leaders) {
      const auto& p = *prepared[i];
      const auto fields = text_of(p);
      for (std::size_t c = 0; c < fields.size(); ++c) sizes[c] += fields[c]->size() + 3;
      sizes[6] += 12;
      sizes[kPayloads] += p.canonical_payload.size() + 1;
      sizes[kMetadata] += p.metadata_json.size() + 1;
      sizes[9] += p.fingerprint.size() + 3;
      sizes[10] += p.ordering_key ? p.ordering_key->size() + 3 : 5;
      sizes[11] += 12;
    }
    for (std::size_t c = 0; c < columns.size(); ++c) {
      if (is_json_column(c)) {
        columns[c].reserve(sizes[c]);
        columns[c] = "[";
      } else {
        arrays[c].reserve(sizes[c]);
      }
    }
    const auto append_json = [](std::string& array, const std::string& element) {
      if (array.size() > 1) array += ',';
      array += element;
    };
    for (const std::size_t i : leaders) {
      const auto& p = *prepared[i];
      const auto fields = text_of(p);
      for (std::size_t c = 0; c < fields.size(); ++c) arrays[c].add(std::string_view(*fields[c]));
      arrays[6].add(std::int64_t{p.schema_version});
      append_json(columns[kPayloads], p.canonical_payload);
      append_json(columns[kMetadata], p.metadata_json);
      arrays[9].add(std::string_view(p.fingerprint));
      if (p.ordering_key)
        arrays[10].add(std::string_view(*p.ordering_key));
      else
        arrays[10].add_null();
      if (p.park_after)
        arrays[11].add(std::int64_t{*p.park_after});
      else
        arrays[11].add_null();
    }
    for (std::size_t c = 0; c < columns.size(); ++c) {
      if (is_json_column(c))
        columns[c] += ']';
      else
        columns[c] = std::move(arrays[c]).finish();
    }
  }
};

// The order a batch's leaders are inserted in: by identity, so concurrent batches take
// their locks in one order; the items of a consumer that orders by key go last, by
// (consumer, scope kind, scope id, key) as bytes, each key's in input order, which becomes
// their order within the key (0012's trigger numbers a key's receipts as they are
// inserted) and keeps concurrent batches locking keys in one order too: the order in which
// a batch's completion locks them (inbox_settle_keys, migration 0034).
std::vector<std::size_t> insertion_order(std::vector<std::size_t> order, const PreparedBatch& prepared) {
  const auto keyed = [&](std::size_t i) { return prepared[i]->ordering_key.has_value(); };
  if (std::none_of(order.begin(), order.end(), keyed)) return order;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& pa = *prepared[a];
    const auto& pb = *prepared[b];
    if (pa.ordering_key.has_value() != pb.ordering_key.has_value()) return !pa.ordering_key.has_value();
    if (!pa.ordering_key) return false;
    return std::tie(pa.consumer, pa.scope_kind, pa.scope_id, *pa.ordering_key, a) <
           std::tie(pb.consumer, pb.scope_kind, pb.scope_id, *pb.ordering_key, b);
  });
  return order;
}

// kLookupMany's $1..$5: the identities of `indexes`, array position n is indexes[n - 1].
std::array<std::string, 5> identity_columns(const std::vector<std::size_t>& indexes, const PreparedBatch& prepared) {
  std::array<detail::PgArrayBuilder, 5> arrays;
  for (const std::size_t i : indexes) {
    const auto& p = *prepared[i];
    arrays[0].add(std::string_view(p.scope_kind));
    arrays[1].add(std::string_view(p.scope_id));
    arrays[2].add(std::string_view(p.source));
    arrays[3].add(std::string_view(p.consumer));
    arrays[4].add(std::string_view(p.message_id));
  }
  std::array<std::string, 5> columns;
  for (std::size_t c = 0; c < columns.size(); ++c) columns[c] = std::move(arrays[c]).finish();
  return columns;
}

// Whether a row kInsertMany returned is the identity of `p`. `one_stream`: every item of
// the batch has the same consumer, source and scope, so the message id alone tells.
bool is_identity_of(const pqxx::row& row, const detail::PreparedRequest& p, bool one_stream) {
  const auto text = [&](InsertedColumn column) {
    const pqxx::field field = row[column];
    return std::string_view(field.c_str(), field.size());
  };
  return text(kMessageId) == p.message_id &&
         (one_stream || (text(kConsumer) == p.consumer && text(kSource) == p.source &&
                         text(kScopeKind) == p.scope_kind && text(kScopeId) == p.scope_id));
}

// The leader a row kInsertMany returned is. The insert takes its rows in position order
// and returns each as it inserts it, so the rows are a subsequence of `order`: a walk
// on from `next` finds each one. A search of the whole statement stands behind the walk.
std::size_t returned_leader(const pqxx::row& row, const std::vector<std::size_t>& order, std::size_t& next,
                            const PreparedBatch& prepared, bool one_stream) {
  for (std::size_t k = next; k < order.size(); ++k) {
    if (!is_identity_of(row, *prepared[order[k]], one_stream)) continue;
    next = k + 1;
    return order[k];
  }
  for (const std::size_t i : order)
    if (is_identity_of(row, *prepared[i], one_stream)) return i;
  throw std::logic_error("accept_many: the insert returned an identity its statement did not carry");
}

// What accept_prepared does with a batch, fixed before its first statement: which item
// inserts each identity, the statements that insert them, and whom a wake-up names. What
// it looks up follows from each insert: the slice's leaders it did not return.
struct BatchPlan {
  /// Every valid item has the same consumer, source and scope, so the message id alone
  /// tells identities apart: most batches come from one source for one consumer in one scope.
  bool one_stream = true;
  /// By input index of a valid item: its identity's leader, the first of the identity's
  /// items in input order and the one that inserts it.
  std::vector<std::size_t> leader_of;
  /// One per identity, in identity order.
  std::vector<std::size_t> leaders;
  /// The insert statements in insertion_order(), each of at most max_statement_bytes
  /// (every item fits one alone: prepare_request refused the others). They run in order in
  /// one transaction, so the batch stays all-or-nothing and the lock order holds across them.
  std::vector<BatchSlice> slices;
  /// The consumers a wake-up riding on the batch names (AsyncNotifier::begin_ride).
  std::vector<std::string> consumers;

  /// One statement is atomic on its own: autocommit saves the BEGIN and COMMIT round trips
  /// (the lookup of identities already stored, when there are any, is a statement of its
  /// own in either mode). This is group commit's common case.
  bool autocommit() const { return slices.size() == 1; }
};

bool is_one_stream(const std::vector<std::size_t>& items, const PreparedBatch& prepared) {
  return items.empty() || std::all_of(items.begin(), items.end(), [&](std::size_t i) {
           const auto& a = *prepared[i];
           const auto& b = *prepared[items.front()];
           return a.consumer == b.consumer && a.source == b.source && a.scope_kind == b.scope_kind &&
                  a.scope_id == b.scope_id;
         });
}

// The input indexes of the valid items (an invalid item's error is already in its result).
std::vector<std::size_t> valid_items(const PreparedBatch& prepared) {
  std::vector<std::size_t> items;
  for (std::size_t i = 0; i < prepared.size(); ++i)
    if (prepared[i]) items.push_back(i);
  return items;
}

// Orders items by identity, each identity's in input order (stable). In one stream,
// comparing the message id alone gives the same order.
void sort_by_identity(std::vector<std::size_t>& items, const PreparedBatch& prepared, bool one_stream) {
  if (one_stream)
    std::stable_sort(items.begin(), items.end(),
                     [&](std::size_t a, std::size_t b) { return prepared[a]->message_id < prepared[b]->message_id; });
  else
    std::stable_sort(items.begin(), items.end(), [&](std::size_t a, std::size_t b) {
      return identity_of(*prepared[a]) < identity_of(*prepared[b]);
    });
}

// Fills plan.leader_of and plan.leaders from the valid items sorted by identity.
void elect_leaders(BatchPlan& plan, const std::vector<std::size_t>& by_identity, const PreparedBatch& prepared) {
  plan.leader_of.resize(prepared.size());
  for (std::size_t k = 0; k < by_identity.size(); ++k) {
    const std::size_t i = by_identity[k];
    if (k > 0 && identity_of(*prepared[by_identity[k - 1]]) == identity_of(*prepared[i])) {
      plan.leader_of[i] = plan.leader_of[by_identity[k - 1]];
    } else {
      plan.leader_of[i] = i;
      plan.leaders.push_back(i);
    }
  }
}

// The leaders in insertion_order(), cut into statements of at most max_statement_bytes,
// each with its column arrays built.
std::vector<BatchSlice> slice_statements(const std::vector<std::size_t>& leaders, const PreparedBatch& prepared,
                                         std::size_t max_statement_bytes) {
  std::vector<BatchSlice> slices;
  for (const std::size_t i : insertion_order(leaders, prepared)) {
    const std::size_t bytes = prepared[i]->batch_bytes;
    if (slices.empty() || slices.back().bytes + bytes > max_statement_bytes) slices.emplace_back();
    slices.back().leaders.push_back(i);
    slices.back().bytes += bytes;
  }
  for (auto& slice : slices) slice.build_columns(prepared);
  return slices;
}

// The leaders' consumers, each once, in leader order.
std::vector<std::string> ride_consumers(const std::vector<std::size_t>& leaders, const PreparedBatch& prepared) {
  std::vector<std::string> consumers;
  for (const std::size_t i : leaders)
    if (std::find(consumers.begin(), consumers.end(), prepared[i]->consumer) == consumers.end())
      consumers.push_back(prepared[i]->consumer);
  return consumers;
}

// A batch with no valid item plans no statement.
BatchPlan plan_batch(const PreparedBatch& prepared, std::size_t max_statement_bytes) {
  BatchPlan plan;
  std::vector<std::size_t> by_identity = valid_items(prepared);
  plan.one_stream = is_one_stream(by_identity, prepared);
  sort_by_identity(by_identity, prepared, plan.one_stream);
  elect_leaders(plan, by_identity, prepared);
  if (plan.leaders.empty()) return plan;
  plan.slices = slice_statements(plan.leaders, prepared, max_statement_bytes);
  plan.consumers = ride_consumers(plan.leaders, prepared);
  return plan;
}

// Whether the consumers of a recorded batch's new rows still need a wake-up.
enum class Wakeup {
  Due,      // no NOTIFY rode on the batch's statements, or it did not commit
  Carried,  // the last round's riding NOTIFY committed: it woke every consumer of the
            // batch after all of its rows had committed, an earlier round's too
};

// What recording a batch left: the row each identity ended up with, and its wake-up.
struct BatchOutcome {
  /// By input index of each leader: its identity's row.
  std::vector<std::optional<Stored>> stored;
  Wakeup wakeup = Wakeup::Due;
};

std::vector<AcceptResult> unwrap(std::vector<std::optional<AcceptResult>>& results) {
  std::vector<AcceptResult> out;
  out.reserve(results.size());
  for (auto& r : results) out.push_back(std::move(*r));
  return out;
}

}  // namespace

struct Inbox::Queries {
  std::string insert, insert_ride, lookup, insert_many, insert_many_ride, lookup_many;
  std::string insert_name, insert_ride_name, lookup_name, insert_many_name, insert_many_ride_name, lookup_many_name;
  std::string channel;
  std::unordered_set<std::string> consumers;
};

const Receipt& AcceptResult::receipt() const {
  if (!receipt_) std::rethrow_exception(error_);
  return *receipt_;
}

void AcceptResult::rethrow_if_error() const {
  if (error_) std::rethrow_exception(error_);
}

std::string Inbox::notify_channel(const std::string& schema) { return "boxcar_inbox_" + schema; }

Inbox::Inbox(std::shared_ptr<ConnectionPool> pool, InboxOptions options)
    : pool_(std::move(pool)), options_(std::move(options)), queries_(std::make_unique<Queries>()) {
  if (!pool_) throw ConfigError("inbox.pool", "a connection pool is required");
  const std::string schema = validate_schema_name(options_.schema, "schema");
  if (options_.consumers.empty()) throw ConfigError("consumers", "declare at least one consumer this module accepts");
  if (options_.max_statement_bytes == 0 || options_.max_statement_bytes > kMaxStatementBytesCeiling)
    throw ConfigError("inbox.max_statement_bytes", "must be between 1 and " +
                                                       std::to_string(kMaxStatementBytesCeiling) +
                                                       " (PostgreSQL's jsonb limit, see docs/schema.md)");
  for (const auto& consumer : options_.consumers) {
    try {
      detail::check_text_field(consumer, "consumer", true);
    } catch (const InboxValidationError& e) {
      throw ConfigError("consumers", e.what());
    }
    queries_->consumers.insert(consumer);
  }
  for (const auto& [consumer, rule] : options_.ordering)
    if (!queries_->consumers.contains(consumer))
      throw ConfigError("inbox.ordering.", "'" + consumer + "' orders by key but is not among the declared consumers");
  queries_->insert = detail::with_schema(inbox_sql::kInsert, schema);
  queries_->insert_ride = detail::with_schema(inbox_sql::kInsertRide, schema);
  queries_->lookup = detail::with_schema(inbox_sql::kLookup, schema);
  queries_->insert_many = detail::with_schema(inbox_sql::kInsertMany, schema);
  queries_->insert_many_ride = detail::with_schema(inbox_sql::kInsertManyRide, schema);
  queries_->lookup_many = detail::with_schema(inbox_sql::kLookupMany, schema);
  queries_->insert_name = "boxcar.inbox.insert." + schema;
  queries_->insert_ride_name = "boxcar.inbox.insert_ride." + schema;
  queries_->lookup_name = "boxcar.inbox.lookup." + schema;
  queries_->insert_many_name = "boxcar.inbox.insert_many." + schema;
  queries_->insert_many_ride_name = "boxcar.inbox.insert_many_ride." + schema;
  queries_->channel = notify_channel(schema);
  queries_->lookup_many_name = "boxcar.inbox.lookup_many." + schema;
  if (options_.notify)
    notifier_ = std::make_unique<detail::AsyncNotifier>(pool_->connection_string(), queries_->channel);
  if (options_.group_commit)
    coalescer_ = std::make_unique<detail::AcceptCoalescer>(
        detail::AcceptCoalescer::Limits{.max_items = kGroupCommitMaxCalls,
                                        .max_bytes = options_.max_statement_bytes,
                                        .max_flushes = kGroupCommitFlushes,
                                        .max_gather = kGroupCommitMaxGather,
                                        .busy_window = kGroupCommitBusyWindow},
        // accept_many counts each item's outcome once: a grouped call is not counted again.
        // The calls were validated and prepared once, in accept(): the group reuses that.
        [this](const std::vector<const detail::PreparedRequest*>& group) {
          return accept_prepared(group, std::vector<std::optional<AcceptResult>>(group.size()));
        });
}

Inbox::~Inbox() = default;

void Inbox::count(const std::string& consumer, std::string_view result) const {
  if (!options_.metrics) return;
  // Only declared consumers become label values: bad input must not grow cardinality.
  options_.metrics->accept_result(queries_->consumers.contains(consumer) ? consumer : "undeclared", result);
}

Receipt Inbox::accept(const AcceptRequest& request) {
  std::optional<detail::PreparedRequest> p;
  try {
    p = detail::prepare_request(request, {.consumers = queries_->consumers,
                                          .payload_limits = options_.payload_limits,
                                          .ordering = options_.ordering,
                                          .max_statement_bytes = options_.max_statement_bytes});
  } catch (const InboxValidationError&) {
    count(request.consumer, "invalid");  // before any queue: an invalid call never joins a group
    throw;
  }
  if (!coalescer_) return accept_alone(*p);
  const std::size_t bytes = p->canonical_payload.size() + p->metadata_json.size() + p->scope_id.size() +
                            p->source.size() + p->consumer.size() + p->message_id.size() + p->event_type.size();
  return coalescer_->accept(*p, bytes, [&] { return accept_alone(*p); });
}

GroupCommitStats Inbox::group_commit_stats() const { return coalescer_ ? coalescer_->stats() : GroupCommitStats{}; }

Receipt Inbox::accept_alone(const detail::PreparedRequest& p) {
  try {
    const Receipt receipt = accept_unmetered(p);
    count(p.consumer, receipt.kind == Receipt::Kind::Accepted ? "accepted" : "duplicate");
    return receipt;
  } catch (const InboxConflictError&) {
    count(p.consumer, "conflict");
    throw;
  } catch (const InboxStorageError&) {
    count(p.consumer, "storage_error");
    throw;
  }
}

void Inbox::validate(const AcceptRequest& request) const {
  detail::prepare_request(request, {.consumers = queries_->consumers,
                                    .payload_limits = options_.payload_limits,
                                    .ordering = options_.ordering,
                                    .max_statement_bytes = options_.max_statement_bytes});
}

Receipt Inbox::accept_unmetered(const detail::PreparedRequest& p) {
  // Off after a NOTIFY failed (a full notification queue): the call must not fail with it.
  bool rides = true;
  for (int round = 1;; ++round) {
    PooledConnection connection;
    try {
      connection = pool_->acquire(LoanUse::BoxcarOnly);  // only the inbox's statements
    } catch (...) {
      throw storage_error(std::current_exception(), "accept", false);
    }
    RideTicket ride(rides ? notifier_.get() : nullptr, std::span(&p.consumer, 1));
    try {
      pqxx::nontransaction statement(*connection);
      const std::string park_after = p.park_after ? std::to_string(*p.park_after) : std::string();
      const char* ordering_key = p.ordering_key ? p.ordering_key->c_str() : nullptr;
      const char* park = p.park_after ? park_after.c_str() : nullptr;
      const auto inserted =
          ride.active()
              ? connection.exec_named(statement, queries_->insert_ride_name, queries_->insert_ride, p.scope_kind,
                                      p.scope_id, p.source, p.consumer, p.message_id, p.event_type, p.schema_version,
                                      p.canonical_payload, p.metadata_json, p.fingerprint, ordering_key, park,
                                      queries_->channel, ride.payloads())
              : connection.exec_named(statement, queries_->insert_name, queries_->insert, p.scope_kind, p.scope_id,
                                      p.source, p.consumer, p.message_id, p.event_type, p.schema_version,
                                      p.canonical_payload, p.metadata_json, p.fingerprint, ordering_key, park);
      if (!inserted.empty()) {
        if (ride.active())
          ride.end(RideEnd::Carried);  // the autocommit insert committed its NOTIFY
        else if (notifier_)
          notifier_->notify(p.consumer);
        return Receipt{Receipt::Kind::Accepted, inserted[0]["id"].as<std::int64_t>(),
                       parse_receipt_status(inserted[0]["status"].c_str())};
      }
    } catch (...) {
      // The insert commits on its own: if the connection died under it, it may have landed.
      const DatabaseError e = detail::to_database_error(std::current_exception(), "accept", true);
      if (again_without_notify(e, ride.active(), round, "accept")) {
        rides = false;
        continue;
      }
      connection.discard();
      throw InboxStorageError(e.what(), e.sqlstate(), e.uncertain());
    }
    ride.end(RideEnd::NothingInserted);  // a duplicate: its NOTIFY never ran
    try {
      pqxx::nontransaction statement(*connection);
      const auto existing = connection.exec_named(statement, queries_->lookup_name, queries_->lookup, p.consumer,
                                                  p.source, p.scope_kind, p.scope_id, p.message_id);
      if (existing.empty()) {
        // Purged between our insert and lookup: the identity is free again.
        if (round < kMaxRounds) continue;
        throw InboxStorageError("accept: identity kept vanishing between insert and lookup", {}, false);
      }
      const auto id = existing[0]["id"].as<std::int64_t>();
      if (existing[0]["fingerprint"].c_str() != p.fingerprint) throw conflict_error(p, id);
      return Receipt{Receipt::Kind::Duplicate, id, parse_receipt_status(existing[0]["status"].c_str())};
    } catch (const Error&) {
      throw;
    } catch (...) {
      connection.discard();
      throw storage_error(std::current_exception(), "accept", false);
    }
  }
}

std::vector<AcceptResult> Inbox::accept_many(std::span<const AcceptRequest> batch) {
  std::vector<std::optional<AcceptResult>> results(batch.size());
  std::vector<std::optional<detail::PreparedRequest>> storage(batch.size());
  PreparedBatch prepared(batch.size(), nullptr);
  const detail::AcceptRules rules{.consumers = queries_->consumers,
                                  .payload_limits = options_.payload_limits,
                                  .ordering = options_.ordering,
                                  .max_statement_bytes = options_.max_statement_bytes};
  for (std::size_t i = 0; i < batch.size(); ++i) {
    try {
      storage[i] = detail::prepare_request(batch[i], rules);
      prepared[i] = &*storage[i];
    } catch (const InboxValidationError& e) {
      results[i].emplace(std::current_exception(), e.code());
      count(batch[i].consumer, "invalid");
    }
  }
  return accept_prepared(prepared, std::move(results));
}

// One accept_prepared call on a planned batch. record() runs the plan's statements in
// rounds: a round is one attempt, a transaction or one autocommit statement with its
// lookup; a deadlock, a row purged before its lookup or a full notification queue runs
// another, up to kMaxRounds. settle() then gives each valid item its result.
class Inbox::BatchAccept {
 public:
  BatchAccept(const Inbox& inbox, const PreparedBatch& prepared, const BatchPlan& plan)
      : inbox_(inbox), prepared_(prepared), plan_(plan) {}

  /// Runs rounds until one records the whole batch; call once.
  /// @throws InboxStorageError when the batch failed for good: counted as storage_error for
  ///   each leader, except when identities kept vanishing between insert and lookup.
  BatchOutcome record();
  /// Fills every empty result from `outcome`, counts it, and wakes the consumers of new
  /// rows that the ride did not.
  void settle(const BatchOutcome& outcome, std::vector<std::optional<AcceptResult>>& results) const;

 private:
  const Inbox& inbox_;
  const PreparedBatch& prepared_;
  const BatchPlan& plan_;
  BatchOutcome outcome_;
  // Rows an earlier round inserted: an autocommit round that has to run again (a row
  // purged before its lookup) keeps them, and they are still this batch's, not duplicates.
  std::vector<std::optional<std::int64_t>> inserted_earlier_;
  // From here on a lost connection leaves the outcome unknown: set before the statement
  // that may commit (the COMMIT, or the insert itself when it runs alone).
  bool committing_ = false;

  // Keeps what the last round inserted in inserted_earlier_ and forgets its rows.
  void start_round();
  // Runs every slice's statements, in a transaction or (autocommit()) on one connection.
  void run_round(RideTicket& ride);
  // Runs the statements of every slice on `statements` (a Tx, or AutocommitStatements).
  template <typename Statements>
  void record_slices(Statements& statements, RideTicket& ride);
  template <typename Statements>
  void look_up_unseen(Statements& statements, const BatchSlice& slice);
  // The recorded batch: a row an earlier round inserted is still this batch's.
  BatchOutcome finish_round(const RideTicket& ride);
};

BatchOutcome Inbox::BatchAccept::record() {
  outcome_.stored.resize(prepared_.size());
  inserted_earlier_.resize(prepared_.size());
  // Off after a NOTIFY failed (a full notification queue): the batch must not fail with it.
  bool rides = inbox_.notifier_ != nullptr;
  for (int round = 1;; ++round) {
    start_round();
    RideTicket ride(rides ? inbox_.notifier_.get() : nullptr, plan_.consumers);
    const bool riding = ride.active();
    try {
      run_round(ride);
      return finish_round(ride);
    } catch (const RetryBatch&) {
      if (round >= kMaxRounds)
        // Autocommit: what the earlier rounds inserted stays, so the outcome is not known.
        throw InboxStorageError("accept_many: identities kept vanishing between insert and lookup", {}, committing_);
    } catch (...) {
      const DatabaseError e = detail::to_database_error(std::current_exception(), "accept_many", committing_);
      // 40P01 deadlock / 40001 serialization: the batch rolled back whole; run it again.
      if (e.sqlstate().starts_with("40") && round < kMaxRounds) continue;
      if (again_without_notify(e, riding, round, "accept_many")) {
        rides = false;
        continue;
      }
      for (const std::size_t i : plan_.leaders) inbox_.count(prepared_[i]->consumer, "storage_error");
      throw InboxStorageError(e.what(), e.sqlstate(), e.uncertain());
    }
  }
}

void Inbox::BatchAccept::start_round() {
  auto& stored = outcome_.stored;
  for (std::size_t i = 0; i < stored.size(); ++i)
    if (stored[i] && stored[i]->inserted) inserted_earlier_[i] = stored[i]->id;
  std::fill(stored.begin(), stored.end(), std::nullopt);
  committing_ = false;
}

void Inbox::BatchAccept::run_round(RideTicket& ride) {
  if (plan_.autocommit()) {
    AutocommitStatements statements{inbox_.pool_->acquire(LoanUse::BoxcarOnly), committing_};
    try {
      record_slices(statements, ride);
    } catch (...) {
      statements.connection.discard();
      throw;
    }
  } else {
    Tx tx = inbox_.pool_->begin(LoanUse::BoxcarOnly);  // only the inbox's statements
    record_slices(tx, ride);
    committing_ = true;
    tx.commit();
    ride.committed();
  }
  ride.end(RideEnd::NothingInserted);  // still riding: no statement inserted a row
}

template <typename Statements>
void Inbox::BatchAccept::record_slices(Statements& statements, RideTicket& ride) {
  const Queries& q = *inbox_.queries_;
  for (const auto& slice : plan_.slices) {
    const auto& c = slice.columns;
    const pqxx::result rows =
        ride.active()
            ? statements.exec_prepared(q.insert_many_ride_name, q.insert_many_ride, c[0], c[1], c[2], c[3], c[4], c[5],
                                       c[6], c[7], c[8], c[9], c[10], c[11], q.channel, ride.payloads())
            : statements.exec_prepared(q.insert_many_name, q.insert_many, c[0], c[1], c[2], c[3], c[4], c[5], c[6],
                                       c[7], c[8], c[9], c[10], c[11]);
    if (!rows.empty()) {
      ride.queue();
      // An autocommit statement that returned a row has committed its NOTIFY.
      if (plan_.autocommit()) ride.committed();
    }
    std::size_t found = 0;
    std::size_t next = 0;
    for (const auto& row : rows) {
      // Each returned row is an inserted one: its identity names its position.
      const std::size_t i = returned_leader(row, slice.leaders, next, prepared_, plan_.one_stream);
      outcome_.stored[i] = Stored{row[kId].as<std::int64_t>(), parse_receipt_status(row[kStatus].c_str()), {}, true};
      ++found;
    }
    if (found < slice.leaders.size()) look_up_unseen(statements, slice);
  }
}

// Identities already stored (duplicates, conflicts, or rows a concurrent inserter committed
// while the insert ran): a separate statement, with a fresh snapshot, reads them.
template <typename Statements>
void Inbox::BatchAccept::look_up_unseen(Statements& statements, const BatchSlice& slice) {
  const Queries& q = *inbox_.queries_;
  auto& stored = outcome_.stored;
  std::vector<std::size_t> unseen;
  for (const std::size_t i : slice.leaders)
    if (!stored[i]) unseen.push_back(i);
  const auto keys_of = identity_columns(unseen, prepared_);
  const pqxx::result found_rows = statements.exec_prepared(q.lookup_many_name, q.lookup_many, keys_of[0], keys_of[1],
                                                           keys_of[2], keys_of[3], keys_of[4]);
  for (const auto& row : found_rows) {
    const std::size_t i = unseen.at(row["n"].as<std::size_t>() - 1);
    stored[i] = Stored{row["id"].as<std::int64_t>(), parse_receipt_status(row["status"].c_str()),
                       row["fingerprint"].c_str(), false};
  }
  for (const std::size_t i : unseen)
    if (!stored[i]) throw RetryBatch{};  // purged between insert and lookup
}

BatchOutcome Inbox::BatchAccept::finish_round(const RideTicket& ride) {
  auto& stored = outcome_.stored;
  for (std::size_t i = 0; i < stored.size(); ++i)
    if (stored[i] && inserted_earlier_[i] == stored[i]->id) stored[i]->inserted = true;
  outcome_.wakeup = ride.carried() ? Wakeup::Carried : Wakeup::Due;
  return std::move(outcome_);
}

void Inbox::BatchAccept::settle(const BatchOutcome& outcome, std::vector<std::optional<AcceptResult>>& results) const {
  std::unordered_set<std::string> notified;
  for (std::size_t i = 0; i < prepared_.size(); ++i) {
    if (results[i]) continue;
    const auto& p = *prepared_[i];
    const std::size_t leader = plan_.leader_of[i];
    const Stored& s = *outcome.stored[leader];
    const std::string& fingerprint = s.inserted ? prepared_[leader]->fingerprint : s.looked_up_fingerprint;
    if (fingerprint != p.fingerprint) {
      try {
        throw conflict_error(p, s.id);
      } catch (const InboxConflictError& e) {
        results[i].emplace(std::current_exception(), e.code());
      }
      inbox_.count(p.consumer, "conflict");
      continue;
    }
    const bool accepted = s.inserted && leader == i;
    inbox_.count(p.consumer, accepted ? "accepted" : "duplicate");
    results[i].emplace(Receipt{accepted ? Receipt::Kind::Accepted : Receipt::Kind::Duplicate, s.id, s.status});
    if (accepted && inbox_.notifier_ && outcome.wakeup == Wakeup::Due && notified.insert(p.consumer).second)
      inbox_.notifier_->notify(p.consumer);
  }
}

std::vector<AcceptResult> Inbox::accept_prepared(const std::vector<const detail::PreparedRequest*>& prepared,
                                                 std::vector<std::optional<AcceptResult>> results) {
  const BatchPlan plan = plan_batch(prepared, options_.max_statement_bytes);
  if (!plan.leaders.empty()) {
    BatchAccept batch(*this, prepared, plan);
    const BatchOutcome outcome = batch.record();
    batch.settle(outcome, results);
  }
  return unwrap(results);
}

}  // namespace boxcar
