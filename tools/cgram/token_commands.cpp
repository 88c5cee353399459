// cgram mask / generate / bench: the commands that compile a grammar for a
// vocabulary and run matchers.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "bench_support.h"
#include "commands.h"
#include "drafts.h"
#include "grammar.h"
#include "encoder.h"
#include "io.h"
#include "compiler.h"
#include "matcher.h"
#include "ngram_sampler.h"
#include "or_floor.h"
#include "shared_object.h"
#include "vocab_trie.h"
#include "canonical.h"
#include "vocab_context.h"

namespace cgram::cli {
namespace {

using nlohmann::json;

struct Loaded {
  std::shared_ptr<const Vocabulary> vocab;
  std::shared_ptr<const CompiledGrammar> compiled;
  double vocab_ms = 0;  // loading the vocabulary and building its trie (once per vocabulary)
  double parse_ms = 0;
  double compile_ms = 0;
  double jit_ms = 0;   // --tier jit: IR, optimisation and native code
  jit::KernelTimings jit_timings;
  double load_ms = 0;  // an AOT object: from its path to a compiled grammar
  Clock::time_point grammar_arrived;
  // --canonical: the vocabulary's context, made before the grammar arrives
  // (once per vocabulary in a server) and kept for the grammar to share.
  std::shared_ptr<const VocabularyContext> context;
  double canonical_ms = 0;
};

// The canonical filter of `vocab`'s context, made now (encoder, merges,
// the piece cuts of every class); how long it took, or nullopt where the
// vocabulary has none (the compile then says why).
std::optional<double> prepare_canonical(const std::shared_ptr<const VocabularyContext>& context) {
  auto start = Clock::now();
  if (!context->canonical_pairs()) return std::nullopt;
  return ms_since(start);
}

std::string canonical_summary(const VocabularyContext& context, double ms) {
  auto pairs = context.canonical_pairs();
  if (!pairs) return "";
  const size_t rows = (*pairs)->row_cache_bytes();
  return fmt::format(
      "canonical context of the vocabulary: {} classes of piece cuts, {:.1f} MB, made in {:.0f} ms; rows of the "
      "recent previous tokens {:.1f} MB",
      (*pairs)->classes(), ((*pairs)->memory_bytes() - rows) / 1e6, ms, rows / 1e6);
}

bool is_shared_object(const std::string& path) { return std::filesystem::path(path).extension() == ".so"; }

// What loaded but deserves a word (no end-of-sequence token, say): on
// stderr, whatever the output mode.
void print_warnings(const Vocabulary& vocab) {
  for (const std::string& warning : vocab.warnings()) std::cerr << "cgram: warning: " << printable(warning) << "\n";
}

// Loads the vocabulary and the grammar, and compiles; prints what went wrong.
std::optional<Loaded> load(const VocabArgs& args) {
  Loaded out;
  auto vocab_start = Clock::now();
  VocabularyResult vocab = args.vocab.empty() ? Vocabulary::bundled() : Vocabulary::load(args.vocab);
  if (auto* e = vocab.if_error()) {
    print_error(e->message);
    return std::nullopt;
  }
  out.vocab = *vocab;
  print_warnings(*out.vocab);
  out.vocab->trie();
  out.vocab_ms = ms_since(vocab_start);
  if (args.canonical) {
    out.context = VocabularyContext::of(out.vocab);
    out.canonical_ms = prepare_canonical(out.context).value_or(0);
    // A saved context passed over costs seconds: the user should know why.
    if (const std::string note = out.context->saved_note(); !note.empty())
      std::cerr << "cgram: note: " << printable(note) << "\n";
  }
  if (is_shared_object(args.file)) {
    auto start = Clock::now();
    out.grammar_arrived = start;
    auto loaded = load_shared_object(args.file, out.vocab);
    out.load_ms = ms_since(start);
    if (auto* e = loaded.if_error()) {
      print_error(e->message);
      return std::nullopt;
    }
    out.compiled = *loaded;
    return out;
  }
  auto read = read_grammar_file(args.file);
  if (!read) {
    print_error(read.error().message);
    return std::nullopt;
  }
  const std::string& text = *read;
  out.grammar_arrived = Clock::now();
  CompileRequest request;
  request.text = text;
  request.filename = args.file;
  request.parse = grammar_options(args.file, args.start, args);
  request.compile.eager_index = args.eager_index;
  request.compile.background_index = args.background_index;
  request.compile.canonical = args.canonical;
  request.compile.max_memory_bytes = args.max_memory_mib << 20;
  request.compile.mask_memo_bytes = args.mask_memo_bytes;
  request.tier = args.tier == "jit" ? Tier::Jit : Tier::Table;
  CompileOutcome compiled = Compiler().compile(request, out.vocab);
  out.parse_ms = compiled.times.parse_ms;
  out.compile_ms = compiled.times.compile_ms;
  out.jit_timings = compiled.times.jit;
  out.jit_ms = compiled.times.jit_ms();
  if (compiled.diagnostics) std::cerr << compiled.diagnostics->render(isatty(STDERR_FILENO));
  if (!compiled.ok()) {
    if (compiled.failure != CompileOutcome::Failure::Grammar) print_error(compiled.message);
    return std::nullopt;
  }
  out.compiled = std::move(compiled.grammar);
  return out;
}

std::unique_ptr<Encoder> encoder_for(const std::shared_ptr<const Vocabulary>& vocab) {
  auto created = Encoder::create(vocab);
  if (auto* e = created.if_error()) {
    print_error(e->message);
    return nullptr;
  }
  return std::move(*created);
}

// Token id sequences from a file of whitespace-separated ids, one sequence
// per line (empty lines skipped); every id must be below the vocabulary size.
std::optional<std::vector<std::vector<uint32_t>>> read_token_ids(const std::string& path, size_t vocab_size,
                                                                 size_t max_bytes, std::string& error) {
  auto read = read_regular_file(path, "token id file", max_bytes);
  if (!read) {
    error = read.error().message;
    return std::nullopt;
  }
  const std::string& text = *read;
  std::vector<std::vector<uint32_t>> sequences;
  std::istringstream lines(text);
  std::string line;
  for (size_t number = 1; std::getline(lines, line); ++number) {
    std::istringstream words(line);
    std::vector<uint32_t> ids;
    for (std::string word; words >> word;) {
      uint64_t id = 0;
      const bool digits = word.size() <= 12 && std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (digits) id = std::stoull(word);
      if (!digits || id >= vocab_size) {
        error = fmt::format("{}:{}: '{}' is not a token id of this vocabulary (0 to {})", path, number, word,
                            vocab_size - 1);
        return std::nullopt;
      }
      ids.push_back(static_cast<uint32_t>(id));
    }
    if (!ids.empty()) sequences.push_back(std::move(ids));
  }
  return sequences;
}

// The prefix of `cgram mask` as token ids: given as ids, or as bytes
// (--prefix, --prefix-file) tokenized by the vocabulary's encoder.
std::optional<std::vector<uint32_t>> prefix_tokens(const MaskArgs& args, const Loaded& loaded) {
  std::string error;
  if (!args.tokens_file.empty()) {
    auto sequences = read_token_ids(args.tokens_file, loaded.vocab->size(), args.max_text_bytes, error);
    if (!sequences) {
      print_error(error);
      return std::nullopt;
    }
    std::vector<uint32_t> all;
    for (const auto& seq : *sequences) all.insert(all.end(), seq.begin(), seq.end());
    return all;
  }
  std::string prefix = args.prefix;
  if (!args.prefix_file.empty()) {
    auto read = read_regular_file(args.prefix_file, "prefix file", args.max_text_bytes);
    if (!read) {
      print_error(read.error().message);
      return std::nullopt;
    }
    prefix = std::move(*read);
  }
  if (prefix.empty()) return std::vector<uint32_t>{};  // no encoder needed (a plain token list has none)
  auto encoder = encoder_for(loaded.vocab);
  if (!encoder) return std::nullopt;
  auto tokens = encoder->try_encode_continuation(prefix);
  if (auto* e = tokens.if_error()) {
    print_error(e->message);
    return std::nullopt;
  }
  return std::move(*tokens);
}


}  // namespace

int run_mask(const MaskArgs& args) {
  auto loaded = load(args);
  if (!loaded) return 3;
  auto prefix = prefix_tokens(args, *loaded);
  if (!prefix) return 3;
  Matcher matcher(loaded->compiled);
  const std::vector<uint32_t>& tokens = *prefix;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (matcher.advance(tokens[i]) != AdvanceResult::Ongoing) {
      if (matcher.has_error()) {
        std::cerr << fmt::format("cgram mask: stopped at prefix token {}: {}\n", i, matcher.error());
        return 3;
      }
      std::cerr << fmt::format("cgram mask: the prefix leaves the language at token {} ('{}')\n", i,
                               loaded->vocab->display(tokens[i]));
      return 2;
    }
  }
  std::vector<uint32_t> allowed = matcher.current_possible_tokens();
  if (matcher.has_error()) {
    std::cerr << fmt::format("cgram mask: {}\n", matcher.error());
    return 3;
  }
  const Vocabulary& vocab = *loaded->vocab;
  // The text may be complete while no token can say so: a vocabulary with no
  // end-of-sequence token. can_end is whether end of sequence is allowed (an
  // id in `allowed`); complete is whether the text is a sentence.
  const bool complete = matcher.can_end();
  const bool can_end = complete && !vocab.eos_ids().empty();
  // No token and an incomplete text: the grammar needs bytes here that no
  // token of the vocabulary spells (a dead end, never a silent empty mask).
  const bool dead_end = allowed.empty() && !complete;
  if (dead_end)
    std::cerr << fmt::format("cgram mask: warning: no token of the vocabulary can continue the text after {} prefix "
                             "tokens: the vocabulary cannot spell what the grammar needs next\n",
                             tokens.size());
  if (args.json) {
    json out = {{"prefix_tokens", tokens}, {"allowed", allowed},   {"count", allowed.size()},
                {"vocab_size", vocab.size()}, {"can_end", can_end}, {"complete", complete},
                {"dead_end", dead_end}};
    std::cout << dump_json(out) << "\n";
    return 0;
  }
  std::cout << fmt::format("{} of {} tokens allowed after {} prefix tokens{}\n", allowed.size(), vocab.size(),
                           tokens.size(),
                           can_end    ? " (end of sequence allowed)"
                           : complete ? " (the text is complete, but the vocabulary has no end-of-sequence token)"
                                      : "");
  for (size_t i = 0; i < allowed.size() && i < args.show; ++i)
    std::cout << fmt::format("{:>8}  '{}'{}\n", allowed[i], vocab.display(allowed[i]),
                             vocab.is_eos(allowed[i]) ? "  (end of sequence)" : "");
  if (allowed.size() > args.show) std::cout << fmt::format("... and {} more (--json lists them all)\n", allowed.size() - args.show);
  return 0;
}

namespace {
bool read_documents(const std::string& docs_path, const std::shared_ptr<const Vocabulary>& vocab, size_t max_bytes,
                    Documents& docs);
}  // namespace

int run_generate(const GenerateArgs& args) {
  auto loaded = load(args);
  if (!loaded) return 3;
  Matcher matcher(loaded->compiled);
  std::mt19937_64 rng(args.seed);
  // --corpus: a trigram model of those documents stands in for a language
  // model (the grammar still decides what may come); otherwise uniform.
  std::optional<NgramSampler> model;
  if (!args.corpus.empty()) {
    Documents docs;
    if (!read_documents(args.corpus, loaded->vocab, kDefaultMaxTextBytes, docs)) return 3;
    std::vector<std::vector<uint32_t>> token_lists;
    for (auto& [path, doc_tokens] : docs) token_lists.push_back(std::move(doc_tokens));
    const auto& eos = loaded->vocab->eos_ids();
    model.emplace(token_lists, eos.empty() ? UINT32_MAX : eos.front());
  }
  std::string text;
  std::vector<uint32_t> tokens;
  // Why generation stopped: end of sequence, --max-tokens, or no token
  // allowed, which is fine when the text is complete (a vocabulary with no
  // end-of-sequence token can only stop there) and a dead end otherwise (a
  // vocabulary that cannot spell what the grammar needs next).
  enum class Stop { EndOfSequence, MaxTokens, CompleteNoEos, NoToken } stop = Stop::MaxTokens;
  while (tokens.size() < args.max_tokens) {
    std::vector<uint32_t> allowed = matcher.current_possible_tokens();
    if (matcher.has_error()) {
      std::cerr << fmt::format("cgram generate: stopped after {} tokens: {}\n", tokens.size(), matcher.error());
      return 3;
    }
    if (allowed.empty()) {
      stop = matcher.can_end() ? Stop::CompleteNoEos : Stop::NoToken;
      break;
    }
    const uint32_t token = model ? model->pick(allowed, tokens, rng)
                                 : allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    AdvanceResult r = matcher.advance(token);
    if (r == AdvanceResult::Rejected) {
      // An allowed token is rejected only when a limit stopped the matcher.
      std::cerr << fmt::format("cgram generate: stopped after {} tokens: {}\n", tokens.size(),
                               matcher.has_error() ? matcher.error() : "the matcher rejected an allowed token");
      return 3;
    }
    tokens.push_back(token);
    if (r == AdvanceResult::Finished) {
      stop = Stop::EndOfSequence;
      break;
    }
    text += loaded->vocab->bytes(token);
  }
  const bool complete = stop == Stop::EndOfSequence || matcher.can_end();
  if (args.json) {
    static constexpr const char* kStopNames[] = {"end_of_sequence", "max_tokens", "complete_no_end_of_sequence_token",
                                                 "no_token_allowed"};
    json out = {{"tokens", tokens},
                {"finished", stop == Stop::EndOfSequence},
                {"complete", complete},
                {"stop", kStopNames[static_cast<int>(stop)]}};
    put_bytes(out, "text", text);
    std::cout << dump_json(out) << "\n";
  } else {
    std::cout << text << "\n";
    const char* why = "";
    switch (stop) {
      case Stop::EndOfSequence: why = "ended with end of sequence"; break;
      case Stop::MaxTokens:
        why = complete ? "stopped at --max-tokens (the text is complete)"
                       : "stopped at --max-tokens before the text was complete";
        break;
      case Stop::CompleteNoEos:
        why = "stopped: the grammar can end here but the vocabulary has no end-of-sequence token";
        break;
      case Stop::NoToken: why = "stopped: no token of the vocabulary can continue the text"; break;
    }
    std::cerr << fmt::format("cgram generate: {} tokens, {}\n", tokens.size(), why);
  }
  return stop == Stop::NoToken ? 1 : 0;
}

namespace {


// The entries of a folder; `ec` is set when it cannot be listed (the
// range-for over a directory_iterator would throw on a failed step).
std::vector<std::filesystem::directory_entry> list_folder(const std::filesystem::path& folder, std::error_code& ec) {
  std::vector<std::filesystem::directory_entry> out;
  std::filesystem::directory_iterator it(folder, ec);
  for (const std::filesystem::directory_iterator end; !ec && it != end; it.increment(ec)) out.push_back(*it);
  return out;
}

// Text files (a file, or every regular file of a folder, sorted) tokenized
// by the vocabulary's encoder, each at most `max_bytes`. Every filesystem
// call takes an error code: a folder that cannot be listed is an error, not
// an exception.
bool read_documents(const std::string& docs_path, const std::shared_ptr<const Vocabulary>& vocab, size_t max_bytes,
                    Documents& docs) {
  namespace fs = std::filesystem;
  auto encoder = encoder_for(vocab);
  if (!encoder) return false;
  std::error_code ec;
  const fs::file_status status = fs::status(docs_path, ec);
  if (ec) {
    print_error(fmt::format("cannot read documents '{}': {}", docs_path, ec.message()));
    return false;
  }
  std::vector<std::string> paths;
  if (fs::is_directory(status)) {
    auto entries = list_folder(docs_path, ec);
    if (ec) {
      print_error(fmt::format("cannot list the documents folder '{}': {}", docs_path, ec.message()));
      return false;
    }
    for (const fs::directory_entry& e : entries) {
      std::error_code type_ec;
      if (e.is_regular_file(type_ec)) paths.push_back(e.path().string());
    }
    if (paths.empty())
      std::cerr << fmt::format("cgram bench: warning: the folder '{}' holds no documents (no regular files)\n",
                               printable(docs_path));
    std::sort(paths.begin(), paths.end());
  } else {
    paths.push_back(docs_path);
  }
  for (const std::string& path : paths) {
    auto read = read_regular_file(path, "document", max_bytes);
    if (!read) {
      print_error(read.error().message);
      return false;
    }
    const std::string& text = *read;
    auto tokens = encoder->try_encode_continuation(text);
    if (auto* e = tokens.if_error()) {
      print_error(fmt::format("{}: {}", path, e->message));
      return false;
    }
    docs.emplace_back(path, std::move(*tokens));
  }
  return true;
}

struct Latencies {
  size_t documents = 0, left_language = 0;
  std::vector<double> mask_us, advance_us;
  // The masks of free text (except!, any!), where a reasoning model spends
  // thousands of tokens: those that allow 99 % of the vocabulary or more
  // (inside a JSON string, about 97 % is allowed with Llama 3).
  std::vector<double> open_mask_us;
  // Masks the grammar's memo answered, of those that asked it (--mask-memo).
  uint64_t memo_hits = 0, memo_lookups = 0;
  // Canonical mode: the steps where no canonical continuation was left and
  // the matcher yielded to the grammar (its plain mask).
  size_t canonical_yields = 0;
  // Every mask step by where it was (--slowest): its time, document, step.
  struct Step {
    double us;
    size_t document, step;
  };
  std::vector<Step> steps;
};

// The text shown around a step: the end of what came before, and the next token.
constexpr size_t kSlowContextBytes = 32;

bool is_open_mask(std::span<const uint32_t> words, size_t vocab_size) {
  size_t allowed = 0;
  for (uint32_t w : words) allowed += static_cast<size_t>(std::popcount(w));
  return 100 * allowed >= 99 * vocab_size;
}

// The mask at one step, timed (and counted as free text where it allows
// nearly everything); false when the matcher stopped on a limit.
bool timed_mask(Matcher& matcher, std::span<uint32_t> words, const std::string& path, size_t step,
                const BenchArgs& args, Latencies& out) {
  // --model-step-ms: the model's forward pass between two masks, untimed
  // (caches grow cold, a background index build goes on, as in a server).
  if (args.model_step_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(args.model_step_ms));
  const auto t0 = Clock::now();
  matcher.fill_mask(words);
  out.mask_us.push_back(ms_since(t0) * 1000);
  if (args.slowest > 0) out.steps.push_back({out.mask_us.back(), out.documents - 1, step});
  const Vocabulary& vocab = matcher.grammar().vocabulary();
  if (is_open_mask(words, vocab.size())) out.open_mask_us.push_back(out.mask_us.back());
  if (matcher.grammar().is_canonical() && !matcher.has_error() && matcher.canonical_dead_end()) ++out.canonical_yields;
  if (!matcher.has_error()) return true;
  std::cerr << fmt::format("cgram bench: {} stopped at token {}: {}; the rest is skipped\n", printable(path), step,
                           matcher.error());
  ++out.left_language;
  return false;
}

void timed_advance(Matcher& matcher, uint32_t token, Latencies& out) {
  const auto t1 = Clock::now();
  matcher.advance(token);
  out.advance_us.push_back(ms_since(t1) * 1000);
}

// --mask-memo: "shared" starts the run with an empty memo (not warmed by a
// warm-up run), "document" empties it before each text.
struct MemoCounts {
  const MaskMemo& memo;
  MaskMemo::Stats before;
  MemoCounts(const CompiledGrammar& compiled, const BenchArgs& args) : memo(compiled.mask_memo()) {
    if (args.mask_memo == "shared") compiled.mask_memo().forget();
    before = memo.stats();
  }
  void into(Latencies& out) const {
    const MaskMemo::Stats after = memo.stats();
    out.memo_hits = after.hits - before.hits;
    out.memo_lookups = after.hits + after.misses - before.hits - before.misses;
  }
};

// One matcher per document: every mask and every advance timed.
Latencies run_documents(const std::shared_ptr<const CompiledGrammar>& compiled, const Documents& docs,
                        const BenchArgs& args) {
  Latencies out;
  std::vector<uint32_t> words(compiled->mask_words());
  const MemoCounts memo(*compiled, args);
  for (const auto& [path, tokens] : docs) {
    if (args.mask_memo == "document") compiled->mask_memo().forget();
    Matcher matcher(compiled);
    ++out.documents;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (!timed_mask(matcher, words, path, i, args, out)) break;
      if (!(words[tokens[i] / 32] >> (tokens[i] % 32) & 1)) {
        std::cerr << fmt::format("cgram bench: {} leaves the language at token {} ('{}'); the rest is skipped\n",
                                 printable(path), i, compiled->vocabulary().display(tokens[i]));
        ++out.left_language;
        break;
      }
      timed_advance(matcher, tokens[i], out);
    }
  }
  memo.into(out);
  return out;
}

// The next token of a walk: any allowed text token, or with --prefer-long
// the longest of kLongestOf drawn at random, as a model that likes long
// tokens (indentation runs, repeated punctuation, CJK spaces) would write.
constexpr size_t kLongestOf = 16;
// The allowed text tokens of a mask, drawn from by index in id order as a
// list of them would be (the same draws give the same walks), without
// making the list: a step inside free text allows 100,000 tokens and more,
// and listing them took half of a walk's run.
class AllowedTokens {
 public:
  explicit AllowedTokens(const Vocabulary& vocab) {
    for (uint32_t id = 0; id < vocab.size(); ++id)
      if (vocab.is_special(id)) specials_.push_back(id);
    size_ = vocab.size();
  }
  // Takes the mask's text tokens: the bits of special ids and of ids past the vocabulary cleared.
  void take(std::span<const uint32_t> words) {
    text_.assign(words.begin(), words.end());
    for (uint32_t id : specials_)
      if (id / 32 < text_.size()) text_[id / 32] &= ~(1u << (id % 32));
    for (size_t id = size_; id < text_.size() * 32; ++id) text_[id / 32] &= ~(1u << (id % 32));
    before_.resize(text_.size() + 1);
    before_[0] = 0;
    for (size_t w = 0; w < text_.size(); ++w) before_[w + 1] = before_[w] + static_cast<size_t>(std::popcount(text_[w]));
  }
  size_t count() const { return before_.empty() ? 0 : before_.back(); }
  // The k-th allowed id, in id order.
  uint32_t at(size_t k) const {
    const size_t w = static_cast<size_t>(std::upper_bound(before_.begin(), before_.end(), k) - before_.begin()) - 1;
    uint32_t bits = text_[w];
    for (size_t skip = k - before_[w]; skip > 0; --skip) bits &= bits - 1;
    return static_cast<uint32_t>(w * 32 + static_cast<size_t>(std::countr_zero(bits)));
  }

 private:
  std::vector<uint32_t> specials_, text_;
  std::vector<size_t> before_;  // per word: the allowed ids in the words before it
  size_t size_ = 0;
};

std::optional<uint32_t> pick_walk_token(std::span<const uint32_t> words, const Vocabulary& vocab, bool prefer_long,
                                        std::mt19937_64& rng, AllowedTokens& allowed) {
  allowed.take(words);
  if (allowed.count() == 0) return std::nullopt;
  std::uniform_int_distribution<size_t> any(0, allowed.count() - 1);
  uint32_t best = allowed.at(any(rng));
  for (size_t k = 1; prefer_long && k < kLongestOf; ++k) {
    const uint32_t t = allowed.at(any(rng));
    if (vocab.bytes(t).size() > vocab.bytes(best).size()) best = t;
  }
  return best;
}

// --walks N: random walks of up to --walk-tokens tokens, each mask timed as
// the walk makes it. A walk meets its contexts for the first time, as a
// model does: a replay of the same tokens would find what the first pass
// made (canonical rows, the memo) and time the warm path. The walks are
// returned as documents for the other measurements.
Latencies run_walks(const std::shared_ptr<const CompiledGrammar>& compiled, const BenchArgs& args, Documents& walks) {
  Latencies out;
  std::vector<uint32_t> words(compiled->mask_words());
  const Vocabulary& vocab = compiled->vocabulary();
  AllowedTokens allowed(vocab);
  std::mt19937_64 rng(args.seed);
  const MemoCounts memo(*compiled, args);
  for (size_t w = 0; w < args.walks; ++w) {
    if (args.mask_memo == "document") compiled->mask_memo().forget();
    Matcher matcher(compiled);
    ++out.documents;
    walks.emplace_back(fmt::format("walk {} (seed {})", w + 1, args.seed), std::vector<uint32_t>{});
    std::vector<uint32_t>& tokens = walks.back().second;
    for (size_t i = 0; i < args.walk_tokens; ++i) {
      if (!timed_mask(matcher, words, walks.back().first, i, args, out)) break;
      const std::optional<uint32_t> next = pick_walk_token(words, vocab, args.prefer_long, rng, allowed);
      if (!next) break;  // only the end of the text is left
      timed_advance(matcher, *next, out);
      tokens.push_back(*next);
    }
  }
  memo.into(out);
  return out;
}

// Opportunistic masking, as a server does it: check the sampled token with
// is_allowed, and build the mask only when that fails. Here every document
// token is checked and then accepted (a walk of its own: no mask is built,
// so the checks are timed as cold as a server meets them). Each answer must
// be yes: a no is a matcher bug, reported as such.
std::optional<std::vector<double>> run_is_allowed(const std::shared_ptr<const CompiledGrammar>& compiled,
                                                  const Documents& docs) {
  std::vector<double> us;
  for (const auto& [path, tokens] : docs) {
    Matcher matcher(compiled);
    for (size_t i = 0; i < tokens.size(); ++i) {
      auto t0 = Clock::now();
      const bool allowed = matcher.is_allowed(tokens[i]);
      us.push_back(ms_since(t0) * 1000);
      if (!allowed) {
        if (matcher.has_error()) break;  // counted by run_documents
        // run_documents reports a document leaving the language; whether
        // this one does is told by the mask.
        std::vector<uint32_t> words(compiled->mask_words());
        matcher.fill_mask(words);
        if (words[tokens[i] / 32] >> (tokens[i] % 32) & 1) {
          print_error(fmt::format("{}: is_allowed says no to token {} but the mask allows it", printable(path), i));
          return std::nullopt;
        }
        us.pop_back();
        break;
      }
      matcher.advance(tokens[i]);
    }
  }
  return us;
}

// Jump-forward on the documents, as a server would use it: at each step,
// jump_forward() first; when it gives nothing, the model writes the next
// token (the document's own, or, after a jump that ended between two of
// its tokens, the first token of the encoder's encoding of the rest). What
// is saved is the model's steps: 1 - model steps / the document's tokens.
struct JumpSavings {
  size_t tokens = 0, model_steps = 0, jumps = 0, healed = 0, jumped_tokens = 0, documents = 0;
  double saved() const { return tokens ? 1.0 - double(model_steps) / double(tokens) : 0; }
};

std::optional<JumpSavings> run_jump_forward(const std::shared_ptr<const CompiledGrammar>& compiled,
                                            const Documents& docs) {
  JumpSavings out;
  auto enc = compiled->encoder();
  if (auto* error = enc.if_error()) {
    print_error(error->message);
    return std::nullopt;
  }
  const Encoder& encoder = **enc;
  const Vocabulary& vocab = compiled->vocabulary();
  for (const auto& [path, tokens] : docs) {
    std::string text;
    std::unordered_map<size_t, size_t> token_at;  // byte offset → the document's token starting there
    for (size_t i = 0; i < tokens.size(); ++i) {
      token_at[text.size()] = i;
      text += vocab.bytes(tokens[i]);
    }
    Matcher m(compiled);
    std::vector<size_t> ends;  // byte offset after each accepted token
    size_t pos = 0, steps = 0;
    bool left = false;
    while (pos < text.size()) {
      auto jumped = m.jump_forward();
      const auto* jump = jumped.if_value();
      if (jump && !jump->tokens.empty()) {
        m.rollback(jump->rollback);
        for (size_t i = 0; i < jump->rollback; ++i) ends.pop_back();
        pos = ends.empty() ? 0 : ends.back();
        for (uint32_t t : jump->tokens) {
          const std::string_view b = vocab.bytes(t);
          if (text.compare(pos, b.size(), b) != 0 || m.advance(t) != AdvanceResult::Ongoing) {
            print_error(fmt::format("{}: jump-forward left the document at byte {} (a bug in cgram)", printable(path),
                                    pos));
            return std::nullopt;
          }
          pos += b.size();
          ends.push_back(pos);
        }
        ++out.jumps;
        if (jump->rollback) ++out.healed;
        out.jumped_tokens += jump->tokens.size() - jump->rollback;
        continue;
      }
      uint32_t next;
      if (auto it = token_at.find(pos); it != token_at.end()) {
        next = tokens[it->second];
      } else {
        auto rest = encoder.try_encode_continuation(std::string_view(text).substr(pos));
        if (!rest.ok() || (*rest).empty()) {
          left = true;
          break;
        }
        next = (*rest)[0];
      }
      if (m.advance(next) != AdvanceResult::Ongoing) {
        left = true;  // the document leaves the language (bench reports it)
        break;
      }
      ++steps;
      pos += vocab.bytes(next).size();
      ends.push_back(pos);
    }
    if (left) continue;
    ++out.documents;
    out.tokens += tokens.size();
    out.model_steps += steps;
  }
  return out;
}

// Count-based speculative drafts on the documents: the draft model learns
// from the first half of them, then each document of the second half is
// decoded with drafts: at each step up to `k` drafts are proposed, the ones
// that match the document are accepted, and the model's own token follows
// (a speculative-decoding step yields the accepted drafts plus one token).
// The draft model also learns from the tokens as they are accepted.
struct Speculation {
  size_t train_documents = 0, test_documents = 0, steps = 0, tokens = 0, proposed = 0, accepted = 0;
  double acceptance() const { return proposed ? double(accepted) / double(proposed) : 0; }
  double accepted_per_step() const { return steps ? double(accepted) / double(steps) : 0; }
  double tokens_per_step() const { return steps ? double(tokens) / double(steps) : 0; }
};

Speculation run_speculation(const std::shared_ptr<const CompiledGrammar>& compiled, const Documents& docs, size_t k) {
  Speculation out;
  DraftModel drafts;
  const size_t train = docs.size() / 2;
  for (size_t d = 0; d < train; ++d) drafts.learn(compiled, docs[d].second);
  out.train_documents = train;
  for (size_t d = train; d < docs.size(); ++d) {
    const std::vector<uint32_t>& tokens = docs[d].second;
    Matcher m(compiled);
    size_t i = 0;
    bool left = false;
    while (i < tokens.size() && !left) {
      const std::vector<uint32_t> proposal = drafts.propose(m, k);
      size_t accepted = 0;
      while (accepted < proposal.size() && i + accepted < tokens.size() && proposal[accepted] == tokens[i + accepted])
        ++accepted;
      ++out.steps;
      out.proposed += proposal.size();
      out.accepted += accepted;
      // The accepted drafts, then the model's token.
      for (size_t j = 0; j <= accepted && i < tokens.size(); ++j, ++i) {
        drafts.record(m, tokens[i]);
        if (m.advance(tokens[i]) != AdvanceResult::Ongoing) {
          left = true;  // the document leaves the language (bench reports it)
          break;
        }
        ++out.tokens;
      }
    }
    ++out.test_documents;
  }
  return out;
}

json speculation_json(const Speculation& s, size_t k) {
  return {{"draft_tokens", k},          {"train_documents", s.train_documents}, {"test_documents", s.test_documents},
          {"steps", s.steps},           {"tokens", s.tokens},                   {"proposed", s.proposed},
          {"accepted", s.accepted},     {"acceptance", s.acceptance()},         {"accepted_per_step", s.accepted_per_step()},
          {"tokens_per_step", s.tokens_per_step()}};
}

// The slowest steps (--slowest), longest first, with the text around each.
struct SlowStep {
  double us;
  std::string document;
  size_t step;
  std::string before, next;  // bytes, as the vocabulary writes them
};
std::vector<SlowStep> slowest_steps(const Latencies& run, const Documents& docs, const Vocabulary& vocab, size_t n) {
  std::vector<Latencies::Step> steps = run.steps;
  n = std::min(n, steps.size());
  std::partial_sort(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(n), steps.end(),
                    [](const auto& a, const auto& b) { return a.us > b.us; });
  std::vector<SlowStep> out;
  for (size_t k = 0; k < n; ++k) {
    const auto& [path, tokens] = docs[steps[k].document];
    SlowStep s{steps[k].us, path, steps[k].step, {}, {}};
    for (size_t i = steps[k].step; i > 0 && s.before.size() < kSlowContextBytes; --i)
      s.before.insert(0, vocab.bytes(tokens[i - 1]));
    if (s.before.size() > kSlowContextBytes) s.before.erase(0, s.before.size() - kSlowContextBytes);
    // The last mask of a walk that ended (only the end of the text was
    // left) has no next token.
    s.next = steps[k].step < tokens.size() ? vocab.bytes(tokens[steps[k].step]) : "(the end)";
    out.push_back(std::move(s));
  }
  return out;
}

json percentiles(const std::vector<double>& v) {
  return {{"p50", percentile(v, 50)}, {"p90", percentile(v, 90)}, {"p99", percentile(v, 99)},
          {"max", percentile(v, 100)}};
}

// The same percentiles in floors (or_floor.h): the unit the mask targets are in.
json floors(const std::vector<double>& v, double floor_us) {
  json out = percentiles(v);
  for (auto& [key, value] : out.items()) value = floor_us > 0 ? value.get<double>() / floor_us : 0.0;
  return out;
}

int bench_file(const BenchArgs& args) {
  auto loaded = load(args);
  if (!loaded) return 3;
  std::vector<uint32_t> first_mask(loaded->compiled->mask_words());
  {
    Matcher first(loaded->compiled);
    first.fill_mask(first_mask);
  }
  // From the grammar's text to its first mask, the vocabulary already loaded.
  double first_mask_ms = ms_since(loaded->grammar_arrived);
  // The documents as token ids: text files tokenized by the vocabulary's
  // encoder (--docs), or ids given directly (--tokens, one document a line).
  Documents docs;
  std::string error;
  if (!args.docs.empty() && !read_documents(args.docs, loaded->vocab, args.max_text_bytes, docs)) return 3;
  if (!args.tokens_file.empty()) {
    auto sequences = read_token_ids(args.tokens_file, loaded->vocab->size(), args.max_text_bytes, error);
    if (!sequences) {
      print_error(error);
      return 3;
    }
    for (size_t i = 0; i < sequences->size(); ++i)
      docs.emplace_back(fmt::format("{} line {}", args.tokens_file, i + 1), std::move((*sequences)[i]));
  }
  if (args.gpu) return bench_gpu(args, loaded->compiled, docs);
  const Latencies run = args.walks > 0 ? run_walks(loaded->compiled, args, docs) : run_documents(loaded->compiled, docs, args);
  const std::vector<double>& mask_us = run.mask_us;
  const std::vector<double>& advance_us = run.advance_us;
  const auto is_allowed_us = run_is_allowed(loaded->compiled, docs);
  if (!is_allowed_us) return 3;
  std::optional<JumpSavings> jumps;
  if (args.jump_forward && !(jumps = run_jump_forward(loaded->compiled, docs))) return 3;
  std::optional<Speculation> speculation;
  if (args.speculate) speculation = run_speculation(loaded->compiled, docs, args.draft_tokens);
  const CompileTimings& t = loaded->compiled->timings();
  // Measured after the masks, in the same process: the unit of the targets.
  const double floor_us = or_floor_us(loaded->compiled->mask_words());
  json out = {{"vocab_size", loaded->vocab->size()},
              {"documents", run.documents},
              {"documents_leaving_language", run.left_language},
              {"steps", mask_us.size()},
              {"mask_us", percentiles(mask_us)},
              {"floor_us", floor_us},
              {"mask_floors", floors(mask_us, floor_us)},
              {"open_steps", run.open_mask_us.size()},
              {"open_mask_us", percentiles(run.open_mask_us)},
              {"advance_us", {{"p50", percentile(advance_us, 50)}, {"p99", percentile(advance_us, 99)},
                              {"max", percentile(advance_us, 100)}}},
              {"is_allowed_us", percentiles(*is_allowed_us)},
              {"mask_memo", {{"mode", args.mask_memo}, {"hits", run.memo_hits}, {"lookups", run.memo_lookups}}},
              {"canonical_yields", run.canonical_yields},
              {"canonical_context_ms", loaded->canonical_ms},
              {"compile_ms", {{"parse", loaded->parse_ms}, {"lower", t.lower_ms}, {"index", t.index_ms},
                              {"total", loaded->parse_ms + loaded->compile_ms}}},
              {"tier", loaded->compiled->tier()},
              {"jit_ms", {{"total", loaded->jit_ms}, {"ir", loaded->jit_timings.ir_ms},
                          {"optimize", loaded->jit_timings.optimize_ms}, {"native", loaded->jit_timings.native_ms}}},
              {"aot_load_ms", loaded->load_ms},
              {"vocabulary_load_ms", loaded->vocab_ms},
              {"time_to_first_mask_ms", first_mask_ms},
              {"memory_bytes", loaded->compiled->memory_bytes()},
              {"vocabulary_trie_bytes", loaded->vocab->trie().memory_bytes()}};
  put_bytes(out, "grammar", args.file);
  put_bytes(out, "vocabulary", loaded->vocab->name());
  if (jumps)
    out["jump_forward"] = {{"document_tokens", jumps->tokens}, {"model_steps", jumps->model_steps},
                           {"saved", jumps->saved()}, {"jumps", jumps->jumps}, {"healed", jumps->healed}};
  if (speculation) out["speculation"] = speculation_json(*speculation, args.draft_tokens);
  const std::vector<SlowStep> slowest = slowest_steps(run, docs, *loaded->vocab, args.slowest);
  if (args.slowest > 0) {
    out["slowest"] = json::array();
    for (const SlowStep& s : slowest) {
      json step = {{"mask_us", s.us}, {"step", s.step}};
      put_bytes(step, "document", s.document);
      put_bytes(step, "before", s.before);
      put_bytes(step, "next", s.next);
      out["slowest"].push_back(std::move(step));
    }
  }
  if (args.json) {
    std::cout << dump_json(out, 2) << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "{} with {} ({} ids, {}): {} documents, {} steps\n"
      "mask     p50 {:.1f} µs  p90 {:.1f} µs  p99 {:.1f} µs  max {:.1f} µs  ({} of {} from the grammar's memo, "
      "--mask-memo {})\n"
      "advance  p50 {:.1f} µs  p99 {:.1f} µs  max {:.1f} µs\n"
      "is_allowed (the document's token, no mask built)  p50 {:.2f} µs  p99 {:.2f} µs\n"
      "compile  parse {:.2f} ms  lower {:.2f} ms  index {:.2f} ms ({})\n"
      "first mask after the grammar arrives: {:.2f} ms (vocabulary loaded beforehand in {:.1f} ms)\n"
      "memory of the compiled grammar: {:.2f} MB (and the vocabulary trie, shared by all grammars: {:.2f} MB)\n"
      "floor (one OR of a full {}-token bitset, this machine, now): {:.3f} µs; mask p50 {:.1f}, p99 {:.1f}, max "
      "{:.1f} floors\n",
      args.file, loaded->vocab->name(), loaded->vocab->size(), tokenizer_kind_name(loaded->vocab->kind()),
      run.documents, mask_us.size(), percentile(mask_us, 50), percentile(mask_us, 90), percentile(mask_us, 99),
      percentile(mask_us, 100), run.memo_hits, run.memo_lookups, args.mask_memo, percentile(advance_us, 50), percentile(advance_us, 99), percentile(advance_us, 100),
      percentile(*is_allowed_us, 50), percentile(*is_allowed_us, 99),
      loaded->parse_ms, t.lower_ms, t.index_ms,
      args.eager_index        ? "eager: every entry built"
      : args.background_index ? "lazy: the first mask's entries built by it, the rest in the background"
                              : "lazy: entries are built by the masks",
      first_mask_ms,
      loaded->vocab_ms, loaded->compiled->memory_bytes() / 1e6, loaded->vocab->trie().memory_bytes() / 1e6,
      loaded->vocab->size(), floor_us, percentile(mask_us, 50) / floor_us, percentile(mask_us, 99) / floor_us,
      percentile(mask_us, 100) / floor_us);
  if (!run.open_mask_us.empty())
    std::cout << fmt::format("free-text masks (99 % of the vocabulary or more allowed): {} steps, p50 {:.1f} µs  "
                             "p90 {:.1f} µs  p99 {:.1f} µs\n",
                             run.open_mask_us.size(), percentile(run.open_mask_us, 50),
                             percentile(run.open_mask_us, 90), percentile(run.open_mask_us, 99));
  if (loaded->compiled->is_canonical()) {
    std::cout << fmt::format("canonical: the matcher yielded to the grammar (no canonical continuation left) at {} of "
                             "{} steps\n",
                             run.canonical_yields, mask_us.size());
    if (loaded->context) std::cout << canonical_summary(*loaded->context, loaded->canonical_ms) << "\n";
  }
  std::cout << fmt::format("tier: {}", loaded->compiled->tier());
  if (loaded->jit_ms > 0)
    std::cout << fmt::format(" (JIT compile {:.1f} ms: IR {:.1f}, optimize {:.1f}, native code {:.1f})", loaded->jit_ms,
                             loaded->jit_timings.ir_ms, loaded->jit_timings.optimize_ms, loaded->jit_timings.native_ms);
  if (loaded->load_ms > 0) std::cout << fmt::format(" (AOT object loaded in {:.2f} ms)", loaded->load_ms);
  std::cout << "\n";
  if (jumps)
    std::cout << fmt::format("jump-forward: {} of {} document tokens written by the model ({:.1f} % saved; {} jumps, "
                             "{} healing the last token)\n",
                             jumps->model_steps, jumps->tokens, 100 * jumps->saved(), jumps->jumps, jumps->healed);
  if (speculation)
    std::cout << fmt::format("speculation (up to {} drafts, trained on {} documents, tested on {}): {:.1f} % of {} "
                             "drafts accepted, {:.2f} accepted per step, {:.2f} tokens per step\n",
                             args.draft_tokens, speculation->train_documents, speculation->test_documents,
                             100 * speculation->acceptance(), speculation->proposed, speculation->accepted_per_step(),
                             speculation->tokens_per_step());
  if (!slowest.empty()) std::cout << fmt::format("the {} slowest masks:\n", slowest.size());
  for (const SlowStep& s : slowest)
    std::cout << fmt::format("  {:8.1f} µs  {} step {}: after '{}', next '{}'\n", s.us, printable(s.document), s.step,
                             printable(s.before), printable(s.next));
  return 0;
}

// One row of the suite: a grammar spelling of one format, with one vocabulary.
struct SuiteRow {
  std::string format, spelling, vocabulary;
  size_t steps = 0, left_language = 0;
  std::vector<double> mask_us, open_mask_us;
  double first_mask_ms = 0, compile_ms = 0, memory_mb = 0;
  double floor_us = 0;  // one OR of this vocabulary's full bitset, measured after the row's masks
  // --tier jit: the same documents on the JIT tier (after a warm-up run of
  // each tier, so that both are measured warm).
  std::vector<double> jit_mask_us;
  double jit_ms = 0;
  std::vector<double> is_allowed_us;  // opportunistic masking: the document's token checked, no mask
  uint64_t memo_hits = 0, memo_lookups = 0;  // the table tier's run
  std::optional<JumpSavings> jumps;   // --jump-forward
  std::optional<Speculation> speculation;  // --speculate
};

std::optional<SuiteRow> bench_suite_row(const std::string& format, const std::filesystem::path& grammar_path,
                                        const std::shared_ptr<const Vocabulary>& vocab, const Documents& docs,
                                        const BenchArgs& args) {
  const bool compare_jit = args.tier == "jit";
  auto read = read_grammar_file(grammar_path.string());
  if (!read) {
    print_error(read.error().message);
    return std::nullopt;
  }
  const std::string& text = *read;
  SuiteRow row;
  row.format = format;
  row.spelling = grammar_path.stem().string();
  row.vocabulary = std::filesystem::path(vocab->name()).filename().string();
  // First mask with the lazy index, from the grammar's text.
  CompileRequest request;
  const std::string filename = grammar_path.string();  // request.filename is a view: kept alive here
  request.text = text;
  request.filename = filename;
  request.parse = grammar_options(filename, "start", args);  // --whitespace, --property-order…
  request.compile.canonical = args.canonical;
  request.compile.max_memory_bytes = args.max_memory_mib << 20;
  request.compile.mask_memo_bytes = args.mask_memo_bytes;
  Compiler compiler;
  auto arrived = Clock::now();
  CompileOutcome lazy = compiler.compile(request, vocab);
  if (lazy.diagnostics) std::cerr << lazy.diagnostics->render(isatty(STDERR_FILENO));
  if (!lazy.ok()) {
    if (lazy.failure != CompileOutcome::Failure::Grammar) print_error(lazy.message);
    return std::nullopt;
  }
  {
    Matcher first(lazy.grammar);
    std::vector<uint32_t> words(first.mask_words());
    first.fill_mask(words);
  }
  row.first_mask_ms = ms_since(arrived);
  // Eager compile (parse, lower, the whole index), then the documents.
  request.compile.eager_index = true;
  auto start = Clock::now();
  CompileOutcome eager = compiler.compile(request, vocab);
  row.compile_ms = ms_since(start);
  if (!eager.ok()) {
    print_error(eager.message);
    return std::nullopt;
  }
  const std::shared_ptr<const CompiledGrammar>& compiled = eager.grammar;
  row.memory_mb = compiled->memory_bytes() / 1e6;
  if (compare_jit) run_documents(compiled, docs, args);  // warm-up
  Latencies run = run_documents(compiled, docs, args);
  row.floor_us = or_floor_us(compiled->mask_words());
  row.steps = run.mask_us.size();
  row.left_language = run.left_language;
  row.mask_us = std::move(run.mask_us);
  row.open_mask_us = std::move(run.open_mask_us);
  row.memo_hits = run.memo_hits;
  row.memo_lookups = run.memo_lookups;
  auto is_allowed_us = run_is_allowed(compiled, docs);
  if (!is_allowed_us) return std::nullopt;
  row.is_allowed_us = std::move(*is_allowed_us);
  if (args.jump_forward && !(row.jumps = run_jump_forward(compiled, docs))) return std::nullopt;
  if (args.speculate) row.speculation = run_speculation(compiled, docs, args.draft_tokens);
  if (compare_jit) {
    request.tier = Tier::Jit;
    CompileOutcome jitted = compiler.compile(request, vocab);
    if (!jitted.ok()) {
      print_error(jitted.message);
      return std::nullopt;
    }
    row.jit_ms = jitted.times.jit_ms();
    run_documents(jitted.grammar, docs, args);  // warm-up
    row.jit_mask_us = run_documents(jitted.grammar, docs, args).mask_us;
  }
  return row;
}

int bench_suite(const BenchArgs& args) {
  std::vector<std::shared_ptr<const Vocabulary>> vocabs;
  for (const std::string& path : args.vocabs.empty() ? std::vector<std::string>{""} : args.vocabs) {
    VocabularyResult vocab = path.empty() ? Vocabulary::bundled() : Vocabulary::load(path);
    if (auto* e = vocab.if_error()) {
      print_error(e->message);
      return 3;
    }
    vocabs.push_back(*vocab);
    print_warnings(*vocabs.back());
    vocabs.back()->trie();
  }
  // --canonical: each vocabulary's context made before its grammars arrive,
  // as a server would have it.
  std::vector<std::shared_ptr<const VocabularyContext>> contexts;
  if (args.canonical)
    for (const auto& vocab : vocabs) {
      contexts.push_back(VocabularyContext::of(vocab));
      const auto ms = prepare_canonical(contexts.back());
      if (ms && !args.json) std::cerr << canonical_summary(*contexts.back(), *ms) << "\n";
    }
  std::error_code ec;
  std::vector<std::filesystem::path> formats;
  for (const auto& e : list_folder(args.suite, ec)) {
    std::error_code type_ec;
    if (e.is_directory(type_ec) && (args.only.empty() || e.path().filename() == args.only))
      formats.push_back(e.path());
  }
  if (ec || formats.empty()) {
    print_error(fmt::format("no benchmark formats in '{}'{}", args.suite,
                             ec ? ": " + ec.message() : ""));
    return 3;
  }
  std::sort(formats.begin(), formats.end());
  std::vector<SuiteRow> rows;
  // A row that cannot be measured (a grammar over --max-memory, say) is
  // reported and the table goes on; the exit status says some failed.
  std::vector<std::string> failed;
  for (const auto& format : formats) {
    std::vector<std::filesystem::path> grammars;
    for (const auto& e : list_folder(format, ec))
      if (e.path().extension() == ".cgram" || e.path().extension() == ".gbnf" || e.path().extension() == ".lark" ||
          e.path().extension() == ".json")
        grammars.push_back(e.path());  // a JSON Schema's first mask includes its translation
    if (ec) {
      print_error(fmt::format("cannot list the format folder '{}': {}", format.string(), ec.message()));
      return 3;
    }
    std::sort(grammars.begin(), grammars.end());
    for (const auto& vocab : vocabs) {
      Documents docs;
      if (!read_documents((format / "docs").string(), vocab, args.max_text_bytes, docs)) return 3;
      for (const auto& grammar : grammars) {
        auto row = bench_suite_row(format.filename().string(), grammar, vocab, docs, args);
        if (!row) {
          failed.push_back(fmt::format("{} {} {}", format.filename().string(), grammar.stem().string(),
                                       std::filesystem::path(vocab->name()).filename().string()));
          continue;
        }
        if (!args.json)
          std::cerr << fmt::format("{} {} {}: p50 {:.1f} µs\n", row->format, row->spelling, row->vocabulary,
                                   percentile(row->mask_us, 50));
        rows.push_back(std::move(*row));
      }
    }
  }
  // One floor per vocabulary for the whole run: the least measured after
  // any of its rows (a row's own may come out high while another process
  // has the core).
  std::map<std::string, double> floor_of;
  for (const SuiteRow& r : rows)
    if (auto [it, first] = floor_of.try_emplace(r.vocabulary, r.floor_us); !first) it->second = std::min(it->second, r.floor_us);
  for (SuiteRow& r : rows) r.floor_us = floor_of[r.vocabulary];
  for (const std::string& row : failed) print_error(fmt::format("{}: not measured (the error above)", row));
  const int status = failed.empty() ? 0 : 1;
  if (args.json) {
    json out = json::array();
    for (const SuiteRow& r : rows) {
      json row = {{"steps", r.steps}, {"documents_leaving_language", r.left_language},
                  {"mask_us", percentiles(r.mask_us)}, {"floor_us", r.floor_us},
                  {"mask_floors", floors(r.mask_us, r.floor_us)}, {"open_steps", r.open_mask_us.size()},
                  {"open_mask_us", percentiles(r.open_mask_us)}, {"first_mask_ms", r.first_mask_ms},
                  {"compile_ms", r.compile_ms}, {"memory_mb", r.memory_mb},
                  {"is_allowed_us", percentiles(r.is_allowed_us)},
                  {"mask_memo", {{"mode", args.mask_memo}, {"hits", r.memo_hits}, {"lookups", r.memo_lookups}}}};
      if (r.jumps)
        row["jump_forward"] = {{"document_tokens", r.jumps->tokens}, {"model_steps", r.jumps->model_steps},
                               {"saved", r.jumps->saved()}, {"jumps", r.jumps->jumps}, {"healed", r.jumps->healed}};
      if (r.speculation) row["speculation"] = speculation_json(*r.speculation, args.draft_tokens);
      put_bytes(row, "format", r.format);
      put_bytes(row, "spelling", r.spelling);
      put_bytes(row, "vocabulary", r.vocabulary);
      out.push_back(std::move(row));
    }
    if (args.tier == "jit")
      for (size_t i = 0; i < rows.size(); ++i)
        out[i]["jit"] = {{"mask_us", percentiles(rows[i].jit_mask_us)}, {"compile_ms", rows[i].jit_ms}};
    std::cout << dump_json(out, 2) << "\n";
    return status;
  }
  if (args.tier == "jit") {
    std::cout << "| format | spelling | vocabulary | steps | table p50 | JIT p50 | ratio p50 | table p99 | JIT p99 | "
                 "ratio p99 | JIT compile |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const SuiteRow& r : rows) {
      const double t50 = percentile(r.mask_us, 50), j50 = percentile(r.jit_mask_us, 50);
      const double t99 = percentile(r.mask_us, 99), j99 = percentile(r.jit_mask_us, 99);
      std::cout << fmt::format("| {} | {} | {} | {} | {:.1f} µs | {:.1f} µs | {:.2f} | {:.1f} µs | {:.1f} µs | {:.2f} | "
                               "{:.1f} ms |\n",
                               r.format, r.spelling, r.vocabulary, r.steps, t50, j50, t50 / j50, t99, j99, t99 / j99,
                               r.jit_ms);
    }
    return status;
  }
  std::cout << "| format | spelling | vocabulary | steps | mask p50 | p90 | p99 | max | in floors p50 / p99 / max | "
               "from memo | first mask (lazy) | eager compile | memory |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const SuiteRow& r : rows)
    std::cout << fmt::format("| {} | {} | {} | {}{} | {:.1f} µs | {:.1f} µs | {:.1f} µs | {:.1f} µs | "
                             "{:.1f} / {:.1f} / {:.1f} | {:.0f} % | {:.2f} ms | {:.1f} ms | {:.2f} MB |\n",
                             r.format, r.spelling, r.vocabulary, r.steps, r.left_language ? " (left)" : "",
                             percentile(r.mask_us, 50), percentile(r.mask_us, 90), percentile(r.mask_us, 99),
                             percentile(r.mask_us, 100), percentile(r.mask_us, 50) / r.floor_us,
                             percentile(r.mask_us, 99) / r.floor_us, percentile(r.mask_us, 100) / r.floor_us,
                             r.memo_lookups ? 100.0 * double(r.memo_hits) / double(r.memo_lookups) : 0.0,
                             r.first_mask_ms, r.compile_ms, r.memory_mb);
  for (const auto& [vocabulary, floor_us] : floor_of)
    std::cout << fmt::format("\nfloor with {}: one OR of a full-vocabulary bitset takes {:.3f} µs on this machine "
                             "(the least measured after a row)\n",
                             vocabulary, floor_us);
  if (std::any_of(rows.begin(), rows.end(), [](const SuiteRow& r) { return !r.open_mask_us.empty(); })) {
    std::cout << "\nFree text: the steps whose mask allows 99 % of the vocabulary or more (except!, any!)\n\n"
                 "| format | spelling | vocabulary | free-text steps | of all | p50 | p90 | p99 |\n"
                 "|---|---|---|---|---|---|---|---|\n";
    for (const SuiteRow& r : rows)
      if (!r.open_mask_us.empty())
        std::cout << fmt::format("| {} | {} | {} | {} | {:.0f} % | {:.1f} µs | {:.1f} µs | {:.1f} µs |\n", r.format,
                                 r.spelling, r.vocabulary, r.open_mask_us.size(),
                                 100.0 * r.open_mask_us.size() / std::max<size_t>(r.steps, 1),
                                 percentile(r.open_mask_us, 50), percentile(r.open_mask_us, 90),
                                 percentile(r.open_mask_us, 99));
  }
  std::cout << "\nOpportunistic masking: is_allowed on the document's token (no mask built) against a full mask\n\n"
               "| format | spelling | vocabulary | is_allowed p50 | p99 | mask p50 | p99 | mask / is_allowed p50 | p99 "
               "|\n|---|---|---|---|---|---|---|---|---|\n";
  for (const SuiteRow& r : rows) {
    const double a50 = percentile(r.is_allowed_us, 50), a99 = percentile(r.is_allowed_us, 99);
    const double m50 = percentile(r.mask_us, 50), m99 = percentile(r.mask_us, 99);
    std::cout << fmt::format("| {} | {} | {} | {:.2f} µs | {:.2f} µs | {:.1f} µs | {:.1f} µs | {:.0f}x | {:.0f}x |\n",
                             r.format, r.spelling, r.vocabulary, a50, a99, m50, m99, a50 > 0 ? m50 / a50 : 0,
                             a99 > 0 ? m99 / a99 : 0);
  }
  if (args.speculate) {
    std::cout << fmt::format("\nSpeculative drafts: up to {} per step, counts learnt from the first half of each "
                             "format's documents (and online), tested on the rest\n\n",
                             args.draft_tokens)
              << "| format | spelling | vocabulary | test tokens | steps | drafts | accepted | acceptance | "
                 "accepted per step | tokens per step |\n|---|---|---|---|---|---|---|---|---|---|\n";
    for (const SuiteRow& r : rows) {
      const Speculation& p = *r.speculation;
      std::cout << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {:.1f} % | {:.2f} | {:.2f} |\n", r.format,
                               r.spelling, r.vocabulary, p.tokens, p.steps, p.proposed, p.accepted,
                               100 * p.acceptance(), p.accepted_per_step(), p.tokens_per_step());
    }
  }
  if (!args.jump_forward) return status;
  std::cout << "\nJump-forward: the model's steps when the forced text is appended by jump_forward()\n\n"
               "| format | spelling | vocabulary | document tokens | model steps | saved | jumps | healing |\n"
               "|---|---|---|---|---|---|---|---|\n";
  JumpSavings all;
  for (const SuiteRow& r : rows) {
    const JumpSavings& j = *r.jumps;
    std::cout << fmt::format("| {} | {} | {} | {} | {} | {:.1f} % | {} | {} |\n", r.format, r.spelling, r.vocabulary,
                             j.tokens, j.model_steps, 100 * j.saved(), j.jumps, j.healed);
    all.tokens += j.tokens;
    all.model_steps += j.model_steps;
    all.jumps += j.jumps;
    all.healed += j.healed;
  }
  std::cout << fmt::format("| all | | | {} | {} | {:.1f} % | {} | {} |\n", all.tokens, all.model_steps,
                           100 * all.saved(), all.jumps, all.healed);
  return status;
}

}  // namespace

int run_bench(const BenchArgs& bench_args) {
  BenchArgs args = bench_args;
  if (args.mask_memo == "off") args.mask_memo_bytes = 0;
  return args.suite.empty() ? bench_file(args) : bench_suite(args);
}

int run_compile(const CompileArgs& args) {
  if (is_shared_object(args.file)) {
    std::cerr << "cgram compile: expected a grammar, not a shared object\n";
    return kExitUsage;
  }
  VocabArgs table_args = args;
  table_args.eager_index = true;  // the object holds the whole index
  table_args.tier = "table";
  auto loaded = load(table_args);
  if (!loaded) return 3;
  SharedObjectTimings t;
  auto saved = save_shared_object(*loaded->compiled, args.output, &t);
  if (auto* e = saved.if_error()) {
    print_error(e->message);
    return 3;
  }
  std::cout << fmt::format(
      "{}: {} for {} ({} ids), {:.2f} MB\n"
      "compile {:.1f} ms (parse {:.1f}, lower and index {:.1f}), code {:.1f} ms, link {:.1f} ms\n",
      args.output, args.file, loaded->vocab->name(), loaded->vocab->size(), t.bytes / 1e6,
      loaded->parse_ms + loaded->compile_ms + t.codegen_ms + t.link_ms, loaded->parse_ms, loaded->compile_ms,
      t.codegen_ms, t.link_ms);
  return 0;
}

int run_vocab_build(const VocabBuildArgs& args) {
  VocabularyResult vocab = Vocabulary::load(args.vocab);
  if (auto* e = vocab.if_error()) {
    print_error(e->message);
    return 3;
  }
  print_warnings(**vocab);
  std::string output = args.output.empty() ? VocabularyContext::saved_path(**vocab) : args.output;
  if (output.empty()) {
    print_error("say where to write it: -o FILE, or set CGRAM_VOCAB_DIR (where every command looks for it)");
    return kExitUsage;
  }
  auto encoder = Encoder::create(*vocab);
  if (auto* e = encoder.if_error()) {
    print_error(e->message);
    return 3;
  }
  auto start = Clock::now();
  auto pairs = CanonicalPairs::create(*vocab, **encoder);
  if (auto* e = pairs.if_error()) {
    print_error(e->message);
    return 3;
  }
  const double build_ms = ms_since(start);
  const std::string bytes = (*pairs)->save();
  if (const int status = write_output(output, bytes); status != 0) return status;
  // Read back as a server would, timed.
  auto load_start = Clock::now();
  auto loaded = CanonicalPairs::load(*vocab, **encoder, bytes);
  const double load_ms = ms_since(load_start);
  if (auto* e = loaded.if_error()) {
    print_error(e->message);
    return 3;
  }
  std::cout << fmt::format("{}: {} classes of piece cuts, {:.1f} MB in memory, built in {:.0f} ms; wrote {} ({:.1f} MB, "
                           "loads in {:.1f} ms)\n",
                           (*vocab)->name(), (*pairs)->classes(), (*pairs)->memory_bytes() / 1e6, build_ms, output,
                           bytes.size() / 1e6, load_ms);
  return 0;
}

}  // namespace cgram::cli
