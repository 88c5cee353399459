// cgram: the command line. One subcommand per job; see `cgram --help`.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iostream>
#include <string_view>

#include "commands.h"
#include "io.h"
#include "pipeline.h"

namespace {

// CLI11 reads "-1" into an unsigned option as 2^64 - 1 and takes "1e23" or
// 2^64 silently clamped: whole numbers are checked here, as written, before
// any conversion.
CLI::Validator whole_number(uint64_t min, uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        const bool digits =
            !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
        uint64_t value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (!digits || ec == std::errc::invalid_argument)
          return fmt::format("'{}' is not a whole number (expected {} to {})", text, min, max);
        if (ec == std::errc::result_out_of_range || value < min || value > max)
          return fmt::format("{} is out of range (expected {} to {})", text, min, max);
        return "";
      },
      fmt::format("in [{} - {}]", min, max), "whole_number");
}

int run(int argc, char** argv);

}  // namespace

// The library turns running out of memory into errors where it compiles;
// anything else that runs out (a huge document, a vocabulary) ends here,
// with a message instead of an abort.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::cerr << "cgram: error: out of memory\n";
    return 1;
  }
}

namespace {

int run(int argc, char** argv) {
  using namespace cgram::cli;
  CLI::App app{"cgram: compile grammars that constrain what a language model may generate"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cgram 0.1.0");

  // Texts read from files are bounded (docs/LIMITS.md, "Files").
  auto add_max_text_bytes = [](CLI::App* cmd, size_t& limit) {
    cmd->add_option("--max-text-bytes", limit, "The largest text file read (documents, prefixes, token ids)")
        ->check(whole_number(0, kMaxTextBytesCeiling))
        ->capture_default_str();
  };

  // A grammar is .cgram, llama.cpp's GBNF (by the .gbnf extension, or
  // --format gbnf; --start then names a GBNF rule, default root), Lark
  // (.lark, --format lark; start rule `start`) or a JSON
  // Schema (.json, or --format json-schema; with --whitespace and --strict).
  auto add_schema_options = [](CLI::App* cmd, GrammarInput& input) {
    cmd->add_option("--whitespace", input.whitespace,
                    "JSON Schema: the documents' layout: compact, pretty (two-space indentation) or flexible "
                    "(any JSON whitespace)")
        ->check(CLI::IsMember({"compact", "pretty", "flexible"}))
        ->capture_default_str();
    cmd->add_option("--property-order", input.property_order,
                    "JSON Schema: object members in the schema's order, or in any order (each at most once, the "
                    "required ones all there; exact up to 8 properties an object, docs/JSON_SCHEMA.md)")
        ->check(CLI::IsMember({"schema", "any"}))
        ->capture_default_str();
    cmd->add_option("--max-whitespace", input.max_whitespace,
                    "JSON Schema, flexible layout: the longest run of whitespace between tokens, or 'unbounded' "
                    "(a model cannot pad with whitespace until its token limit)")
        ->check(CLI::IsMember({"unbounded"}) | CLI::Range(0u, 100000u))
        ->capture_default_str();
    cmd->add_flag("--strict", input.strict,
                  "JSON Schema: a keyword that would be ignored (the grammar accepting more) is an error");
    cmd->add_option("--max-memory", input.max_memory_mib,
                    "The memory (MiB) reading and compiling the grammar may take; past it, an error names the stage "
                    "(docs/LIMITS.md)")
        ->check(whole_number(1, size_t{1} << 30))
        ->capture_default_str();
  };
  auto add_format = [&add_schema_options](CLI::App* cmd, GrammarInput& input) {
    cmd->add_option("--format", input.format,
                    "The grammar's format: auto (.gbnf is GBNF, .lark Lark, .json a JSON Schema), cgram, gbnf, lark, "
                    "json-schema, or tools (a JSON list of tools: the grammar of a reply that calls them)")
        ->check(CLI::IsMember({"auto", "cgram", "gbnf", "lark", "json-schema", "tools"}))
        ->capture_default_str();
    cmd->add_option("--tool-format", input.tool_format,
                    "With --format tools: the model family's call format (hermes, llama3, qwen, mistral, json-array)")
        ->check(CLI::IsMember({"hermes", "llama3", "qwen", "mistral", "json-array"}))
        ->capture_default_str();
    cmd->add_flag("--open-arguments", input.open_tool_arguments,
                  "With --format tools: an argument object may hold members its schema does not list (JSON "
                  "Schema's default); without it, only those it lists unless it says additionalProperties");
    add_schema_options(cmd, input);
  };

  CheckArgs check;
  CLI::App* check_cmd = app.add_subcommand("check", "Check a grammar: print its diagnostics, or a summary");
  check_cmd->add_option("FILE", check.file, "The grammar: .cgram, GBNF (.gbnf), Lark (.lark) or a JSON Schema (.json)")->required();
  check_cmd->add_option("--start", check.start, "The start rule")->capture_default_str();
  add_format(check_cmd, check);
  check_cmd->add_flag("--json", check.json, "Print the result as one JSON object");
  check_cmd->add_flag("--ir", check.dump_ir, "Also print the desugared grammar IR, its lexical terminals and LR skeleton");
  std::vector<std::string> pass_names;
  for (const cgram::PassInfo& info : cgram::kPasses) pass_names.emplace_back(info.name);
  check_cmd
      ->add_option("--dump", check.dump_passes,
                   "Compile for the vocabulary and print what a pass of the pipeline made (repeat for several)")
      ->check(CLI::IsMember(pass_names));
  check_cmd->add_option(
      "--vocab", check.vocab,
      "With --dump: tokenizer.json, tiktoken, GGUF or a JSON token list (default: the bundled Phi-3)");

  MatchArgs match;
  CLI::App* match_cmd = app.add_subcommand(
      "match",
      "Say whether a text is a complete sentence of the grammar, a viable prefix, or rejected.\n"
      "Exit status: 0 complete, 1 prefix, 2 rejected, 3 the grammar has errors");
  match_cmd->add_option("FILE", match.file, "The .cgram grammar")->required();
  auto* text_opt = match_cmd->add_option("TEXT", match.text, "The text to match");
  auto* file_opt = match_cmd->add_option("--file", match.text_file, "Read the text from this file");
  text_opt->excludes(file_opt);
  match_cmd->add_option("--start", match.start, "The start rule")->capture_default_str();
  add_format(match_cmd, match);
  match_cmd->add_flag("--json", match.json, "Print the result as one JSON object");
  add_max_text_bytes(match_cmd, match.max_text_bytes);
  match_cmd
      ->add_option("--max-work-per-byte", match.max_work_per_byte,
                   "The parser's work budget per byte of the text, amortised over the text, with 2,048 bytes' worth "
                   "more for the whole text (a grammar too ambiguous for it is an error)")
      ->check(whole_number(1, kMaxTextBytesCeiling))
      ->capture_default_str();

  auto vocab_options = [&add_format](CLI::App* cmd, VocabArgs& a, bool single = true) {
    cmd->add_flag("--canonical", a.canonical,
                  "Canonical tokenization: a token only where the tokenizer itself would write it there "
                  "(merge-based vocabularies)");
    if (!single) return;
    cmd->add_option("FILE", a.file, "The .cgram grammar")->required();
    cmd->add_option("--vocab", a.vocab,
                    "Vocabulary: tokenizer.json, tiktoken, GGUF or a JSON token list (default: the bundled Phi-3)");
    cmd->add_option("--start", a.start, "The start rule")->capture_default_str();
    add_format(cmd, a);
    cmd->add_flag("--json", a.json, "Print the result as JSON");
    cmd->add_option("--tier", a.tier,
                    "table: run on the tables; jit: compile the kernels with the LLVM JIT first. A FILE ending "
                    "in .so is an object made by cgram compile")
        ->check(CLI::IsMember({"table", "jit"}))
        ->capture_default_str();
  };
  MaskArgs mask;
  CLI::App* mask_cmd = app.add_subcommand("mask", "The tokens allowed after a prefix (ids and bytes)");
  vocab_options(mask_cmd, mask);
  auto* prefix_opt = mask_cmd->add_option(
      "--prefix", mask.prefix,
      "The text so far, as bytes (a prefix may end inside a character), tokenized with the vocabulary's encoder");
  auto* prefix_file_opt =
      mask_cmd->add_option("--prefix-file", mask.prefix_file, "The text so far from a file (any bytes, NUL included)");
  auto* tokens_opt = mask_cmd->add_option("--tokens", mask.tokens_file,
                                          "The tokens so far as ids: a file of whitespace-separated token ids");
  prefix_opt->excludes(prefix_file_opt)->excludes(tokens_opt);
  prefix_file_opt->excludes(tokens_opt);
  add_max_text_bytes(mask_cmd, mask.max_text_bytes);
  mask_cmd->add_option("--show", mask.show, "How many allowed tokens to list in text mode")
      ->check(whole_number(0, UINT32_MAX))
      ->capture_default_str();

  GenerateArgs generate;
  CLI::App* generate_cmd = app.add_subcommand(
      "generate", "Random valid text: sampling over the allowed tokens (uniformly, or like a corpus), until end of sequence");
  vocab_options(generate_cmd, generate);
  generate_cmd->add_option("--seed", generate.seed, "Random seed")
      ->check(whole_number(0, UINT64_MAX))
      ->capture_default_str();
  generate_cmd->add_option("--max-tokens", generate.max_tokens, "Stop after this many tokens")
      ->check(whole_number(1, kMaxGenerateTokens))
      ->capture_default_str();
  generate_cmd->add_option("--corpus", generate.corpus,
                           "Sample like these documents (a file, or a folder of them): a trigram model of their tokens "
                           "stands in for a language model, and the grammar still decides what may come. Without it, "
                           "every allowed token is as likely");

  BenchArgs bench;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench", "Mask and advance latency over documents, compile time, memory, time to first mask");
  vocab_options(bench_cmd, bench, /*single=*/false);
  bench_cmd->add_option("FILE", bench.file, "The .cgram grammar (or --suite)");
  bench_cmd->add_option("--vocab", bench.vocabs,
                        "Vocabulary: tokenizer.json, tiktoken, GGUF or a JSON token list (default: the bundled "
                        "Phi-3); with --suite, repeat it for several");
  bench_cmd->add_option("--start", bench.start, "The start rule")->capture_default_str();
  add_format(bench_cmd, bench);
  bench_cmd->add_option("--tier", bench.tier,
                        "table, or jit (compile the kernels first; with --suite, both are measured and compared)")
      ->check(CLI::IsMember({"table", "jit"}))
      ->capture_default_str();
  bench_cmd->add_flag("--json", bench.json, "Print the result as JSON");
  bench_cmd
      ->add_option("--mask-memo", bench.mask_memo,
                   "The grammar's remembered masks: 'document' starts each document with none (as a fresh "
                   "grammar), 'shared' keeps them across documents (as a server across requests), 'off'")
      ->check(CLI::IsMember({"document", "shared", "off"}))
      ->capture_default_str();
  bench_cmd->add_option("--slowest", bench.slowest,
                        "Also list the N slowest mask steps: document, step, the text before and the next token");
  bench_cmd->add_option("--suite", bench.suite,
                        "A benchmark suite folder (FORMAT/*.cgram, .gbnf or .json schemas, FORMAT/docs/): one table of "
                        "format × spelling × vocabulary, eager index, with the first mask timed on the lazy index (a "
                        "schema's from its translation on)");
  bench_cmd->add_option("--only", bench.only, "With --suite: just this format");
  bench_cmd->add_option("--docs", bench.docs, "A text file, or a folder of them, tokenized with the vocabulary");
  bench_cmd->add_option("--walks", bench.walks,
                        "Random walks through the grammar instead of documents, each mask timed as the walk makes it");
  bench_cmd->add_option("--walk-tokens", bench.walk_tokens, "With --walks: tokens per walk at most")
      ->capture_default_str();
  bench_cmd->add_flag("--prefer-long", bench.prefer_long,
                      "With --walks: take the longest of 16 allowed tokens drawn at random, as a model that likes "
                      "long tokens (whitespace runs, repeated punctuation) would");
  bench_cmd->add_option("--seed", bench.seed, "With --walks: the random seed")->capture_default_str();
  bench_cmd->add_option("--tokens", bench.tokens_file,
                        "Documents as token ids: a file of whitespace-separated ids, one document a line");
  add_max_text_bytes(bench_cmd, bench.max_text_bytes);
  bench_cmd->add_flag("--eager-index", bench.eager_index,
                      "Build the whole token index at compile time (as AOT and eager JIT do) instead of on first use");
  bench_cmd->add_option("--model-step-ms", bench.model_step_ms,
                        "Wait this long (untimed) before each mask, as a model's forward pass would: caches grow "
                        "cold and a background index build goes on between masks, as in a server")
      ->check(CLI::Range(0.0, 10000.0));
  bench_cmd->add_flag("!--no-background-index", bench.background_index,
                      "With a lazy index: leave every entry to the mask that first needs it (by default the entries "
                      "the first mask did not build are built on a thread of their own)");
  bench_cmd->add_flag("--gpu", bench.gpu,
                      "Time the GPU masker (device fill of a batch) and the logits kernel (exit 3 without a GPU)");
  bench_cmd->add_flag("--jump-forward", bench.jump_forward,
                      "Also measure the share of the documents' tokens jump-forward (forced text, token healing) saves");
  bench_cmd->add_flag("--speculate", bench.speculate,
                      "Also measure count-based speculative drafts: trained on the first half of the documents, "
                      "tested on the rest (acceptance, accepted length per step)");
  bench_cmd->add_option("--draft-tokens", bench.draft_tokens, "With --speculate: drafts proposed per step")
      ->check(CLI::Range(size_t{1}, size_t{64}))
      ->capture_default_str();
  std::vector<CLI::Option*> gpu_only;
  gpu_only.push_back(bench_cmd->add_flag("--gpu-host", bench.gpu_host,
                      "With --gpu: run the GPU kernels' host build instead (no GPU needed; checks and host timings)"));
  gpu_only.push_back(
      bench_cmd->add_option("--cuda-library", bench.cuda_library, "With --gpu: the CUDA driver library")
          ->capture_default_str());
  gpu_only.push_back(
      bench_cmd->add_option("--rows", bench.rows, "With --gpu: the batch, one matcher a row, each inside a document")
          ->check(CLI::Range(size_t{1}, size_t{65535}))
          ->capture_default_str());
  gpu_only.push_back(bench_cmd->add_option(
      "--logits-width", bench.logits_width,
      "With --gpu: logits per row (default: the vocabulary's size; more: a model's padding)"));
  gpu_only.push_back(bench_cmd->add_option("--runs", bench.runs, "With --gpu: timed runs of each measurement")
                         ->check(CLI::Range(size_t{1}, size_t{100000}))
                         ->capture_default_str());

  CompileArgs compile;
  CLI::App* compile_cmd = app.add_subcommand(
      "compile", "Compile a grammar for a vocabulary into a shared object (AOT): kernels, tables, whole token index");
  compile_cmd->add_option("FILE", compile.file, "The .cgram grammar")->required();
  compile_cmd->add_option("--vocab", compile.vocab,
                          "Vocabulary: tokenizer.json, tiktoken, GGUF or a JSON token list (default: the bundled Phi-3)");
  compile_cmd->add_option("--start", compile.start, "The start rule")->capture_default_str();
  add_format(compile_cmd, compile);
  compile_cmd->add_option("-o,--output", compile.output, "The shared object to write")->required();
  compile_cmd->add_flag("--canonical", compile.canonical,
                        "Canonical tokenization: a token only where the tokenizer itself would write it there");

  ConvertArgs convert;
  CLI::App* convert_cmd =
      app.add_subcommand("convert", "Write the .cgram equivalent of a GBNF or Lark grammar (comments kept) or of a JSON Schema");
  convert_cmd->add_option("FILE", convert.file, "The GBNF (.gbnf) or Lark (.lark) grammar, or JSON Schema (.json)")->required();
  convert_cmd->add_option("-o,--output", convert.output, "The .cgram file to write (default: standard output)");
  add_format(convert_cmd, convert);

  ConvertArgs schema;
  schema.format = "json-schema";
  CLI::App* schema_cmd = app.add_subcommand(
      "schema", "Write the .cgram grammar of a JSON Schema: the documents it accepts, in one whitespace layout");
  schema_cmd->add_option("FILE", schema.file, "The JSON Schema (.json)")->required();
  schema_cmd->add_option("-o,--output", schema.output, "The .cgram file to write (default: standard output)");
  add_schema_options(schema_cmd, schema);

  ConvertArgs tools;
  tools.format = "tools";
  CLI::App* tools_cmd = app.add_subcommand(
      "tools", "Write the .cgram grammar of a model's reply given a list of tools: free text, then tool calls in the "
               "model family's format, each call's arguments checked against its tool's schema");
  tools_cmd->add_option("FILE", tools.file, "The tools: a JSON list of OpenAI-style tools, or {\"tools\": [...]}")
      ->required();
  tools_cmd->add_option("-o,--output", tools.output, "The .cgram file to write (default: standard output)");
  tools_cmd->add_option("--format", tools.tool_format,
                        "The call format: hermes (<tool_call>{json}</tool_call>: Hermes, Qwen 2.5 and 3), llama3, "
                        "qwen (Qwen3-Coder's XML), mistral ([TOOL_CALLS][…]) or json-array (calls only)")
      ->check(CLI::IsMember({"hermes", "llama3", "qwen", "mistral", "json-array"}))
      ->capture_default_str();
  tools_cmd->add_flag("--open-arguments", tools.open_tool_arguments,
                      "An argument object may hold members its schema does not list (JSON Schema's default); "
                      "without it, only those it lists unless the schema says additionalProperties");
  add_schema_options(tools_cmd, tools);

  GpuArgs gpu;
  CLI::App* gpu_cmd = app.add_subcommand(
      "gpu", "The GPUs the CUDA driver sees, or why there are none (exit 3; masks are then computed on the CPU)");
  gpu_cmd->add_option("--library", gpu.library, "The CUDA driver library to load")->capture_default_str();
  gpu_cmd->add_option("--emit-ptx", gpu.emit_ptx, "Write the mask kernels' PTX for this architecture (sm_80, sm_90)");
  gpu_cmd->add_option("-o,--output", gpu.output, "The PTX file to write (default: standard output)");

  VocabBuildArgs vocab_build;
  CLI::App* vocab_cmd = app.add_subcommand("vocab", "Work on a vocabulary ahead of time");
  vocab_cmd->require_subcommand(1);
  CLI::App* vocab_build_cmd = vocab_cmd->add_subcommand(
      "build", "Make what canonical mode needs for a vocabulary once, and save it (loaded in milliseconds after)");
  vocab_build_cmd->add_option("VOCAB", vocab_build.vocab, "The vocabulary (tokenizer.json, .tiktoken, .gguf)")->required();
  vocab_build_cmd->add_option("-o,--output", vocab_build.output,
                              "The file to write (default: $CGRAM_VOCAB_DIR/FINGERPRINT.cgvocab, where it is found)");

  CLI::App* demo_cmd = app.add_subcommand(
      "demo", "Check the bundled JSON grammar and match a few texts against it (no files needed)");

  // CLI11 answers an unknown command (or none) with "A subcommand is
  // required": name what was given and list the commands instead.
  if (argc < 2 || argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* cmd : app.get_subcommands([](CLI::App*) { return true; })) {
      names += (names.empty() ? "" : ", ") + cmd->get_name();
      known = known || (argc >= 2 && cmd->get_name() == argv[1]);
    }
    if (!known) {
      if (argc < 2)
        std::cerr << "cgram: expected a command: " << names << "\n";
      else
        std::cerr << fmt::format("cgram: unknown command '{}'; the commands are: {}\n", printable(argv[1]), names);
      std::cerr << "Run with --help for more information.\n";
      return kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  if (*match_cmd && !match.text && !match.text_file) {
    std::cerr << "cgram match: expected the text to match: give TEXT or --file PATH\n";
    return kExitUsage;
  }
  if (*bench_cmd) {
    for (const CLI::Option* option : gpu_only)
      if (option->count() > 0 && !bench.gpu) {
        std::cerr << "cgram bench: " << option->get_name() << " only goes with --gpu\n";
        return kExitUsage;
      }
    for (const char* one_grammar : {"--gpu", "--slowest", "--walks"})
      if (bench_cmd->get_option(one_grammar)->count() > 0 && !bench.suite.empty()) {
        std::cerr << "cgram bench: " << one_grammar << " times one grammar over its documents, not --suite\n";
        return kExitUsage;
      }
  }
  if (*bench_cmd && bench.suite.empty()) {
    if (bench.file.empty() || (bench.docs.empty() && bench.tokens_file.empty() && bench.walks == 0) ||
        bench.vocabs.size() > 1) {
      std::cerr << "cgram bench: expected FILE with documents (give --docs PATH, --tokens FILE or --walks N) and at "
                   "most one --vocab, or --suite DIR\n";
      return kExitUsage;
    }
    if (bench.walks > 0 && bench.gpu) {
      std::cerr << "cgram bench: --gpu stands its matchers inside documents: give --docs or --tokens, not --walks\n";
      return kExitUsage;
    }
    if (!bench.vocabs.empty()) bench.vocab = bench.vocabs[0];
  }
  if (*demo_cmd) return run_demo();
  if (*vocab_build_cmd) return run_vocab_build(vocab_build);
  if (*gpu_cmd) return run_gpu(gpu);
  if (*convert_cmd) return run_convert(convert);
  if (*schema_cmd) return run_convert(schema);
  if (*tools_cmd) return run_convert(tools);
  if (*compile_cmd) return run_compile(compile);
  if (*mask_cmd) return run_mask(mask);
  if (*generate_cmd) return run_generate(generate);
  if (*bench_cmd) return run_bench(bench);
  if (*check_cmd) return run_check(check);
  if (*match_cmd) return run_match(match);
  return kExitUsage;
}

}  // namespace
