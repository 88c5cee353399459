// cgram-server: a small long-running program that embeds the JIT, the way
// an inference server would. It reads JSON-lines requests on standard input
// (or on a local Unix socket with --socket PATH, each connection served on
// a thread of its own), compiles grammars through the Compiler's cache
// (table tier at once, JIT kernels in the background), keeps one matcher
// per sequence, and runs the steps of a batch on a thread pool. One JSON
// answer per request line.
//
// Requests:
//   {"op":"grammar","id":"g","text":"start ::= ..."}      compile (cached by text)
//   {"op":"open","seq":"s","grammar":"g"}                   a matcher for a new sequence
//   {"op":"batch","steps":[{"seq":"s","tokens":[1,2],"want":"count"|"mask"}]}
//        each step advances its sequence by all of its tokens or by none
//        (an error answer says why, and "taken": how many were), then
//        answers the allowed count (or the mask as the list of allowed ids)
//        and the microseconds its mask took; steps of distinct sequences
//        run in parallel
//   {"op":"close","seq":"s"}
//   {"op":"stats"}                                         cache, memory and limits
//
// Limits (docs/LIMITS.md, "cgram-server"): a request line is at most
// --max-line-bytes (a longer one is skipped and answered with an error),
// at most --max-sequences are open at once, and in socket mode at most
// --max-connections are served at once, each closed after --idle-timeout-s
// without a request.
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <system_error>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include "line_reader.h"
#include "request_server.h"

namespace {

using namespace cgram;
using cgram::server::LineReader;
using cgram::server::RequestServer;

// Writes the whole answer and its newline; false once the peer has gone.
// send(2) on a socket (no SIGPIPE), write(2) on a pipe or a file.
bool write_line(int fd, const std::string& answer) {
  const std::string out = answer + "\n";
  bool socket = true;
  for (size_t sent = 0; sent < out.size();) {
    const ssize_t n = socket ? ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL)
                             : ::write(fd, out.data() + sent, out.size() - sent);
    if (n < 0 && errno == ENOTSOCK && socket) {
      socket = false;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

std::string refusal(std::string message) { return nlohmann::json{{"ok", false}, {"error", std::move(message)}}.dump(); }

// One request per line in, one answer per line out, until the input ends
// (or, with a time-out, falls idle). A bad or over-long line gets an error
// answer and the server goes on.
void serve(RequestServer& server, int in, int out, std::optional<int> idle_timeout_ms) {
  LineReader reader(in, server.limits().max_line_bytes, idle_timeout_ms);
  std::string line;
  while (true) {
    const LineReader::Status status = reader.next(line);
    std::string answer;
    if (status == LineReader::Status::Line) {
      if (line.empty()) continue;
      answer = server.handle_line(line);
    } else if (status == LineReader::Status::TooLong) {
      answer = server.too_long_answer();
    } else {
      if (status == LineReader::Status::TimedOut)
        write_line(out, refusal(fmt::format("no request for {} s: the connection is closed", *idle_timeout_ms / 1000)));
      return;
    }
    if (!write_line(out, answer)) return;  // the client went away
  }
}

int serve_socket(RequestServer& server, const std::string& path, size_t max_connections, int idle_timeout_ms) {
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up is an error on write, not the end of the server
  const int listener = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (listener < 0 || path.size() >= sizeof(address.sun_path)) {
    std::cerr << "cgram-server: cannot create the socket " << path << "\n";
    return 1;
  }
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
  unlink(path.c_str());
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || listen(listener, 64) != 0) {
    std::cerr << "cgram-server: cannot listen on " << path << "\n";
    return 1;
  }
  std::cerr << "cgram-server: listening on " << path << "\n";
  std::atomic<size_t> open_connections{0};
  while (true) {
    const int fd = accept(listener, nullptr, nullptr);
    if (fd < 0) {  // out of descriptors, say: wait rather than spin
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (open_connections.fetch_add(1) >= max_connections) {
      open_connections.fetch_sub(1);
      write_line(fd, refusal(fmt::format("{} connections are open (cgram-server --max-connections)", max_connections)));
      ::close(fd);
      continue;
    }
    // A client that stops reading cannot hold its thread for ever: a write
    // blocked for the idle time-out fails, and the connection ends.
    const timeval send_limit{idle_timeout_ms / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_limit, sizeof(send_limit));
    // The server outlives every connection: main never returns from here.
    try {
      std::thread([&server, &open_connections, fd, idle_timeout_ms] {
        try {
          serve(server, fd, fd, idle_timeout_ms);
        } catch (const std::exception& e) {  // out of memory, say: this connection ends, the server goes on
          write_line(fd, refusal(fmt::format("the connection failed: {}", e.what())));
        }
        ::close(fd);
        open_connections.fetch_sub(1);
      }).detach();
    } catch (const std::system_error&) {  // no thread to be had: refuse this connection
      write_line(fd, refusal("cannot start a thread for this connection"));
      ::close(fd);
      open_connections.fetch_sub(1);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cgram-server: JSON-lines constrained-decoding requests on stdin (or a Unix socket)"};
  std::string vocab_path, socket_path;
  size_t threads = std::thread::hardware_concurrency(), cache_mb = 512, jit_threads = 1, max_connections = 64;
  size_t idle_timeout_s = 300;
  server::ServerLimits limits;
  app.add_option("--vocab", vocab_path, "Vocabulary (default: the bundled Phi-3)");
  app.add_option("--socket", socket_path, "Serve on this Unix socket instead of stdin/stdout");
  app.add_option("--threads", threads, "Threads for batch steps")->capture_default_str();
  app.add_option("--cache-mb", cache_mb, "Compiled-grammar cache budget (0: no cache)")->capture_default_str();
  app.add_option("--jit-threads", jit_threads, "Background JIT threads (0: table tier only)")->capture_default_str();
  app.add_option("--max-line-bytes", limits.max_line_bytes, "Longest request line; a longer one is refused")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-sequences", limits.max_sequences, "Sequences open at once; past it, open is refused")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-connections", max_connections, "Socket connections served at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--idle-timeout-s", idle_timeout_s, "A socket connection with no request for this long is closed")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{86400}));
  CLI11_PARSE(app, argc, argv);
  VocabularyResult vocab = vocab_path.empty() ? Vocabulary::bundled() : Vocabulary::load(vocab_path);
  if (auto* e = vocab.if_error()) {
    std::cerr << "cgram-server: " << e->message << "\n";
    return 1;
  }
  CompilerOptions options;
  options.cache_bytes = cache_mb << 20;
  options.jit_threads = jit_threads;
  RequestServer server(std::make_unique<Compiler>(options), *vocab, std::max<size_t>(threads, 1), limits);
  if (!socket_path.empty())
    return serve_socket(server, socket_path, max_connections, static_cast<int>(idle_timeout_s * 1000));
  serve(server, STDIN_FILENO, STDOUT_FILENO, std::nullopt);
  return 0;
}
