// hiredis behind RedisClient: connection, AUTH/SELECT, argv commands, reply conversion.
#include "redis_client.hpp"

#include <sys/time.h>

#include <charconv>

#include <hiredis/hiredis.h>

namespace redis_streams {

namespace {

RedisValue convert(const redisReply* reply) {
  RedisValue value;
  switch (reply->type) {
    case REDIS_REPLY_STRING:
      value.type = RedisValue::Type::String;
      value.str.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_STATUS:
      value.type = RedisValue::Type::Status;
      value.str.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_ERROR:
      value.type = RedisValue::Type::Error;
      value.str.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_INTEGER:
      value.type = RedisValue::Type::Integer;
      value.integer = reply->integer;
      break;
    case REDIS_REPLY_ARRAY:
      value.type = RedisValue::Type::Array;
      value.elements.reserve(reply->elements);
      for (std::size_t i = 0; i < reply->elements; ++i) value.elements.push_back(convert(reply->element[i]));
      break;
    default:
      value.type = RedisValue::Type::Nil;
      break;
  }
  return value;
}

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(ms.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((ms.count() % 1000) * 1000);
  return tv;
}

int parse_int(std::string_view text, const std::string& what) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty())
    throw std::invalid_argument("REDIS_URL: invalid " + what);
  return value;
}

}  // namespace

RedisOptions RedisOptions::from_url(const std::string& url) {
  constexpr std::string_view kScheme = "redis://";
  if (!url.starts_with(kScheme))
    throw std::invalid_argument("REDIS_URL: expected redis://[[user]:password@]host[:port][/db]");
  RedisOptions options;
  std::string_view rest(url);
  rest.remove_prefix(kScheme.size());
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view credentials = rest.substr(0, at);
    rest.remove_prefix(at + 1);
    if (const auto colon = credentials.find(':'); colon != std::string_view::npos) {
      options.username = credentials.substr(0, colon);
      options.password = credentials.substr(colon + 1);
    } else {
      options.password = credentials;  // redis://secret@host is the common legacy form
    }
  }
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) options.database = parse_int(db, "database number");
    rest = rest.substr(0, slash);
  }
  if (const auto colon = rest.rfind(':'); colon != std::string_view::npos && rest.find(']') == std::string_view::npos) {
    options.port = parse_int(rest.substr(colon + 1), "port");
    rest = rest.substr(0, colon);
  }
  if (!rest.empty()) options.host = rest;
  return options;
}

std::string RedisOptions::describe() const {
  return host + ":" + std::to_string(port) + "/" + std::to_string(database);
}

RedisClient::RedisClient(RedisOptions options) : options_(std::move(options)) {
  context_ = redisConnectWithTimeout(options_.host.c_str(), options_.port, to_timeval(options_.timeout));
  if (!context_) throw RedisConnectionError("redis: cannot allocate a connection");
  if (context_->err) {
    const std::string message = "redis: cannot connect to " + options_.describe() + ": " + context_->errstr;
    redisFree(context_);
    context_ = nullptr;
    throw RedisConnectionError(message);
  }
  set_timeout(options_.timeout);
  try {
    if (!options_.password.empty()) {
      if (options_.username.empty())
        call({"AUTH", options_.password});
      else
        call({"AUTH", options_.username, options_.password});
    }
    if (options_.database != 0) call({"SELECT", std::to_string(options_.database)});
  } catch (...) {
    redisFree(context_);
    context_ = nullptr;
    throw;
  }
}

RedisClient::~RedisClient() {
  if (context_) redisFree(context_);
}

void RedisClient::set_timeout(std::chrono::milliseconds timeout) {
  if (timeout == current_timeout_) return;
  if (redisSetTimeout(context_, to_timeval(timeout)) != REDIS_OK)
    throw RedisConnectionError("redis: cannot set the socket timeout");
  current_timeout_ = timeout;
}

RedisValue RedisClient::command(const std::vector<std::string>& args, std::chrono::milliseconds socket_timeout) {
  if (!context_ || context_->err) throw RedisConnectionError("redis: connection is broken");
  set_timeout(socket_timeout > std::chrono::milliseconds::zero() ? socket_timeout : options_.timeout);
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  argv.reserve(args.size());
  lengths.reserve(args.size());
  for (const auto& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  auto* reply =
      static_cast<redisReply*>(redisCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data()));
  if (!reply) {
    throw RedisConnectionError("redis: " + args.front() +
                               " failed: " + (context_->err ? std::string(context_->errstr) : std::string("no reply")));
  }
  RedisValue value = convert(reply);
  freeReplyObject(reply);
  return value;
}

RedisValue RedisClient::call(const std::vector<std::string>& args, std::chrono::milliseconds socket_timeout) {
  RedisValue value = command(args, socket_timeout);
  if (value.is_error()) throw RedisCommandError("redis: " + args.front() + ": " + value.str);
  return value;
}

}  // namespace redis_streams
