// The C API (cgram.h) over the C++ runtime.
//
// The boundary rules: every argument is checked here, before any C++ call
// (the C++ classes trust their callers: a short span or an out-of-range id
// there is undefined behaviour); every exception is caught here and becomes
// a status and a message; nothing aborts. Handles are small structs that
// hold the C++ objects (shared_ptrs for what is shared); they are created
// with std::make_unique and released to the caller, who gives them back to
// the matching cgram_*_free, which puts them back into a unique_ptr.
#include "cgram.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "batch.h"
#include "grammar.h"
#include "compiled_grammar.h"
#include "compiler.h"
#include "matcher.h"
#include "shared_object.h"
#include "tool_calls.h"
#include "version.h"
#include "vocabulary.h"

static_assert(CGRAM_ABI_VERSION == cgram::kAbiVersion, "cgram.h and support/version.h.in disagree on the ABI version");

struct cgram_vocab {
  std::shared_ptr<const cgram::Vocabulary> vocab;
};

struct cgram_grammar {
  explicit cgram_grammar(std::shared_ptr<const cgram::CompiledGrammar> grammar) : compiled(std::move(grammar)) {}
  explicit cgram_grammar(std::shared_ptr<const cgram::ToolCallsGrammar> grammar) : tools(std::move(grammar)) {}
  std::shared_ptr<const cgram::CompiledGrammar> compiled;  // null for a tool list compiled one tool at a time
  std::shared_ptr<const cgram::ToolCallsGrammar> tools;    // that list
  size_t mask_words() const { return tools ? tools->mask_words() : compiled->mask_words(); }
};

struct cgram_matcher {
  // Built in place: a Matcher has no move constructor, only a copy.
  explicit cgram_matcher(std::shared_ptr<const cgram::CompiledGrammar> grammar,
                         const cgram::MatcherOptions& options = {})
      : matcher(std::move(grammar), options) {}
  explicit cgram_matcher(std::shared_ptr<const cgram::ToolCallsGrammar> grammar)
      : matcher(nullptr), tools(std::in_place, std::move(grammar)) {}
  cgram_matcher(const cgram_matcher& other) = default;
  // f(the matcher in use): a grammar's, or a tool list's cut one at a time.
  template <class F>
  decltype(auto) visit(F&& f) {
    return tools ? f(*tools) : f(matcher);
  }
  template <class F>
  decltype(auto) visit(F&& f) const {
    return tools ? f(*tools) : f(matcher);
  }
  cgram::Matcher matcher;  // holds a shared_ptr to its compiled grammar (none for a tool list's)
  std::optional<cgram::ToolCallsMatcher> tools;
};

struct cgram_thread_pool {
  explicit cgram_thread_pool(size_t threads) : pool(threads) {}
  cgram::ThreadPool pool;
  // ThreadPool::run serves one caller at a time; the C API lets any
  // thread call, so the calls take turns here.
  std::mutex mutex;
};

namespace {

// The per-thread message of the last failing call. When even the message
// cannot be stored (out of memory), a fixed text stands in.
struct LastError {
  std::string text;
  const char* fixed = "";
  bool use_fixed = true;
};
thread_local LastError last_error;

cgram_status record(cgram_status status, std::string_view message) noexcept {
  try {
    last_error.text.assign(message);
    last_error.use_fixed = false;
  } catch (...) {
    last_error.fixed = "out of memory (while recording an error message)";
    last_error.use_fixed = true;
  }
  return status;
}

// One C API call: its name (every message starts with it) and the ways it fails.
class Call {
 public:
  explicit Call(const char* function) : function_(function) {}

  template <class... Args>
  cgram_status fail(cgram_status status, fmt::format_string<Args...> format, Args&&... args) const noexcept {
    try {
      return record(status, fmt::format("{}: {}", function_, fmt::format(format, std::forward<Args>(args)...)));
    } catch (...) {
      return record(status, function_);
    }
  }
  template <class... Args>
  cgram_status invalid(fmt::format_string<Args...> format, Args&&... args) const noexcept {
    return fail(CGRAM_ERROR_INVALID_ARGUMENT, format, std::forward<Args>(args)...);
  }
  cgram_status null(const char* argument) const noexcept { return invalid("{} is NULL", argument); }
  // The one place a cgram::Error becomes a status: `stage` says what failed
  // (reading the vocabulary, compiling, loading), unless the code says more.
  cgram_status error(cgram_status stage, cgram::ErrorCode code, std::string_view message) const noexcept {
    switch (code) {
      case cgram::ErrorCode::OutOfMemory:
        return fail(CGRAM_ERROR_OUT_OF_MEMORY, "{}", message);
      case cgram::ErrorCode::Internal:
        return fail(CGRAM_ERROR_INTERNAL, "{}", message);
      default:
        return fail(stage, "{}", message);
    }
  }
  cgram_status error(cgram_status stage, const cgram::Error& e) const noexcept {
    return error(stage, e.code, e.message);
  }

 private:
  const char* function_;
};

// Runs a call's body; no exception leaves it.
template <class Body>
cgram_status guarded(const char* function, Body&& body) noexcept {
  Call call(function);
  try {
    return body(call);
  } catch (const std::bad_alloc&) {
    return call.fail(CGRAM_ERROR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return call.fail(CGRAM_ERROR_INTERNAL, "unexpected error (a bug in cgram): {}", e.what());
  } catch (...) {
    return call.fail(CGRAM_ERROR_INTERNAL, "unexpected error (a bug in cgram)");
  }
}

// A new handle, owned by the caller from here on.
template <class Handle, class... Args>
cgram_status hand_out(Handle** out, Args&&... args) {
  auto handle = std::make_unique<Handle>(std::forward<Args>(args)...);
  *out = handle.release();
  return CGRAM_OK;
}

// A copy of `text` that C frees with cgram_string_free (free()).
char* c_string(std::string_view text) {
  auto* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (!copy) throw std::bad_alloc();
  std::memcpy(copy, text.data(), text.size());
  copy[text.size()] = '\0';
  return copy;
}

// The end-of-sequence override of the vocabulary loaders.
std::variant<cgram::VocabularyOptions, cgram_status> eos_options(const Call& call, const uint32_t* eos_ids,
                                                                 size_t n_eos) {
  cgram::VocabularyOptions options;
  if (n_eos == 0) return options;
  if (!eos_ids) return call.invalid("eos_ids is NULL but n_eos is {}", n_eos);
  options.eos_ids = std::vector<uint32_t>(eos_ids, eos_ids + n_eos);
  return options;
}

cgram_status hand_out_vocab(const Call& call, cgram::VocabularyResult result, cgram_vocab** out) {
  if (auto* error = result.if_error()) return call.error(CGRAM_ERROR_VOCABULARY, *error);
  return hand_out(out, std::move(*result));
}

// One LLJIT for the process, made on first use (thread-safe static);
// compiled kernels keep its state alive for as long as they are used.
template <class M>
cgram_status check_token(const Call& call, const M& matcher, uint32_t token) {
  size_t size = matcher.grammar().vocabulary().size();
  if (token >= size) return call.invalid("token id {} is not in the vocabulary ({} ids)", token, size);
  return CGRAM_OK;
}

template <class M>
cgram_status check_logits(const Call& call, const M& matcher, const float* logits, size_t n_logits) {
  if (!logits) return call.null("logits");
  size_t size = matcher.grammar().vocabulary().size();
  if (n_logits < size) return call.invalid("n_logits is {}; the vocabulary has {} ids", n_logits, size);
  return CGRAM_OK;
}

// A matcher that hit one of its limits holds a sticky error: every call on
// it says so.
template <class M>
cgram_status limit_status(const Call& call, const M& matcher) {
  if (!matcher.has_error()) return CGRAM_OK;
  return call.fail(CGRAM_ERROR_LIMIT, "{} (reset or roll back the matcher to go on)", matcher.error());
}

// A server's bitmask, n_rows rows of row_words words, once its pointer and
// size are checked.
cgram_status bitmask_view(const Call& call, uint32_t* bitmask, size_t n_rows, size_t row_words, cgram::Bitmask& view) {
  if (!bitmask) return call.null("bitmask");
  if (n_rows > 0 && row_words > SIZE_MAX / n_rows)
    return call.invalid("n_rows {} times row_words {} overflows", n_rows, row_words);
  view = {std::span<uint32_t>(bitmask, n_rows * row_words), row_words};
  return CGRAM_OK;
}

cgram_advance_result to_c(cgram::AdvanceResult result) {
  switch (result) {
    case cgram::AdvanceResult::Ongoing: return CGRAM_ADVANCE_ONGOING;
    case cgram::AdvanceResult::Finished: return CGRAM_ADVANCE_FINISHED;
    case cgram::AdvanceResult::Rejected: break;
  }
  return CGRAM_ADVANCE_REJECTED;
}

// cgram_grammar_compile with options->tool_cut: a tool list compiled one
// tool at a time.
cgram_status compile_tool_cut(const Call& call, const cgram_vocab* vocab, const cgram::CompileRequest& request,
                              const cgram_compile_options* options, cgram_grammar** out, char** diagnostics) {
  if (!options->tool_format) return call.invalid("options->tool_cut needs options->tool_format (a tool list)");
  if (options->canonical) return call.invalid("options->tool_cut is not canonical: compile the list whole");
  if (request.tier != cgram::Tier::Table) return call.invalid("options->tool_cut takes the table tier");
  cgram::ToolCallsOptions tool_options;
  tool_options.parse = request.parse;
  tool_options.compile = request.compile;
  auto grammar = cgram::ToolCallsGrammar::create(request.text, request.filename, vocab->vocab, tool_options);
  if (!grammar) {
    if (diagnostics) *diagnostics = c_string(grammar.error().message);
    return call.fail(CGRAM_ERROR_GRAMMAR, "{}", grammar.error().message);
  }
  return hand_out(out, std::shared_ptr<const cgram::ToolCallsGrammar>(std::move(*grammar)));
}

}  // namespace

extern "C" {

// ---------------------------------------------------------------------------
// Errors, strings, versions

const char* cgram_last_error(void) { return last_error.use_fixed ? last_error.fixed : last_error.text.c_str(); }

const char* cgram_status_name(cgram_status status) {
  switch (status) {
    case CGRAM_OK: return "CGRAM_OK";
    case CGRAM_ERROR_INVALID_ARGUMENT: return "CGRAM_ERROR_INVALID_ARGUMENT";
    case CGRAM_ERROR_VOCABULARY: return "CGRAM_ERROR_VOCABULARY";
    case CGRAM_ERROR_GRAMMAR: return "CGRAM_ERROR_GRAMMAR";
    case CGRAM_ERROR_COMPILE: return "CGRAM_ERROR_COMPILE";
    case CGRAM_ERROR_LOAD: return "CGRAM_ERROR_LOAD";
    case CGRAM_ERROR_STATE: return "CGRAM_ERROR_STATE";
    case CGRAM_ERROR_BUFFER_TOO_SMALL: return "CGRAM_ERROR_BUFFER_TOO_SMALL";
    case CGRAM_ERROR_OUT_OF_MEMORY: return "CGRAM_ERROR_OUT_OF_MEMORY";
    case CGRAM_ERROR_INTERNAL: return "CGRAM_ERROR_INTERNAL";
    case CGRAM_ERROR_LIMIT: return "CGRAM_ERROR_LIMIT";
  }
  return "unknown status";
}

void cgram_string_free(char* string) { std::free(string); }

const char* cgram_version(void) { return cgram::kVersion; }

uint32_t cgram_abi_version(void) { return cgram::kAbiVersion; }

// ---------------------------------------------------------------------------
// Vocabularies

cgram_status cgram_vocab_load(const char* path, const uint32_t* eos_ids, size_t n_eos, cgram_vocab** out) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!out) return call.null("out");
    if (!path) return call.null("path");
    auto options = eos_options(call, eos_ids, n_eos);
    if (auto* status = std::get_if<cgram_status>(&options)) return *status;
    return hand_out_vocab(call, cgram::Vocabulary::load(path, std::get<cgram::VocabularyOptions>(options)), out);
  });
}

cgram_status cgram_vocab_from_memory(const void* data, size_t length, const char* name, const char* config_json,
                                     const uint32_t* eos_ids, size_t n_eos, cgram_vocab** out) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!out) return call.null("out");
    if (!data) return call.null("data");
    auto options = eos_options(call, eos_ids, n_eos);
    if (auto* status = std::get_if<cgram_status>(&options)) return *status;
    std::optional<std::string> config;
    if (config_json) config = config_json;
    std::string_view content(static_cast<const char*>(data), length);
    return hand_out_vocab(call,
                          cgram::Vocabulary::from_memory(content, name ? name : "<memory>",
                                                         std::get<cgram::VocabularyOptions>(options), config),
                          out);
  });
}

cgram_status cgram_vocab_bundled(const uint32_t* eos_ids, size_t n_eos, cgram_vocab** out) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!out) return call.null("out");
    auto options = eos_options(call, eos_ids, n_eos);
    if (auto* status = std::get_if<cgram_status>(&options)) return *status;
    return hand_out_vocab(call, cgram::Vocabulary::bundled(std::get<cgram::VocabularyOptions>(options)), out);
  });
}

cgram_status cgram_vocab_from_tokens(const char* const* tokens, const size_t* lengths, size_t n_tokens,
                                     const uint32_t* eos_ids, size_t n_eos, const uint32_t* special,
                                     size_t n_special, cgram_vocab** out) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!out) return call.null("out");
    if (!tokens && n_tokens > 0) return call.invalid("tokens is NULL but n_tokens is {}", n_tokens);
    if (!eos_ids && n_eos > 0) return call.invalid("eos_ids is NULL but n_eos is {}", n_eos);
    if (!special && n_special > 0) return call.invalid("special is NULL but n_special is {}", n_special);
    // Ids are uint32_t, and the loaders' own bound keeps hostile sizes out.
    const size_t max_tokens = cgram::VocabularyOptions{}.max_tokens;
    if (n_tokens > max_tokens) return call.invalid("n_tokens is {}; at most {} are allowed", n_tokens, max_tokens);
    std::vector<std::string> list;
    list.reserve(n_tokens);
    for (size_t i = 0; i < n_tokens; ++i) {
      if (!tokens[i]) return call.invalid("tokens[{}] is NULL", i);
      list.emplace_back(tokens[i], lengths ? lengths[i] : std::strlen(tokens[i]));
    }
    for (size_t i = 0; i < n_special; ++i)
      if (special[i] >= n_tokens)
        return call.invalid("special[{}] is {}; the list has {} tokens", i, special[i], n_tokens);
    // The list's end-of-sequence ids are checked by the builder.
    return hand_out_vocab(call,
                          cgram::Vocabulary::from_tokens(std::move(list), std::vector<uint32_t>(eos_ids, eos_ids + n_eos),
                                                         std::vector<uint32_t>(special, special + n_special)),
                          out);
  });
}

cgram_status cgram_vocab_with_eos(const cgram_vocab* vocab, const uint32_t* eos_ids, size_t n_eos, cgram_vocab** out) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!vocab) return call.null("vocab");
    if (!out) return call.null("out");
    if (!eos_ids && n_eos > 0) return call.invalid("eos_ids is NULL but n_eos is {}", n_eos);
    return hand_out_vocab(call, vocab->vocab->with_eos_ids(std::span<const uint32_t>(eos_ids, n_eos)), out);
  });
}

void cgram_vocab_free(cgram_vocab* vocab) { std::unique_ptr<cgram_vocab> owned(vocab); }

size_t cgram_vocab_size(const cgram_vocab* vocab) { return vocab ? vocab->vocab->size() : 0; }

cgram_status cgram_vocab_eos_ids(const cgram_vocab* vocab, uint32_t* ids, size_t capacity, size_t* count) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!vocab) return call.null("vocab");
    if (!count) return call.null("count");
    if (!ids && capacity > 0) return call.invalid("ids is NULL but capacity is {}", capacity);
    const std::vector<uint32_t>& eos = vocab->vocab->eos_ids();
    std::copy_n(eos.begin(), std::min(capacity, eos.size()), ids);
    *count = eos.size();
    if (eos.size() > capacity)
      return call.fail(CGRAM_ERROR_BUFFER_TOO_SMALL, "{} end-of-sequence ids; capacity is {}", eos.size(), capacity);
    return CGRAM_OK;
  });
}

cgram_status cgram_vocab_token_bytes(const cgram_vocab* vocab, uint32_t id, const char** bytes, size_t* length) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!vocab) return call.null("vocab");
    if (!bytes) return call.null("bytes");
    if (!length) return call.null("length");
    if (id >= vocab->vocab->size())
      return call.invalid("token id {} is not in the vocabulary ({} ids)", id, vocab->vocab->size());
    std::string_view token = vocab->vocab->bytes(id);
    *bytes = token.data();
    *length = token.size();
    return CGRAM_OK;
  });
}

cgram_status cgram_vocab_is_special(const cgram_vocab* vocab, uint32_t id, bool* special) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!vocab) return call.null("vocab");
    if (!special) return call.null("special");
    if (id >= vocab->vocab->size())
      return call.invalid("token id {} is not in the vocabulary ({} ids)", id, vocab->vocab->size());
    *special = vocab->vocab->is_special(id);
    return CGRAM_OK;
  });
}

// ---------------------------------------------------------------------------
// Compiled grammars

void cgram_compile_options_init(cgram_compile_options* options) {
  if (!options) return;
  *options = cgram_compile_options{};
  options->struct_size = sizeof(cgram_compile_options);
  options->tier = CGRAM_TIER_TABLE;
  options->mask_memo_bytes = cgram::kDefaultMaskMemoBytes;
  options->background_index = true;
}

cgram_status cgram_grammar_compile(const cgram_vocab* vocab, const char* source, size_t source_length,
                                   const cgram_compile_options* options, cgram_grammar** out, char** diagnostics) {
  // Set first, so that the caller may always free it.
  if (diagnostics) *diagnostics = nullptr;
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!vocab) return call.null("vocab");
    if (!source) return call.null("source");
    if (!out) return call.null("out");
    cgram_compile_options defaults;
    cgram_compile_options_init(&defaults);
    if (!options) options = &defaults;
    if (options->struct_size != sizeof(cgram_compile_options))
      return call.invalid("options->struct_size is {}, expected {} (call cgram_compile_options_init)",
                          options->struct_size, sizeof(cgram_compile_options));
    // A C caller may store any int there; in C++ reading a value outside the
    // enumerators through the enum type is undefined, so read the bytes.
    static_assert(sizeof(cgram_tier) == sizeof(int));
    int tier_value;
    std::memcpy(&tier_value, &options->tier, sizeof tier_value);
    if (tier_value != CGRAM_TIER_TABLE && tier_value != CGRAM_TIER_JIT)
      return call.invalid("options->tier is {}: not a cgram_tier", tier_value);

    const size_t max_memory = options->max_memory_bytes ? options->max_memory_bytes : cgram::kDefaultCompileMemoryBytes;
    cgram::CompileRequest request;
    request.text = std::string_view(source, source_length);
    request.filename = options->filename ? options->filename : "grammar.cgram";
    // The format by the filename's extension, as the command line reads it.
    request.parse.format = cgram::grammar_format("auto", request.filename).value_or(cgram::GrammarFormat::Cgram);
    if (options->start_rule) request.parse.start = options->start_rule;
    request.parse.max_memory_bytes = max_memory;
    request.compile.eager_index = options->eager_index;
    request.compile.background_index = options->background_index;
    request.compile.canonical = options->canonical;
    request.compile.max_memory_bytes = max_memory;
    request.compile.mask_memo_bytes = options->mask_memo_bytes;
    request.parse.schema.property_order =
        options->any_property_order ? cgram::JsonPropertyOrder::Any : cgram::JsonPropertyOrder::Schema;
    if (options->tool_format) {
      const std::optional<cgram::ToolFormat> tool_format = cgram::parse_tool_format(options->tool_format);
      if (!tool_format)
        return call.invalid("options->tool_format is '{}': hermes, llama3, qwen, mistral or json-array",
                            options->tool_format);
      request.parse.format = cgram::GrammarFormat::Tools;
      request.parse.tool_format = *tool_format;
    }
    request.tier = options->tier == CGRAM_TIER_JIT ? cgram::Tier::Jit : cgram::Tier::Table;
    if (options->tool_cut) return compile_tool_cut(call, vocab, request, options, out, diagnostics);
    cgram::CompileOutcome compiled = cgram::Compiler().compile(request, vocab->vocab);
    if (compiled.diagnostics && diagnostics) {
      std::string rendered = compiled.diagnostics->render(false);
      if (!rendered.empty()) *diagnostics = c_string(rendered);
    }
    switch (compiled.failure) {
      case cgram::CompileOutcome::Failure::None: break;
      case cgram::CompileOutcome::Failure::Grammar: return call.fail(CGRAM_ERROR_GRAMMAR, "{}", compiled.message);
      case cgram::CompileOutcome::Failure::Compile:
      case cgram::CompileOutcome::Failure::Jit:
        return call.error(CGRAM_ERROR_COMPILE, compiled.code, compiled.message);
    }
    auto& grammar = compiled.grammar;
    return hand_out(out, std::move(grammar));
  });
}

void cgram_grammar_free(cgram_grammar* grammar) { std::unique_ptr<cgram_grammar> owned(grammar); }

const char* cgram_grammar_tier(const cgram_grammar* grammar) {
  if (!grammar) return nullptr;
  return grammar->tools ? "table" : grammar->compiled->tier();
}

size_t cgram_grammar_mask_words(const cgram_grammar* grammar) { return grammar ? grammar->mask_words() : 0; }

cgram_status cgram_grammar_vocab(const cgram_grammar* grammar, cgram_vocab** out) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!grammar) return call.null("grammar");
    if (!out) return call.null("out");
    return hand_out(out, grammar->tools ? grammar->tools->vocabulary_ptr() : grammar->compiled->vocabulary_ptr());
  });
}

cgram_status cgram_save(const cgram_grammar* grammar, const char* path) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!grammar) return call.null("grammar");
    if (!path) return call.null("path");
    if (grammar->tools)
      return call.invalid("a tool list compiled one tool at a time (tool_cut) cannot be saved: compile it whole");
    auto saved = cgram::save_shared_object(*grammar->compiled, path);
    if (auto* error = saved.if_error()) return call.error(CGRAM_ERROR_COMPILE, *error);
    return CGRAM_OK;
  });
}

cgram_status cgram_load(const char* path, const cgram_vocab* vocab, cgram_grammar** out) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!path) return call.null("path");
    if (!vocab) return call.null("vocab");
    if (!out) return call.null("out");
    auto loaded = cgram::load_shared_object(path, vocab->vocab);
    if (auto* error = loaded.if_error()) return call.error(CGRAM_ERROR_LOAD, *error);
    return hand_out(out, std::move(*loaded));
  });
}

// ---------------------------------------------------------------------------
// Matchers

cgram_status cgram_matcher_new(const cgram_grammar* grammar, cgram_matcher** out) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!grammar) return call.null("grammar");
    if (!out) return call.null("out");
    if (grammar->tools) return hand_out(out, grammar->tools);
    return hand_out(out, grammar->compiled);
  });
}

void cgram_matcher_options_init(cgram_matcher_options* options) {
  if (!options) return;
  *options = {};
  options->struct_size = sizeof(cgram_matcher_options);
  options->max_rollback_tokens = SIZE_MAX;
}

cgram_status cgram_matcher_new_with_options(const cgram_grammar* grammar, const cgram_matcher_options* options,
                                            cgram_matcher** out) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!grammar) return call.null("grammar");
    if (!out) return call.null("out");
    cgram::MatcherOptions matcher_options;
    if (options) {
      if (options->struct_size != sizeof(cgram_matcher_options))
        return call.invalid("options->struct_size is {}, not sizeof(cgram_matcher_options) = {} (call "
                            "cgram_matcher_options_init)",
                            options->struct_size, sizeof(cgram_matcher_options));
      if (options->max_rollback_tokens != SIZE_MAX) matcher_options.max_rollback_tokens = options->max_rollback_tokens;
      if (options->max_work_per_byte == SIZE_MAX) matcher_options.limits.max_work_per_byte = 0;  // no bound
      else if (options->max_work_per_byte) matcher_options.limits.max_work_per_byte = options->max_work_per_byte;
    }
    if (grammar->tools) {
      if (options && (options->max_rollback_tokens != SIZE_MAX || options->max_work_per_byte))
        return call.invalid("a tool list compiled one tool at a time takes no matcher options (its matchers keep "
                            "every token and the default limits)");
      return hand_out(out, grammar->tools);
    }
    return hand_out(out, grammar->compiled, matcher_options);
  });
}

cgram_status cgram_matcher_clone(const cgram_matcher* matcher, cgram_matcher** out) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!matcher) return call.null("matcher");
    if (!out) return call.null("out");
    return hand_out(out, *matcher);
  });
}

void cgram_matcher_free(cgram_matcher* matcher) { std::unique_ptr<cgram_matcher> owned(matcher); }

cgram_status cgram_matcher_advance(cgram_matcher* matcher, uint32_t token, cgram_advance_result* result) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!matcher) return call.null("matcher");
    if (!result) return call.null("result");
    return matcher->visit([&](auto& m) -> cgram_status {
      if (cgram_status s = check_token(call, m, token)) return s;
      if (m.is_finished()) return call.fail(CGRAM_ERROR_STATE, "the matcher is finished (rollback or reset it to go on)");
      if (cgram_status s = limit_status(call, m)) return s;
      *result = to_c(m.advance(token));
      return limit_status(call, m);
    });
  });
}

cgram_status cgram_matcher_fill_mask(cgram_matcher* matcher, uint32_t* words, size_t n_words) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!matcher) return call.null("matcher");
    if (!words) return call.null("words");
    return matcher->visit([&](auto& m) -> cgram_status {
      const size_t needed = m.mask_words();
      if (n_words < needed) return call.invalid("n_words is {}; a mask needs {} words", n_words, needed);
      m.fill_mask(std::span<uint32_t>(words, needed));
      return limit_status(call, m);
    });
  });
}

cgram_status cgram_matcher_validate_tokens(cgram_matcher* matcher, const uint32_t* tokens, size_t n_tokens,
                                           size_t* accepted) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!matcher) return call.null("matcher");
    if (!accepted) return call.null("accepted");
    if (!tokens && n_tokens > 0) return call.invalid("tokens is NULL but n_tokens is {}", n_tokens);
    return matcher->visit([&](auto& m) -> cgram_status {
      if (cgram_status s = limit_status(call, m)) return s;
      *accepted = m.validate_tokens(std::span<const uint32_t>(tokens, n_tokens));
      return CGRAM_OK;
    });
  });
}

cgram_status cgram_matcher_fill_bitmask(cgram_matcher* matcher, uint32_t* bitmask, size_t n_rows, size_t row_words,
                                        size_t row) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!matcher) return call.null("matcher");
    cgram::Bitmask view;
    if (cgram_status s = bitmask_view(call, bitmask, n_rows, row_words, view)) return s;
    return matcher->visit([&](auto& m) -> cgram_status {
      if (row_words < m.mask_words())
        return call.invalid("row_words is {}; the vocabulary ({} ids) needs {}", row_words,
                            m.grammar().vocabulary().size(), m.mask_words());
      if (row >= n_rows) return call.invalid("row {} is outside the bitmask ({} rows)", row, n_rows);
      m.fill_row(view.row(row));
      return limit_status(call, m);
    });
  });
}

cgram_status cgram_matcher_is_allowed(cgram_matcher* matcher, uint32_t token, bool* allowed) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!matcher) return call.null("matcher");
    if (!allowed) return call.null("allowed");
    return matcher->visit([&](auto& m) -> cgram_status {
      if (cgram_status s = check_token(call, m, token)) return s;
      *allowed = m.is_allowed(token);
      return limit_status(call, m);
    });
  });
}

cgram_status cgram_matcher_forced_text(cgram_matcher* matcher, char* bytes, size_t capacity, size_t* length) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!matcher) return call.null("matcher");
    if (!length) return call.null("length");
    if (!bytes && capacity > 0) return call.invalid("bytes is NULL but capacity is {}", capacity);
    const std::string forced =
        capacity > 0 ? matcher->visit([&](auto& m) { return m.forced_text(capacity); }) : std::string();
    const size_t written = std::min(forced.size(), capacity);
    std::copy_n(forced.begin(), written, bytes);
    *length = written;
    return CGRAM_OK;
  });
}

cgram_status cgram_matcher_jump_forward(cgram_matcher* matcher, uint32_t* tokens, size_t capacity, size_t* count,
                                        size_t* rollback) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!matcher) return call.null("matcher");
    if (!count) return call.null("count");
    if (!rollback) return call.null("rollback");
    if (!tokens && capacity > 0) return call.invalid("tokens is NULL but capacity is {}", capacity);
    auto jump = matcher->visit([](auto& m) { return m.jump_forward(); });
    if (auto* error = jump.if_error()) return call.error(CGRAM_ERROR_VOCABULARY, *error);
    const cgram::Matcher::JumpForward& j = *jump;
    *count = j.tokens.size();
    *rollback = j.rollback;
    if (j.tokens.size() > capacity)
      return call.fail(CGRAM_ERROR_BUFFER_TOO_SMALL, "{} tokens to append; capacity is {}", j.tokens.size(), capacity);
    std::copy(j.tokens.begin(), j.tokens.end(), tokens);
    return CGRAM_OK;
  });
}

cgram_status cgram_matcher_rollback(cgram_matcher* matcher, size_t n) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!matcher) return call.null("matcher");
    return matcher->visit([&](auto& m) -> cgram_status {
      const size_t accepted = m.tokens_accepted(), depth = m.rollback_depth();
      if (n > accepted) return call.invalid("cannot roll back {} tokens: {} were accepted", n, accepted);
      if (n > depth)
        return call.invalid("cannot roll back {} tokens: the matcher keeps the last {} (max_rollback_tokens)", n,
                            depth);
      if (!m.rollback(n))
        return call.fail(CGRAM_ERROR_INTERNAL, "rollback({}) refused after {} tokens (a bug in cgram)", n, accepted);
      return CGRAM_OK;
    });
  });
}

size_t cgram_matcher_rollback_depth(const cgram_matcher* matcher) {
  return matcher ? matcher->visit([](const auto& m) { return m.rollback_depth(); }) : 0;
}

cgram_status cgram_matcher_reset(cgram_matcher* matcher) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!matcher) return call.null("matcher");
    matcher->visit([](auto& m) { m.reset(); });
    return CGRAM_OK;
  });
}

cgram_status cgram_matcher_can_end(cgram_matcher* matcher, bool* can_end) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!matcher) return call.null("matcher");
    if (!can_end) return call.null("can_end");
    return matcher->visit([&](auto& m) -> cgram_status {
      *can_end = m.can_end();
      return limit_status(call, m);
    });
  });
}

bool cgram_matcher_is_finished(const cgram_matcher* matcher) {
  return matcher && matcher->visit([](const auto& m) { return m.is_finished(); });
}

size_t cgram_matcher_tokens_accepted(const cgram_matcher* matcher) {
  return matcher ? matcher->visit([](const auto& m) { return m.tokens_accepted(); }) : 0;
}

size_t cgram_matcher_mask_words(const cgram_matcher* matcher) {
  return matcher ? matcher->visit([](const auto& m) { return m.mask_words(); }) : 0;
}

cgram_status cgram_matcher_modify_possible_logits(cgram_matcher* matcher, uint32_t token, float* logits,
                                                  size_t n_logits, cgram_advance_result* result) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!matcher) return call.null("matcher");
    if (!result) return call.null("result");
    return matcher->visit([&](auto& m) -> cgram_status {
      if (cgram_status s = check_token(call, m, token)) return s;
      if (cgram_status s = check_logits(call, m, logits, n_logits)) return s;
      if (m.is_finished()) return call.fail(CGRAM_ERROR_STATE, "the matcher is finished (rollback or reset it to go on)");
      if (cgram_status s = limit_status(call, m)) return s;
      *result = to_c(m.modify_possible_logits(token, std::span<float>(logits, n_logits)));
      return limit_status(call, m);
    });
  });
}

cgram_status cgram_matcher_update_logits(cgram_matcher* matcher, float* logits, size_t n_logits) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!matcher) return call.null("matcher");
    return matcher->visit([&](auto& m) -> cgram_status {
      if (cgram_status s = check_logits(call, m, logits, n_logits)) return s;
      m.update_logits_from_tokens(std::span<float>(logits, n_logits));
      return limit_status(call, m);
    });
  });
}

// ---------------------------------------------------------------------------
// Batches

}  // extern "C"

namespace {

// After a batch: the first matcher a limit stopped (its row is clear).
cgram_status stopped_matchers(const Call& call, cgram_matcher* const* matchers, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const std::string error = matchers[i]->visit([](const auto& m) { return m.has_error() ? m.error() : std::string(); });
    if (!error.empty()) return call.fail(CGRAM_ERROR_LIMIT, "matchers[{}]: {} (its row is all clear)", i, error);
  }
  return CGRAM_OK;
}

// cgram_fill_bitmask with tool lists' matchers among the others: the same
// checks as cgram::fill_bitmask's, before anything is written.
cgram_status fill_bitmask_mixed(const Call& call, cgram_thread_pool& pool, cgram_matcher* const* matchers,
                                const size_t* rows, size_t count, const cgram::Bitmask& view) {
  std::vector<cgram::RowClaim> claims(count);
  for (size_t i = 0; i < count; ++i)
    claims[i] = {matchers[i], matchers[i] ? matchers[i]->visit([](const auto& m) { return m.mask_words(); }) : 0,
                 rows ? rows[i] : i};
  if (auto checked = cgram::check_bitmask_rows(claims, view); !checked) return call.invalid("{}", checked.error().message);
  {
    std::lock_guard turn(pool.mutex);
    pool.pool.run(count, [&](size_t i) {
      matchers[i]->visit([&](auto& m) { m.fill_row(view.row(claims[i].row)); });
    });
  }
  return stopped_matchers(call, matchers, count);
}

}  // namespace

extern "C" {

cgram_status cgram_thread_pool_new(size_t threads, cgram_thread_pool** out) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!out) return call.null("out");
    // A thread that cannot be started would leave the pool half built; a
    // bound well past any machine keeps absurd counts out.
    constexpr size_t kMaxThreads = 1024;
    if (threads > kMaxThreads) return call.invalid("threads is {}; at most {} are allowed", threads, kMaxThreads);
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    return hand_out(out, threads);
  });
}

void cgram_thread_pool_free(cgram_thread_pool* pool) { std::unique_ptr<cgram_thread_pool> owned(pool); }

cgram_status cgram_fill_masks(cgram_thread_pool* pool, cgram_matcher* const* matchers, size_t count, uint32_t* masks,
                              size_t n_words_total) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!pool) return call.null("pool");
    if (count == 0) return CGRAM_OK;
    if (!matchers) return call.null("matchers");
    if (!masks) return call.null("masks");
    for (size_t i = 0; i < count; ++i)
      if (!matchers[i]) return call.invalid("matchers[{}] is NULL", i);
    auto words_of = [](const cgram_matcher* m) { return m->visit([](const auto& x) { return x.mask_words(); }); };
    const size_t words = words_of(matchers[0]);
    for (size_t i = 1; i < count; ++i)
      if (words_of(matchers[i]) != words)
        return call.invalid("matchers[{}] has masks of {} words, matchers[0] of {}", i, words_of(matchers[i]), words);
    if (n_words_total / count < words)
      return call.invalid("n_words_total is {}; {} masks of {} words need {}", n_words_total, count, words,
                          count * words);
    // Two threads must never work on one matcher.
    std::vector<const cgram_matcher*> sorted(matchers, matchers + count);
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return call.invalid("a matcher appears twice in matchers");

    // An exception in a job comes back here from the pool; guarded turns it into a status.
    std::lock_guard turn(pool->mutex);
    pool->pool.run(count, [&](size_t i) {
      matchers[i]->visit([&](auto& m) { m.fill_mask(std::span<uint32_t>(masks + i * words, words)); });
    });
    return stopped_matchers(call, matchers, count);
  });
}

cgram_status cgram_fill_bitmask(cgram_thread_pool* pool, cgram_matcher* const* matchers, const size_t* rows,
                                size_t count, uint32_t* bitmask, size_t n_rows, size_t row_words) {
  return guarded(__func__, [&](const Call& call) -> cgram_status {
    if (!pool) return call.null("pool");
    if (count == 0) return CGRAM_OK;
    if (!matchers) return call.null("matchers");
    cgram::Bitmask view;
    if (cgram_status s = bitmask_view(call, bitmask, n_rows, row_words, view)) return s;
    const bool any_tools = std::any_of(matchers, matchers + count, [](const cgram_matcher* m) { return m && m->tools; });
    if (any_tools) return fill_bitmask_mixed(call, *pool, matchers, rows, count, view);
    // cgram::fill_bitmask checks the pairs (null, twice, outside, too narrow) before any work.
    std::vector<cgram::MatcherRow> pairs(count);
    for (size_t i = 0; i < count; ++i) pairs[i] = {matchers[i] ? &matchers[i]->matcher : nullptr, rows ? rows[i] : i};
    cgram::Result<void> filled;
    {
      std::lock_guard turn(pool->mutex);
      filled = cgram::fill_bitmask(pairs, view, pool->pool);
    }
    if (!filled) return call.invalid("{}", filled.error().message);
    return stopped_matchers(call, matchers, count);
  });
}

}  // extern "C"
