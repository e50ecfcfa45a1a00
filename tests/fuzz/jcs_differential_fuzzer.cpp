// Differential fuzzing of canonicalize_text against a second RFC 8785 implementation,
// jcs_canonicalize.mjs on node (JSON.parse + JSON.stringify), run as one long-lived
// subprocess fed in batches over pipes.
//
// What is compared (docs/reliability.md, "Fuzzing"):
// - input Boxcar accepts: node must accept it and print the same bytes;
// - input Boxcar refuses as JSON_PARSE_ERROR, when it is valid UTF-8 and the error is
//   not about a lone surrogate escape: node's JSON.parse must refuse it too (Boxcar must
//   not reject JSON that other parsers read);
// - every other refusal is deliberate and node is not asked: duplicate member names
//   (JSON.parse keeps the last), integers beyond 2^53 below 10^21 (JSON.parse rounds),
//   lone surrogates and ill-formed UTF-8 (not Unicode text), U+0000 (PostgreSQL cannot
//   store it), non-finite literals such as 1e400 (JSON.parse makes Infinity, printed as
//   null), and the depth and size limits.
//
// Batches: the verdicts come back after the batch is full (and at exit), so libFuzzer's
// crash file may be a later input; the harness writes the input that differed to
// jcs-mismatch-<n>.json in the working directory and prints it before aborting.
// BOXCAR_FUZZ_NODE names the node binary (default "node").
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "boxcar/core/canonical_json.hpp"
#include "fuzz_check.hpp"

#ifndef BOXCAR_JCS_SCRIPT
#error "BOXCAR_JCS_SCRIPT must name jcs_canonicalize.mjs"
#endif

namespace {

constexpr std::size_t kBatch = 128;

struct Pending {
  std::string input;
  bool accepted;          // true: node must print `canonical`; false: node must refuse
  std::string canonical;  // Boxcar's output when accepted
};

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned n = static_cast<unsigned char>(bytes[i]) << 16 | static_cast<unsigned char>(bytes[i + 1]) << 8 |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(n >> shift) & 63];
  }
  if (i < bytes.size()) {
    unsigned n = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string unbase64(std::string_view text) {
  std::string out;
  unsigned buffer = 0;
  int bits = 0;
  for (const char c : text) {
    int v = -1;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    if (c >= '0' && c <= '9') v = c - '0' + 52;
    if (c == '+') v = 62;
    if (c == '/') v = 63;
    if (v < 0) continue;  // '=' padding
    buffer = buffer << 6 | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xff);
    }
  }
  return out;
}

class NodeCanonicalizer {
 public:
  NodeCanonicalizer() { start(); }

  void add(Pending pending) {
    batch_.push_back(std::move(pending));
    if (batch_.size() >= kBatch) flush();
  }

  /// Sends the batch, reads one verdict per input and aborts on the first disagreement.
  /// If node dies mid-batch, its exit status is printed and the batch is sent once more to
  /// a new node; a batch that kills node twice aborts (its inputs are in the crash log).
  void flush() {
    if (batch_.empty()) return;
    std::vector<std::string> verdicts;
    if (!exchange(verdicts)) {
      std::fprintf(stderr, "jcs differential: node died (%s); restarting it for this batch\n", reap().c_str());
      ++restarts_;
      start();
      if (!exchange(verdicts)) {
        std::fprintf(stderr, "jcs differential: node died again (%s) on this batch:\n", reap().c_str());
        for (const auto& pending : batch_) boxcar::fuzz::print_input(pending.input);
        std::abort();
      }
    }
    for (std::size_t i = 0; i < batch_.size(); ++i) {
      const Pending& pending = batch_[i];
      const std::string& line = verdicts[i];
      if (pending.accepted) {
        if (!line.starts_with("ok ")) mismatch(pending, "Boxcar accepted, node refused: " + line);
        const std::string node_canonical = unbase64(std::string_view(line).substr(3));
        if (node_canonical != pending.canonical)
          mismatch(pending, "different canonical forms; node: " + node_canonical);
      } else if (!line.starts_with("err ")) {
        mismatch(pending, "Boxcar refused as JSON_PARSE_ERROR, node accepted");
      }
    }
    compared_ += batch_.size();
    batch_.clear();
  }

  std::size_t compared() const { return compared_; }
  int restarts() const { return restarts_; }

 private:
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  std::vector<Pending> batch_;
  std::size_t compared_ = 0;
  int restarts_ = 0;

  void start() {
    if (to_) std::fclose(to_);
    if (from_) std::fclose(from_);
    int to_child[2];
    int from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) die("pipe");
    const char* node = std::getenv("BOXCAR_FUZZ_NODE");
    node = node && *node ? node : "node";
    pid_ = fork();
    if (pid_ < 0) die("fork");
    if (pid_ == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      execlp(node, node, BOXCAR_JCS_SCRIPT, static_cast<char*>(nullptr));
      std::perror("jcs differential: exec node");
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    to_ = fdopen(to_child[1], "w");
    from_ = fdopen(from_child[0], "r");
    if (!to_ || !from_) die("fdopen");
    signal(SIGPIPE, SIG_IGN);  // a dead node shows as a failed write, reported below
  }

  /// One round trip of the batch; false if node is gone.
  bool exchange(std::vector<std::string>& verdicts) {
    verdicts.clear();
    // "j" + base64: an empty input must not look like the empty line that ends a batch.
    for (const auto& pending : batch_) std::fprintf(to_, "j%s\n", base64(pending.input).c_str());
    std::fputc('\n', to_);
    if (std::fflush(to_) != 0) return false;
    for (std::size_t i = 0; i < batch_.size(); ++i) {
      std::string line;
      for (int c = std::fgetc(from_); c != '\n'; c = std::fgetc(from_)) {
        if (c == EOF) return false;
        line += static_cast<char>(c);
      }
      verdicts.push_back(std::move(line));
    }
    return true;
  }

  /// How the node process ended, e.g. "exit 1" or "signal 9".
  std::string reap() {
    int status = 0;
    if (pid_ <= 0 || waitpid(pid_, &status, 0) != pid_) return "status unknown";
    pid_ = -1;
    if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
    return "status " + std::to_string(status);
  }

  [[noreturn]] static void die(const char* what) {
    std::fprintf(stderr, "jcs differential: %s failed (is node installed? scripts/setup)\n", what);
    std::abort();
  }

  [[noreturn]] void mismatch(const Pending& pending, const std::string& what) {
    static int n = 0;
    const std::string file = "jcs-mismatch-" + std::to_string(++n) + ".json";
    std::ofstream(file, std::ios::binary) << pending.input;
    std::fprintf(stderr, "jcs differential: %s\nBoxcar: %s\nsaved as %s\n", what.c_str(), pending.canonical.c_str(),
                 file.c_str());
    boxcar::fuzz::fail("canonicalize_text agrees with node's JCS", pending.input);
  }
};

NodeCanonicalizer* node = nullptr;

void flush_at_exit() {
  if (!node) return;
  node->flush();
  std::fprintf(stderr, "jcs differential: %zu inputs compared with node, %d node restarts\n", node->compared(),
               node->restarts());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  node = new NodeCanonicalizer();
  // A known answer first: a node that does not run fails here, not after a batch.
  node->add({R"({"b":[1e21,0.1,-0],"a":"\u00e9"})", true, "{\"a\":\"\xc3\xa9\",\"b\":[1e+21,0.1,0]}"});
  node->flush();
  std::atexit(flush_at_exit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  try {
    node->add({std::string(input), true, boxcar::canonicalize_text(input)});
  } catch (const boxcar::JsonValueError& e) {
    const std::string_view message = e.what();
    if (e.code() == "JSON_PARSE_ERROR" && boxcar::is_valid_utf8(input) &&
        message.find("surrogate") == std::string_view::npos)
      node->add({std::string(input), false, {}});
  }
  return 0;
}
