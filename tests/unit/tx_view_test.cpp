// The transaction a handler and OutboxEmitter::emit get can run statements but cannot
// end: these are compile-time guarantees, stated once more as a test so they show up in
// the suite.
#include <catch2/catch.hpp>

#include <concepts>
#include <type_traits>

#include "boxcar/inbox/handler.hpp"
#include "boxcar/core/tx_view.hpp"

namespace {

template <typename T>
concept can_commit = requires(T t) {
  t.commit();
};
template <typename T>
concept can_roll_back = requires(T t) {
  t.rollback();
};
template <typename T>
concept can_abort = requires(T t) {
  t.abort();
};
template <typename T>
concept reaches_libpqxx_transaction = requires(T t) {
  t.work();
};
template <typename T>
concept reaches_connection = requires(T t) {
  t.connection();
};
template <typename T>
concept runs_statements = requires(T t) {
  { t.exec("SELECT $1", 1) } -> std::same_as<pqxx::result>;
  { t.exec_prepared("name", "SELECT $1", 1) } -> std::same_as<pqxx::result>;
  t.on_commit([] {});
};

using HandlerTx = decltype(std::declval<boxcar::HandlerContext&>().tx);

// The owner's type can do all of it (so the checks below can fail).
static_assert(can_commit<boxcar::Tx&> && can_roll_back<boxcar::Tx&> && reaches_libpqxx_transaction<boxcar::Tx&> &&
              reaches_connection<boxcar::Tx&> && runs_statements<boxcar::Tx&>);

static_assert(std::is_same_v<HandlerTx, boxcar::TxView>);
static_assert(runs_statements<HandlerTx&> && runs_statements<const HandlerTx&>);
static_assert(!can_commit<HandlerTx&> && !can_roll_back<HandlerTx&> && !can_abort<HandlerTx&>);
static_assert(!reaches_libpqxx_transaction<HandlerTx&> && !reaches_connection<HandlerTx&>);

// An owning Tx converts, so `outbox.emit(tx, ...)` keeps compiling; a temporary does not.
static_assert(std::is_convertible_v<boxcar::Tx&, boxcar::TxView>);
static_assert(!std::is_convertible_v<boxcar::Tx&&, boxcar::TxView>);
// And the view cannot be turned back into the owner.
static_assert(!std::is_convertible_v<boxcar::TxView, boxcar::Tx&>);
static_assert(!std::is_constructible_v<boxcar::Tx, boxcar::TxView>);

}  // namespace

TEST_CASE("a handler's context.tx runs statements but has no commit, rollback, work or connection") {
  // Everything is checked by the static_asserts above, at compile time.
  CHECK(runs_statements<HandlerTx&>);
  CHECK_FALSE(can_commit<HandlerTx&>);
  CHECK_FALSE(can_roll_back<HandlerTx&>);
  CHECK_FALSE(reaches_libpqxx_transaction<HandlerTx&>);
  CHECK_FALSE(reaches_connection<HandlerTx&>);
}
