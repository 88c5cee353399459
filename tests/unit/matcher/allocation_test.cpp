// Once warm, the per-token path allocates nothing: advance, fill_mask,
// is_allowed, can_end and rollback run on reused capacity. Every allocation
// of the test binary goes through the counting operator new below.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <new>

#include "encoder.h"
#include "helpers.h"
#include "matcher.h"

namespace {
thread_local bool counting = false;
thread_local size_t allocations = 0;
}  // namespace

// Every replaceable form, so that no allocation escapes the count and every
// block is freed by the matching function (sanitizers check that).
namespace {
void* counted(std::size_t size) noexcept {
  if (counting) ++allocations;
  return std::malloc(size ? size : 1);
}
void* counted_or_throw(std::size_t size) {
  if (void* p = counted(size)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t size) { return counted_or_throw(size); }
void* operator new[](std::size_t size) { return counted_or_throw(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return counted(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return counted(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

using namespace cgram;
using namespace cgram::test;

namespace {
// Runs the document through the matcher: a mask, an is_allowed and can_end
// before every token, then advance. No test macro inside: they allocate.
bool run(Matcher& m, const std::vector<uint32_t>& tokens, std::vector<uint32_t>& mask) {
  bool ok = true;
  for (uint32_t t : tokens) {
    m.fill_mask(mask);
    ok = ok && m.is_allowed(t);
    (void)m.can_end();
    ok = ok && m.advance(t) == AdvanceResult::Ongoing;
  }
  m.fill_mask(mask);
  return ok;
}
}  // namespace

TEST_CASE("no allocation on the per-token path once warm", "[matcher][allocation]") {
  auto vocab = (*(Vocabulary::bundled()));
  auto encoder = std::move((*(Encoder::create(vocab))));
  for (const auto& [name, doc] : std::vector<std::pair<std::string, std::string>>{
           {"json.cgram", R"({"name": "cgram", "tags": ["exact", "fast"], "n": -1.5e3, "ok": [true, null]})"},
           {"c_subset.cgram", "int f(int a) { if (a > 1) return a * f(a - 1); else return 1; }"},
           {"csv.cgram", "a,b,\"c,\"\"d\"\"\"\r\n1,2,3\r\n"},
           {"reply.cgram", "<think>hmm</think>\nSure, here.\n\nbye now"}}) {
    auto compiled = (*CompiledGrammar::compile(grammar(read_example(name)), vocab));
    std::vector<uint32_t> tokens = encoder->encode_continuation(doc);
    Matcher m(compiled);
    std::vector<uint32_t> mask(m.mask_words());
    REQUIRE(run(m, tokens, mask));  // warm: index entries, caches, pools
    m.reset();
    REQUIRE(run(m, tokens, mask));  // and once more: scratch rows settle at their depths
    REQUIRE(m.rollback(m.tokens_accepted()));
    const size_t undone = tokens.size() / 2;
    const std::vector<uint32_t> rest(tokens.end() - static_cast<ptrdiff_t>(undone), tokens.end());
    counting = true;
    allocations = 0;
    bool ok = run(m, tokens, mask);
    ok = ok && m.rollback(undone);
    ok = ok && run(m, rest, mask);
    counting = false;
    CHECK(ok);
    INFO(name << ": " << tokens.size() << " tokens");
    CHECK(allocations == 0);
  }
}
