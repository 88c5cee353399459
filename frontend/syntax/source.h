#pragma once
// A grammar's text and the mapping from byte offsets to line:column.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cgram {

// A position in a source file. Lines and columns are 1-based; columns count
// Unicode characters (what an editor shows), offsets count bytes.
struct SourceLoc {
  uint32_t offset = 0;
  uint32_t line = 1;
  uint32_t column = 1;
};

// A half-open byte range [begin, end) in one source file.
struct SourceRange {
  SourceLoc begin;
  SourceLoc end;
};

class SourceFile {
 public:
  SourceFile(std::string name, std::string text);

  const std::string& name() const { return name_; }
  std::string_view text() const { return text_; }

  SourceLoc location_of(uint32_t byte_offset) const;
  // The text of 1-based line `line`, without its line terminator.
  std::string_view line_text(uint32_t line) const;
  // Byte offset of the character at (line, column), both 1-based; column
  // counts Unicode characters as ANTLR does.
  uint32_t offset_of(uint32_t line, uint32_t column) const;
  // Whether every character is one byte (a character index is a byte
  // offset): what translations usually are, and what the parser's token
  // positions then map in constant time.
  bool ascii() const { return ascii_; }

 private:
  // Characters before byte `byte_offset`. Constant time (at most one block
  // walked), so that a grammar written on one line is not quadratic.
  uint32_t character_index(uint32_t byte_offset) const;

  static constexpr uint32_t kCheckpointBytes = 64;
  std::string name_;
  std::string text_;
  std::vector<uint32_t> line_starts_;
  std::vector<uint32_t> checkpoints_;  // characters before each 64-byte block
  bool ascii_ = true;
};

// A text translated to .cgram (GBNF, a JSON Schema) keeps (offset in the
// translation, offset in the original) pairs, ascending in the first. The
// original offset of the piece that holds translated offset `offset`.
using OffsetMap = std::vector<std::pair<uint32_t, uint32_t>>;
uint32_t original_offset(const OffsetMap& offsets, uint32_t offset);

}  // namespace cgram
