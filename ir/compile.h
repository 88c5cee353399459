#pragma once
// The front door: .cgram text → checked grammar IR, or diagnostics.
#include <memory>
#include <string>
#include <string_view>

#include "diagnostics.h"
#include "grammar_ir.h"
#include "parse.h"

namespace cgram {

struct ParseOptions {
  std::string start = "start";
  SyntaxLimits syntax;
  ir::AutomatonLimits limits;
};

// A checked grammar: immutable once built, safe to share between threads.
class Grammar {
 public:
  struct Outcome;
  static Outcome parse(std::string_view source, std::string_view filename,
                       const ParseOptions& options = {});

  const ir::GrammarIR& ir() const { return ir_; }
  const SourceFile& file() const { return *file_; }

  Grammar(std::shared_ptr<const SourceFile> file, ir::GrammarIR ir)
      : file_(std::move(file)), ir_(std::move(ir)) {}

 private:
  std::shared_ptr<const SourceFile> file_;
  ir::GrammarIR ir_;
};

struct Grammar::Outcome {
  std::shared_ptr<const SourceFile> file;
  Diagnostics diagnostics;
  std::shared_ptr<const Grammar> grammar;  // null when there were errors

  bool ok() const { return grammar != nullptr; }
};

}  // namespace cgram
