// cgram-server's requests and its line reader (examples/server): every
// bound a client can push against answers with an error and the server
// goes on (docs/LIMITS.md, "cgram-server").
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <thread>

#include "line_reader.h"
#include "request_server.h"

using namespace cgram;
using cgram::server::LineReader;
using cgram::server::RequestServer;
using nlohmann::json;

namespace {

RequestServer make_server(server::ServerLimits limits = {}) {
  return RequestServer(std::make_unique<Compiler>(CompilerOptions{}), *Vocabulary::bundled(), 2, limits);
}

json ask(RequestServer& s, const std::string& line) { return json::parse(s.handle_line(line)); }

json step(RequestServer& s, const std::string& seq, const std::string& tokens) {
  return ask(s, R"({"op":"batch","steps":[{"seq":")" + seq + R"(","tokens":)" + tokens + "}]}")["steps"][0];
}

// The bundled vocabulary's tokens for "yes" as one id each.
uint32_t token_of(const std::string& text) {
  const auto vocab = *Vocabulary::bundled();
  for (uint32_t id = 0; id < vocab->size(); ++id)
    if (vocab->bytes(id) == text) return id;
  FAIL("no token " << text);
  return 0;
}

// Writes `text` into a pipe and reads it back through a LineReader.
std::vector<std::pair<LineReader::Status, std::string>> read_lines(const std::string& text, size_t max) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::thread writer([&] {
    for (size_t at = 0; at < text.size();) {
      const ssize_t n = write(fds[1], text.data() + at, text.size() - at);
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    close(fds[1]);
  });
  LineReader reader(fds[0], max);
  std::vector<std::pair<LineReader::Status, std::string>> out;
  std::string line;
  for (LineReader::Status s; (s = reader.next(line)) != LineReader::Status::End;) out.emplace_back(s, line);
  writer.join();
  close(fds[0]);
  return out;
}

}  // namespace

TEST_CASE("server: lines over the bound are skipped whole and reported, the next ones read", "[server]") {
  const std::string big(200000, 'x');  // past several of the reader's chunks
  auto lines = read_lines("short\n" + big + "\nafter\nlast", 1000);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == std::pair{LineReader::Status::Line, std::string("short")});
  CHECK(lines[1].first == LineReader::Status::TooLong);
  CHECK(lines[1].second.empty());
  CHECK(lines[2] == std::pair{LineReader::Status::Line, std::string("after")});
  CHECK(lines[3] == std::pair{LineReader::Status::Line, std::string("last")});
  CHECK(read_lines(std::string(1000, 'y') + "\n", 1000)[0].first == LineReader::Status::Line);
  CHECK(read_lines(std::string(1001, 'y') + "\n", 1000)[0].first == LineReader::Status::TooLong);
}

TEST_CASE("server: an idle reader times out", "[server]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  LineReader reader(fds[0], 100, 50);
  std::string line;
  CHECK(reader.next(line) == LineReader::Status::TimedOut);
  close(fds[0]);
  close(fds[1]);
}

TEST_CASE("server: an over-long line and a NUL are errors, and the server goes on", "[server]") {
  RequestServer s = make_server();
  const json too_long = json::parse(s.too_long_answer());
  CHECK(too_long["ok"] == false);
  CHECK(too_long["error"].get<std::string>().find("--max-line-bytes") != std::string::npos);
  const json nul = ask(s, std::string(R"({"op":"stats"})") + '\0' + "garbage");
  CHECK(nul["ok"] == false);
  CHECK(nul["error"].get<std::string>().find("NUL byte at byte 14") != std::string::npos);
  CHECK(ask(s, "[1]")["ok"] == false);
  CHECK(ask(s, R"({"op":"stats"})")["ok"] == true);
}

TEST_CASE("server: open sequences are capped, and an idle one holds no matcher", "[server]") {
  server::ServerLimits limits;
  limits.max_sequences = 3;
  RequestServer s = make_server(limits);
  REQUIRE(ask(s, R"({"op":"grammar","id":"g","text":"start ::= 'yes' | 'no' ;"})")["ok"] == true);
  for (int i = 0; i < 3; ++i) CHECK(ask(s, R"({"op":"open","grammar":"g","seq":"s)" + std::to_string(i) + "\"}")["ok"]);
  const json refused = ask(s, R"({"op":"open","grammar":"g","seq":"s3"})");
  CHECK(refused["ok"] == false);
  CHECK(refused["error"].get<std::string>().find("--max-sequences") != std::string::npos);
  CHECK(ask(s, R"({"op":"open","grammar":"g","seq":"s0"})")["ok"] == true);  // reopening is no new sequence
  CHECK(ask(s, R"({"op":"close","seq":"s1"})")["ok"] == true);
  CHECK(ask(s, R"({"op":"open","grammar":"g","seq":"s3"})")["ok"] == true);
  CHECK(ask(s, R"({"op":"stats"})")["sequences"] == 3);
}

TEST_CASE("server: a step takes all of its tokens or none, and says why", "[server]") {
  RequestServer s = make_server();
  REQUIRE(ask(s, R"({"op":"grammar","id":"g","text":"start ::= 'yes' | 'no' ;"})")["ok"] == true);
  REQUIRE(ask(s, R"({"op":"open","grammar":"g","seq":"a"})")["ok"] == true);
  const uint32_t y = token_of("y"), e = token_of("e"), n = token_of("n");
  const json fresh = step(s, "a", "[]");
  REQUIRE(fresh["ok"] == true);
  const size_t allowed = fresh["allowed"];

  // Out of range, a fraction, a float that would round, a negative id: refused, nothing taken.
  for (const std::string& bad : {fmt::format("[{}, 999999]", y), fmt::format("[{}, 1.7]", y),
                                 fmt::format("[{}, 1e30]", y), fmt::format("[{}, -1]", y), std::string("[\"7\"]")}) {
    const json answer = step(s, "a", bad);
    INFO(bad);
    CHECK(answer["ok"] == false);
    CHECK(answer["taken"] == 0);
    CHECK(answer["error"].get<std::string>().find("tokens[") != std::string::npos);
    CHECK(step(s, "a", "[]")["allowed"] == allowed);  // the state is as it was
  }
  // A token the grammar refuses after one it takes: neither is taken.
  const json rejected = step(s, "a", fmt::format("[{}, {}]", y, n));
  CHECK(rejected["ok"] == false);
  CHECK(rejected["taken"] == 0);
  CHECK(rejected["error"].get<std::string>().find(fmt::format("token {} (tokens[1]) is not allowed", n)) !=
        std::string::npos);
  CHECK(step(s, "a", "[]")["allowed"] == allowed);
  CHECK(step(s, "a", fmt::format("[{}, {}]", y, e))["ok"] == true);
}

TEST_CASE("server: the work limit is reported as the limit, not as a refused token", "[server]") {
  RequestServer s = make_server();
  REQUIRE(ask(s, R"({"op":"grammar","id":"g","text":"start ::= s ; s ::= s s | 'a' | '' ;"})")["ok"] == true);
  REQUIRE(ask(s, R"({"op":"open","grammar":"g","seq":"a"})")["ok"] == true);
  const uint32_t a = token_of("a");
  json answer;
  for (int i = 0; i < 4000; ++i) {
    answer = step(s, "a", fmt::format("[{}]", a));
    if (answer["ok"] == false) break;
  }
  REQUIRE(answer["ok"] == false);
  const std::string why = answer["error"];
  CHECK(why.find("work limit") != std::string::npos);
  CHECK(why.find("is not allowed") == std::string::npos);
}

TEST_CASE("server: a deeply nested token id is refused without a deep dump", "[server]") {
  RequestServer s = make_server();
  REQUIRE(ask(s, R"({"op":"grammar","id":"g","text":"start ::= 'yes' | 'no' ;"})")["ok"] == true);
  REQUIRE(ask(s, R"({"op":"open","grammar":"g","seq":"a"})")["ok"] == true);
  const size_t depth = 200000;
  const json answer = step(s, "a", "[" + std::string(depth, '[') + std::string(depth, ']') + "]");
  CHECK(answer["ok"] == false);
  CHECK(answer["error"].get<std::string>().find("tokens[0] is array") != std::string::npos);
}
