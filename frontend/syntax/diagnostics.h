#pragma once
// Diagnostics in the clang style: file:line:col: error: message, then the
// source line and a caret under the spot.
#include <cstdint>
#include <string>
#include <vector>

#include "source.h"

namespace cgram {

enum class Severity { Error, Warning, Note };

struct Diagnostic {
  Severity severity = Severity::Error;
  SourceRange range;
  std::string message;
};

class Diagnostics {
 public:
  explicit Diagnostics(const SourceFile* file = nullptr) : file_(file) {}

  void error(SourceRange range, std::string message);
  void warning(SourceRange range, std::string message);
  void note(SourceRange range, std::string message);
  // An error with no location in the source (for example a missing start rule).
  void error_at_file(std::string message);
  // One made elsewhere (another Diagnostics, placed in this file), kept as is.
  void add(Diagnostic d);

  // At most `n` diagnostics are kept (and rendered); the rest are counted.
  // A file of stray characters would otherwise give millions.
  void set_max_kept(size_t n) { max_kept_ = n; }
  size_t dropped() const { return dropped_; }

  // Where the list stands, and back to there: a caller that tries one way
  // and falls back to another takes back what the first said. Under a cap
  // the list is copied, since an error may take the place of an earlier
  // warning (at most max_kept diagnostics).
  struct Mark {
    size_t size, errors, dropped;
    std::vector<Diagnostic> capped;
  };
  Mark mark() const {
    return {list_.size(), error_count_, dropped_, max_kept_ != SIZE_MAX ? list_ : std::vector<Diagnostic>{}};
  }
  void rewind(const Mark& m) {
    if (max_kept_ != SIZE_MAX) list_ = m.capped;
    else if (list_.size() > m.size) list_.resize(m.size);
    error_count_ = m.errors;
    dropped_ = m.dropped;
  }

  bool has_errors() const { return error_count_ > 0; }
  size_t error_count() const { return error_count_; }
  size_t warning_count() const;
  const std::vector<Diagnostic>& all() const { return list_; }
  const SourceFile* file() const { return file_; }

  // Sorted by position (stable for equal positions).
  std::vector<Diagnostic> sorted() const;
  // Every diagnostic rendered with its source line and caret.
  std::string render(bool color = false) const;
  std::string render_one(const Diagnostic& d, bool color = false) const;

 private:
  const SourceFile* file_;
  bool keep(Severity severity);

  std::vector<Diagnostic> list_;
  size_t error_count_ = 0;
  size_t max_kept_ = SIZE_MAX;
  size_t dropped_ = 0;
};

const char* severity_name(Severity severity);

}  // namespace cgram
