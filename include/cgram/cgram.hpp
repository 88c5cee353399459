// cgram.hpp: a header-only C++ API over the C API of libcgram.so (cgram.h).
//
// It includes cgram.h and standard headers only: no internal cgram type
// appears here, so it is as stable as the C ABI under it. C++17 or later.
//
//   cgram::Vocabulary  a tokenizer vocabulary             (cgram_vocab)
//   cgram::Grammar     a grammar compiled for a vocabulary (cgram_grammar)
//   cgram::Matcher     the state of one sequence           (cgram_matcher)
//   cgram::ThreadPool  masks of many matchers at once      (cgram_thread_pool)
//
// ERRORS are values, as at the C boundary: a call that can fail returns a
// Result<T> (a value, or an Error with the status and cgram_last_error()'s
// message). Nothing here throws. Handles are move-only (std::unique_ptr over
// the C free functions); a moved-from handle is empty, and calls on it give
// CGRAM_ERROR_INVALID_ARGUMENT. Handles share what they are built on (a
// matcher keeps its grammar alive, a grammar its vocabulary), so they may be
// destroyed in any order. Threads: as cgram.h says (vocabularies and grammars
// from any thread; a matcher from one thread at a time).
//
// The names live in cgram::api_v1 (an inline namespace): cgram::Matcher here
// is never the library's internal class of the same name.
#ifndef CGRAM_HPP
#define CGRAM_HPP

#include <cgram.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace cgram {
inline namespace api_v1 {

// A pointer and a count (std::span's shape, for C++17): made from any
// contiguous container (std::vector, std::array, std::span, a C array), a
// braced list (read-only spans), or a pointer and a size. It owns nothing.
template <class T>
class Span {
 public:
  constexpr Span() noexcept = default;
  constexpr Span(T* data, size_t size) noexcept : data_(data), size_(size) {}
  template <class C, class = std::enable_if_t<std::is_convertible_v<decltype(std::data(std::declval<C&>())), T*>>>
  constexpr Span(C&& c) noexcept : data_(std::data(c)), size_(std::size(c)) {}  // NOLINT: implicit, as std::span
  template <class U = T, class = std::enable_if_t<std::is_const_v<U>>>
  constexpr Span(std::initializer_list<std::remove_const_t<U>> list) noexcept
      : data_(std::data(list)), size_(list.size()) {}  // the list lives to the end of the full-expression
  constexpr T* data() const noexcept { return data_; }
  constexpr size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr T* begin() const noexcept { return data_; }
  constexpr T* end() const noexcept { return data_ + size_; }
  constexpr T& operator[](size_t i) const noexcept { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};
using TokenIds = Span<const uint32_t>;

// A failed call: its status and message (cgram_last_error() when it failed).
class Error {
 public:
  Error() = default;
  Error(cgram_status status, std::string message) : status_(status), message_(std::move(message)) {}
  // The status `status` with this thread's cgram_last_error() as its message.
  static Error last(cgram_status status) { return Error(status, cgram_last_error()); }
  cgram_status status() const noexcept { return status_; }
  const std::string& message() const noexcept { return message_; }
  // The status's constant name ("CGRAM_ERROR_GRAMMAR", ...).
  std::string_view name() const noexcept { return cgram_status_name(status_); }
  // "NAME: message".
  std::string to_string() const { return std::string(name()) + ": " + message_; }

 private:
  cgram_status status_ = CGRAM_OK;
  std::string message_;
};

namespace detail {
[[noreturn]] inline void no_value(const Error& error) {
  std::fprintf(stderr, "cgram: value() of a failed Result: %s\n", error.to_string().c_str());
  std::abort();
}
}  // namespace detail

// A value or an Error. value() on an error is a programming error: it aborts
// with the message (check ok() first); operator* and -> do not check.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit
  Result(Error error) : error_(std::move(error)) {}  // NOLINT: implicit
  bool ok() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  T& operator*() & noexcept { return *value_; }
  const T& operator*() const& noexcept { return *value_; }
  T&& operator*() && noexcept { return std::move(*value_); }
  T* operator->() noexcept { return &*value_; }
  const T* operator->() const noexcept { return &*value_; }
  T& value() & { return ok() ? *value_ : (detail::no_value(error_), *value_); }
  const T& value() const& { return ok() ? *value_ : (detail::no_value(error_), *value_); }
  T&& value() && { return std::move(value()); }
  // The error (status CGRAM_OK and no message when ok()).
  const Error& error() const noexcept { return error_; }

 private:
  std::optional<T> value_;
  Error error_;
};

// The result of a call that gives nothing back but may fail.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}  // NOLINT: implicit
  bool ok() const noexcept { return error_.status() == CGRAM_OK; }
  explicit operator bool() const noexcept { return ok(); }
  void value() const { if (!ok()) detail::no_value(error_); }
  const Error& error() const noexcept { return error_; }

 private:
  Error error_;
};

namespace detail {
template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const noexcept { Free(p); }
};
inline Result<void> check(cgram_status status) { return status == CGRAM_OK ? Result<void>() : Error::last(status); }
// `value` when the call succeeded, else the error it left.
template <class T>
Result<T> checked(cgram_status status, T value) {
  return status == CGRAM_OK ? Result<T>(std::move(value)) : Error::last(status);
}
// NULL for "" (the C API's default), else the string.
inline const char* or_null(const std::string& s) noexcept { return s.empty() ? nullptr : s.c_str(); }
}  // namespace detail

// cgram's version, "MAJOR.MINOR.PATCH".
inline std::string_view version() noexcept { return cgram_version(); }
// The library's ABI version (CGRAM_ABI_VERSION when header and library match).
inline uint32_t abi_version() noexcept { return cgram_abi_version(); }
// Whether the library loaded is the one this header describes.
inline bool abi_matches() noexcept { return cgram_abi_version() == CGRAM_ABI_VERSION; }

// ---------------------------------------------------------------------------

class Vocabulary {
 public:
  // A vocabulary file (tokenizer.json, tiktoken, GGUF, JSON token list);
  // `eos`, when not empty, replaces the end-of-sequence ids found in it.
  static Result<Vocabulary> load(std::string_view path, TokenIds eos = {}) {
    cgram_vocab* out = nullptr;
    cgram_status s = cgram_vocab_load(std::string(path).c_str(), eos.data(), eos.size(), &out);
    return detail::checked(s, Vocabulary(out));
  }
  // The same formats from memory; `name` appears in messages, `config_json`
  // is a tokenizer_config.json's text (either may be empty).
  static Result<Vocabulary> from_memory(std::string_view data, std::string_view name = {},
                                        std::string_view config_json = {}, TokenIds eos = {}) {
    const std::string n(name), c(config_json);
    cgram_vocab* out = nullptr;
    cgram_status s = cgram_vocab_from_memory(data.data(), data.size(), detail::or_null(n), detail::or_null(c),
                                             eos.data(), eos.size(), &out);
    return detail::checked(s, Vocabulary(out));
  }
  // The vocabulary compiled into cgram (Phi-3, 32,064 ids).
  static Result<Vocabulary> bundled(TokenIds eos = {}) {
    cgram_vocab* out = nullptr;
    cgram_status s = cgram_vocab_bundled(eos.data(), eos.size(), &out);
    return detail::checked(s, Vocabulary(out));
  }
  // A plain list: token i has the bytes tokens[i]; `eos` are its ends of
  // sequence, `special` its other ids that are never text.
  static Result<Vocabulary> from_tokens(Span<const std::string_view> tokens, TokenIds eos = {},
                                        TokenIds special = {}) {
    std::vector<const char*> bytes(tokens.size());
    std::vector<size_t> lengths(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      bytes[i] = tokens[i].data() ? tokens[i].data() : "";
      lengths[i] = tokens[i].size();
    }
    cgram_vocab* out = nullptr;
    cgram_status s = cgram_vocab_from_tokens(bytes.data(), lengths.data(), tokens.size(), eos.data(), eos.size(),
                                             special.data(), special.size(), &out);
    return detail::checked(s, Vocabulary(out));
  }
  // A new vocabulary: this one with `eos` added to its end-of-sequence ids.
  Result<Vocabulary> with_eos(TokenIds eos) const {
    cgram_vocab* out = nullptr;
    cgram_status s = cgram_vocab_with_eos(handle_.get(), eos.data(), eos.size(), &out);
    return detail::checked(s, Vocabulary(out));
  }

  // The number of token ids (0 for an empty handle).
  size_t size() const noexcept { return cgram_vocab_size(handle_.get()); }
  // The end-of-sequence ids, ascending (none for an empty handle).
  std::vector<uint32_t> eos_ids() const {
    std::vector<uint32_t> ids(8);
    size_t count = 0;
    cgram_status s = cgram_vocab_eos_ids(handle_.get(), ids.data(), ids.size(), &count);
    if (s == CGRAM_ERROR_BUFFER_TOO_SMALL) {
      ids.resize(count);
      s = cgram_vocab_eos_ids(handle_.get(), ids.data(), ids.size(), &count);
    }
    ids.resize(s == CGRAM_OK ? count : 0);
    return ids;
  }
  // The exact bytes of token `id`; they live as long as the vocabulary.
  Result<std::string_view> token_bytes(uint32_t id) const {
    const char* bytes = nullptr;
    size_t length = 0;
    cgram_status s = cgram_vocab_token_bytes(handle_.get(), id, &bytes, &length);
    return detail::checked(s, std::string_view(bytes, length));
  }
  // Whether token `id` is special (end of sequence, control, no bytes): never text.
  Result<bool> is_special(uint32_t id) const {
    bool special = false;
    cgram_status s = cgram_vocab_is_special(handle_.get(), id, &special);
    return detail::checked(s, special);
  }

  // The C handle (still owned here), for calls this header does not wrap;
  // a C handle made elsewhere is adopted by the explicit constructor.
  const cgram_vocab* native() const noexcept { return handle_.get(); }
  Vocabulary() noexcept = default;  // an empty handle
  explicit Vocabulary(cgram_vocab* owned) noexcept : handle_(owned) {}  // takes ownership

 private:
  std::unique_ptr<cgram_vocab, detail::Deleter<cgram_vocab, cgram_vocab_free>> handle_;
};

// Who answers a matcher's table lookups: the tables, or kernels the LLVM JIT compiles now.
enum class Tier { table = CGRAM_TIER_TABLE, jit = CGRAM_TIER_JIT };

// cgram_compile_options, as C++ (the same fields and defaults).
struct CompileOptions {
  std::string filename;        // for diagnostics and the format (.json a JSON Schema, .gbnf GBNF); "": "grammar.cgram"
  std::string start_rule;      // "": "start"
  bool eager_index = false;    // build the whole token index now rather than on first use
  Tier tier = Tier::table;
  bool canonical = false;      // only the tokenizer's own tokenization (merge-based vocabularies)
  size_t max_memory_bytes = 0; // the memory compiling may take; 0: the default, 1 GiB
  bool any_property_order = false;  // a JSON Schema's object members in any order (docs/JSON_SCHEMA.md)
};

class Grammar {
 public:
  // Compiles `source` for `vocab`. On failure the Error's message is the
  // rendered diagnostics (CGRAM_ERROR_GRAMMAR: "file:line:col: error: ...",
  // the line and a caret) or says what failed; a grammar that compiles has
  // its warnings in diagnostics().
  static Result<Grammar> compile(const Vocabulary& vocab, std::string_view source,
                                 const CompileOptions& options = {}) {
    cgram_compile_options o;
    cgram_compile_options_init(&o);
    o.filename = detail::or_null(options.filename);
    o.start_rule = detail::or_null(options.start_rule);
    o.eager_index = options.eager_index;
    o.tier = static_cast<cgram_tier>(options.tier);
    o.canonical = options.canonical;
    o.max_memory_bytes = options.max_memory_bytes;
    o.any_property_order = options.any_property_order;
    cgram_grammar* out = nullptr;
    char* diagnostics = nullptr;
    cgram_status s = cgram_grammar_compile(vocab.native(), source.data() ? source.data() : "", source.size(), &o, &out,
                                           &diagnostics);
    std::string text = diagnostics ? diagnostics : "";
    cgram_string_free(diagnostics);
    if (s != CGRAM_OK) {  // a grammar error's message is its diagnostics; others keep the warnings
      Error error = Error::last(s);
      if (s == CGRAM_ERROR_GRAMMAR || text.empty()) return error;
      return Error(s, error.message() + "\n" + text);
    }
    Grammar grammar(out);
    grammar.diagnostics_ = std::move(text);
    return Result<Grammar>(std::move(grammar));
  }
  // Loads an AOT object (`cgram compile`, save()) made for `vocab`.
  static Result<Grammar> load(std::string_view path, const Vocabulary& vocab) {
    cgram_grammar* out = nullptr;
    cgram_status s = cgram_load(std::string(path).c_str(), vocab.native(), &out);
    return detail::checked(s, Grammar(out));
  }
  // Writes the grammar as an AOT shared object (needs a linker).
  Result<void> save(std::string_view path) const {
    return detail::check(cgram_save(handle_.get(), std::string(path).c_str()));
  }

  // Which code matchers run: "table", "jit" or "aot" ("" for an empty handle).
  std::string_view tier() const noexcept {
    const char* t = cgram_grammar_tier(handle_.get());
    return t ? t : "";
  }
  // uint32_t words in one mask: (vocabulary size + 31) / 32.
  size_t mask_words() const noexcept { return cgram_grammar_mask_words(handle_.get()); }
  // A new handle on the vocabulary the grammar was compiled for.
  Result<Vocabulary> vocabulary() const {
    cgram_vocab* out = nullptr;
    cgram_status s = cgram_grammar_vocab(handle_.get(), &out);
    return detail::checked(s, Vocabulary(out));
  }
  // The warnings compile() gave ("" when none).
  const std::string& diagnostics() const noexcept { return diagnostics_; }

  const cgram_grammar* native() const noexcept { return handle_.get(); }
  Grammar() noexcept = default;  // an empty handle
  explicit Grammar(cgram_grammar* owned) noexcept : handle_(owned) {}  // takes ownership

 private:
  std::unique_ptr<cgram_grammar, detail::Deleter<cgram_grammar, cgram_grammar_free>> handle_;
  std::string diagnostics_;
};

// What advance() did with a token.
enum class Advance {
  ongoing = CGRAM_ADVANCE_ONGOING,    // accepted; the sequence goes on
  finished = CGRAM_ADVANCE_FINISHED,  // accepted an end of sequence: the matcher is finished
  rejected = CGRAM_ADVANCE_REJECTED   // not allowed here; the state is unchanged
};

// cgram_matcher_options, as C++.
struct MatcherOptions {
  size_t max_rollback_tokens = SIZE_MAX; // the most tokens a rollback may undo; SIZE_MAX: no bound
  size_t max_work_per_byte = 0;          // the parser's work budget per byte; 0: the default
};

// What jump_forward() found: take back `rollback` tokens, then accept `tokens`.
struct JumpForward {
  size_t rollback = 0;
  std::vector<uint32_t> tokens;
};

class Matcher {
 public:
  // A matcher at the start of a sequence of `grammar`.
  static Result<Matcher> create(const Grammar& grammar, const MatcherOptions& options = {}) {
    cgram_matcher_options o;
    cgram_matcher_options_init(&o);
    o.max_rollback_tokens = options.max_rollback_tokens;
    o.max_work_per_byte = options.max_work_per_byte;
    cgram_matcher* out = nullptr;
    cgram_status s = cgram_matcher_new_with_options(grammar.native(), &o, &out);
    return detail::checked(s, Matcher(out));
  }
  // An independent copy of the state (beam search, speculation).
  Result<Matcher> clone() const {
    cgram_matcher* out = nullptr;
    cgram_status s = cgram_matcher_clone(handle_.get(), &out);
    return detail::checked(s, Matcher(out));
  }

  // Accepts `token` when allowed (rejected is a result, not an error; the
  // state is then unchanged). CGRAM_ERROR_STATE once finished.
  Result<Advance> advance(uint32_t token) {
    cgram_advance_result r = CGRAM_ADVANCE_REJECTED;
    cgram_status s = cgram_matcher_advance(handle_.get(), token, &r);
    return detail::checked(s, static_cast<Advance>(r));
  }
  // How many of `tokens`, in order, advance() would accept from here; nothing changes.
  Result<size_t> validate_tokens(TokenIds tokens) {
    size_t accepted = 0;
    cgram_status s = cgram_matcher_validate_tokens(handle_.get(), tokens.data(), tokens.size(), &accepted);
    return detail::checked(s, accepted);
  }
  // The allowed next tokens: bit t % 32 of word t / 32. words.size() >= mask_words().
  Result<void> fill_mask(Span<uint32_t> words) {
    return detail::check(cgram_matcher_fill_mask(handle_.get(), words.data(), words.size()));
  }
  // The same, into a new vector of mask_words() words.
  Result<std::vector<uint32_t>> mask() {
    std::vector<uint32_t> words(mask_words());
    cgram_status s = cgram_matcher_fill_mask(handle_.get(), words.data(), words.size());
    return detail::checked(s, std::move(words));
  }
  // Row `row` of a server's bitmask of rows of `row_words` words (the words
  // past the mask are cleared).
  Result<void> fill_bitmask(Span<uint32_t> bitmask, size_t row_words, size_t row) {
    size_t rows = row_words ? bitmask.size() / row_words : 0;
    return detail::check(cgram_matcher_fill_bitmask(handle_.get(), bitmask.data(), rows, row_words, row));
  }
  // Whether `token` is allowed next (false once finished).
  Result<bool> is_allowed(uint32_t token) {
    bool allowed = false;
    cgram_status s = cgram_matcher_is_allowed(handle_.get(), token, &allowed);
    return detail::checked(s, allowed);
  }
  // Whether an end-of-sequence token is allowed now (false once finished).
  Result<bool> can_end() {
    bool can = false;
    cgram_status s = cgram_matcher_can_end(handle_.get(), &can);
    return detail::checked(s, can);
  }
  // The bytes that must come next whatever the tokenization (at most max_bytes of them).
  Result<std::string> forced_text(size_t max_bytes = 4096) {
    std::string text(max_bytes, '\0');
    size_t length = 0;
    cgram_status s = cgram_matcher_forced_text(handle_.get(), max_bytes ? text.data() : nullptr, max_bytes, &length);
    if (s != CGRAM_OK) return Error::last(s);
    text.resize(length);
    return Result<std::string>(std::move(text));
  }
  // Jump-forward with token healing (nothing changes; apply it with
  // rollback() and advance()). CGRAM_ERROR_VOCABULARY without an encoder.
  Result<JumpForward> jump_forward() {
    JumpForward jump;
    jump.tokens.resize(64);
    size_t count = 0;
    cgram_status s = cgram_matcher_jump_forward(handle_.get(), jump.tokens.data(), jump.tokens.size(), &count,
                                                &jump.rollback);
    if (s == CGRAM_ERROR_BUFFER_TOO_SMALL) {
      jump.tokens.resize(count);
      s = cgram_matcher_jump_forward(handle_.get(), jump.tokens.data(), jump.tokens.size(), &count, &jump.rollback);
    }
    if (s != CGRAM_OK) return Error::last(s);
    jump.tokens.resize(count);
    return Result<JumpForward>(std::move(jump));
  }
  // Undoes the last n accepted tokens (n <= rollback_depth(); else nothing is undone).
  Result<void> rollback(size_t n) { return detail::check(cgram_matcher_rollback(handle_.get(), n)); }
  // Back to the start of a sequence.
  Result<void> reset() { return detail::check(cgram_matcher_reset(handle_.get())); }
  // Sets the logits of the tokens not allowed now to -inf (logits.size() >= vocabulary size).
  Result<void> update_logits(Span<float> logits) {
    return detail::check(cgram_matcher_update_logits(handle_.get(), logits.data(), logits.size()));
  }
  // advance(token), then, when ongoing, the disallowed logits of the new state to -inf.
  Result<Advance> modify_possible_logits(uint32_t token, Span<float> logits) {
    cgram_advance_result r = CGRAM_ADVANCE_REJECTED;
    cgram_status s = cgram_matcher_modify_possible_logits(handle_.get(), token, logits.data(), logits.size(), &r);
    return detail::checked(s, static_cast<Advance>(r));
  }

  // Whether an end of sequence was accepted (false for an empty handle).
  bool is_finished() const noexcept { return cgram_matcher_is_finished(handle_.get()); }
  // Tokens accepted since the start.
  size_t tokens_accepted() const noexcept { return cgram_matcher_tokens_accepted(handle_.get()); }
  // How many tokens rollback() can undo now.
  size_t rollback_depth() const noexcept { return cgram_matcher_rollback_depth(handle_.get()); }
  // uint32_t words in one mask.
  size_t mask_words() const noexcept { return cgram_matcher_mask_words(handle_.get()); }

  cgram_matcher* native() const noexcept { return handle_.get(); }
  Matcher() noexcept = default;  // an empty handle
  explicit Matcher(cgram_matcher* owned) noexcept : handle_(owned) {}  // takes ownership

 private:
  std::unique_ptr<cgram_matcher, detail::Deleter<cgram_matcher, cgram_matcher_free>> handle_;
};

// Threads that fill the masks of many matchers at once (calls take turns).
class ThreadPool {
 public:
  // `threads` in all, the calling thread included (0: one per core).
  static Result<ThreadPool> create(size_t threads = 0) {
    cgram_thread_pool* out = nullptr;
    cgram_status s = cgram_thread_pool_new(threads, &out);
    return detail::checked(s, ThreadPool(out));
  }
  // Row i of `masks` (mask_words words each) gets matchers[i]'s mask; every
  // matcher has the same mask size and appears once.
  Result<void> fill_masks(Span<Matcher* const> matchers, Span<uint32_t> masks) {
    std::vector<cgram_matcher*> raw = natives(matchers);
    return detail::check(cgram_fill_masks(handle_.get(), raw.data(), raw.size(), masks.data(), masks.size()));
  }
  // Row rows[i] (row i when `rows` is empty) of a bitmask of rows of
  // `row_words` words gets matchers[i]'s mask; grammars may differ.
  Result<void> fill_bitmask(Span<Matcher* const> matchers, Span<const size_t> rows, Span<uint32_t> bitmask,
                            size_t row_words) {
    if (!rows.empty() && rows.size() != matchers.size())
      return Error(CGRAM_ERROR_INVALID_ARGUMENT, "ThreadPool::fill_bitmask: " + std::to_string(rows.size()) +
                                                     " rows for " + std::to_string(matchers.size()) + " matchers");
    std::vector<cgram_matcher*> raw = natives(matchers);
    size_t n_rows = row_words ? bitmask.size() / row_words : 0;
    return detail::check(cgram_fill_bitmask(handle_.get(), raw.data(), rows.empty() ? nullptr : rows.data(), raw.size(),
                                            bitmask.data(), n_rows, row_words));
  }

  cgram_thread_pool* native() const noexcept { return handle_.get(); }
  ThreadPool() noexcept = default;  // an empty handle
  explicit ThreadPool(cgram_thread_pool* owned) noexcept : handle_(owned) {}  // takes ownership

 private:
  static std::vector<cgram_matcher*> natives(Span<Matcher* const> matchers) {
    std::vector<cgram_matcher*> raw(matchers.size());
    for (size_t i = 0; i < matchers.size(); ++i) raw[i] = matchers[i] ? matchers[i]->native() : nullptr;
    return raw;
  }
  std::unique_ptr<cgram_thread_pool, detail::Deleter<cgram_thread_pool, cgram_thread_pool_free>> handle_;
};

}  // namespace api_v1
}  // namespace cgram

#endif  // CGRAM_HPP
