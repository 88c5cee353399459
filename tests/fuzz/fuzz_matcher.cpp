// Target "matcher": fixed grammars (examples/json.cgram, and
// examples/reply.cgram for except! and any!) compiled once for the bundled
// vocabulary; the input is a sequence of operations on a Matcher: advance
// (allowed ids, any id, end of sequence, out-of-range ids), fill_mask,
// is_allowed, rollback(n), clone, reset, can_end and forced_text.
//
// Checked as it goes: the mask against is_allowed and advance; every
// advance against the reference recognizer (tests/oracle, Earley over
// bytes, fed the same tokens); after rollback or reset the mask equals the
// one recorded at that length; a clone has the same mask and is
// independent of the original.
#include <algorithm>
#include <optional>

#include "fuzz_common.h"
#include "matcher.h"
#include "oracle.h"

using namespace cgram;

namespace {

struct Setup {
  std::shared_ptr<const CompiledGrammar> compiled;
  std::shared_ptr<const oracle::OracleGrammar> oracle;
};

const Setup& setup(uint8_t which) {
  static const Setup setups[2] = {
      [] {
        auto c = fuzz::compile_or_die(fuzz::read_example("json.cgram"), "json.cgram", fuzz::bundled_vocabulary());
        return Setup{c, std::make_shared<oracle::OracleGrammar>(oracle::OracleGrammar::from_ir(c->grammar()->ir()))};
      }(),
      [] {
        auto c = fuzz::compile_or_die(fuzz::read_example("reply.cgram"), "reply.cgram", fuzz::bundled_vocabulary());
        return Setup{c, std::make_shared<oracle::OracleGrammar>(oracle::OracleGrammar::from_ir(c->grammar()->ir()))};
      }(),
  };
  return setups[which % 2];
}

bool bit(const std::vector<uint32_t>& mask, uint32_t id) { return id / 32 < mask.size() && (mask[id / 32] >> (id % 32) & 1); }

}  // namespace

CGRAM_FUZZ_TARGET(matcher) {
  fuzz::Input in(data, size);
  const Setup& s = setup(in.byte());
  const Vocabulary& vocab = s.compiled->vocabulary();
  const uint32_t n = uint32_t(vocab.size());

  Matcher m(s.compiled);
  oracle::Recognizer reference(s.oracle, /*segmented=*/true);
  std::vector<size_t> accepted_bytes;  // bytes of each accepted token (0 for end of sequence)
  std::vector<uint64_t> masks_by_length;  // the mask's hash after each accepted length
  std::vector<uint32_t> mask(m.mask_words()), other(m.mask_words());

  auto refresh = [&] {
    m.fill_mask(mask);
    fuzz::check_mask(mask, n);
    return fuzz::hash_words(mask);
  };
  masks_by_length.push_back(refresh());

  auto choose_token = [&]() -> uint32_t {
    switch (in.byte() % 5) {
      case 0:
      case 1: {  // an allowed token (the usual case)
        std::vector<uint32_t> allowed = m.current_possible_tokens();
        if (allowed.empty()) return in.u16();
        return allowed[in.u16() % allowed.size()];
      }
      case 2: return in.u16() % (n + 64);  // any id, a few past the end
      case 3: return vocab.eos_ids().empty() ? 0 : vocab.eos_ids()[in.byte() % vocab.eos_ids().size()];
      default: {
        const uint32_t odd[] = {n, n - 1, 0, UINT32_MAX, UINT32_MAX - 1, 0x80000000u, n + 1, 1u << 16};
        return odd[in.byte() % 8];
      }
    }
  };

  for (int op = 0; op < 48 && !in.empty(); ++op) {
    switch (in.byte() % 8) {
      case 0:
      case 1:
      case 2: {  // advance
        uint32_t t = choose_token();
        refresh();
        const bool allowed = t < n && bit(mask, t);
        FUZZ_CHECK(m.is_allowed(t) == allowed);
        const size_t before = m.tokens_accepted();
        // The reference: the token's bytes keep the text viable (an end of
        // sequence: the text is complete).
        bool reference_allows = false;
        if (!m.is_finished() && t < n) {
          if (vocab.is_eos(t)) {
            reference_allows = reference.complete();
          } else if (!vocab.is_special(t)) {
            reference.push_token(vocab.bytes(t));
            reference_allows = reference.viable();
            if (!reference_allows) reference.pop_bytes(vocab.bytes(t).size());
          }
        }
        FUZZ_CHECK(reference_allows == allowed);
        AdvanceResult r = m.advance(t);
        FUZZ_CHECK((r != AdvanceResult::Rejected) == allowed);
        FUZZ_CHECK((r == AdvanceResult::Finished) == (allowed && vocab.is_eos(t)));
        if (r == AdvanceResult::Rejected) {
          FUZZ_CHECK(m.tokens_accepted() == before);
          FUZZ_CHECK(refresh() == masks_by_length.back());
        } else {
          FUZZ_CHECK(m.tokens_accepted() == before + 1);
          accepted_bytes.push_back(vocab.is_eos(t) ? 0 : vocab.bytes(t).size());
          masks_by_length.push_back(refresh());
          if (r == AdvanceResult::Finished) FUZZ_CHECK(m.is_finished() && fuzz::check_mask(mask, n) == 0);
        }
        break;
      }
      case 3: {  // the mask against is_allowed, on allowed ids and any ids
        refresh();
        std::vector<uint32_t> allowed = m.current_possible_tokens();
        for (size_t i = 0; i < allowed.size(); i += 1 + allowed.size() / 64) FUZZ_CHECK(m.is_allowed(allowed[i]));
        for (int i = 0; i < 16; ++i) {
          uint32_t t = in.u16() % (n + 8);
          FUZZ_CHECK(m.is_allowed(t) == (t < n && bit(mask, t)));
        }
        FUZZ_CHECK(refresh() == masks_by_length.back());
        break;
      }
      case 4: {  // rollback
        size_t k = in.byte() % 10;
        const size_t before = m.tokens_accepted();
        const bool ok = m.rollback(k);
        FUZZ_CHECK(ok == (k <= before));
        if (!ok) {
          FUZZ_CHECK(m.tokens_accepted() == before);
          break;
        }
        FUZZ_CHECK(m.tokens_accepted() == before - k);
        for (size_t i = 0; i < k; ++i) {
          reference.pop_bytes(accepted_bytes.back());
          accepted_bytes.pop_back();
          masks_by_length.pop_back();
        }
        FUZZ_CHECK(refresh() == masks_by_length.back());
        FUZZ_CHECK(m.is_finished() == false || (k == 0 && masks_by_length.size() > 1));
        break;
      }
      case 5: {  // clone: the same mask, then independent
        Matcher c = m.clone();
        c.fill_mask(other);
        FUZZ_CHECK(other == (refresh(), mask));
        FUZZ_CHECK(c.tokens_accepted() == m.tokens_accepted());
        std::vector<uint32_t> allowed = c.current_possible_tokens();
        if (!allowed.empty()) {
          uint32_t t = allowed[in.u16() % allowed.size()];
          FUZZ_CHECK(c.advance(t) != AdvanceResult::Rejected);
          c.fill_mask(other);
          if (in.byte() & 1) c.rollback(1);
        }
        FUZZ_CHECK(refresh() == masks_by_length.back());
        break;
      }
      case 6: {  // reset
        m.reset();
        reference = oracle::Recognizer(s.oracle, true);
        accepted_bytes.clear();
        masks_by_length.resize(1);
        FUZZ_CHECK(m.tokens_accepted() == 0 && !m.is_finished());
        FUZZ_CHECK(refresh() == masks_by_length.back());
        break;
      }
      default: {  // can_end and the forced text
        refresh();
        const bool can_end = m.can_end();
        for (uint32_t eos : vocab.eos_ids()) FUZZ_CHECK(bit(mask, eos) == can_end);
        if (!m.is_finished()) FUZZ_CHECK(can_end == reference.complete());
        // Every allowed token agrees with the forced text as far as both go,
        // and nothing is forced where the text may end.
        const std::string forced = m.forced_text(8);
        if (!forced.empty()) {
          FUZZ_CHECK(!can_end);
          for (uint32_t t = 0; t < n; ++t) {
            if (!bit(mask, t)) continue;
            const std::string_view b = vocab.bytes(t);
            const size_t common = std::min(b.size(), forced.size());
            FUZZ_CHECK(b.substr(0, common) == std::string_view(forced).substr(0, common));
          }
        }
        FUZZ_CHECK(refresh() == masks_by_length.back());
        break;
      }
    }
  }
  return 0;
}
