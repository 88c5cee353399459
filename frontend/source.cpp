#include "source.h"

#include <algorithm>

namespace cgram {
namespace {
bool is_continuation_byte(unsigned char c) { return (c & 0xC0) == 0x80; }
}  // namespace

SourceFile::SourceFile(std::string name, std::string text)
    : name_(std::move(name)), text_(std::move(text)) {
  line_starts_.push_back(0);
  for (uint32_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
}

SourceLoc SourceFile::location_of(uint32_t byte_offset) const {
  byte_offset = std::min<uint32_t>(byte_offset, text_.size());
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), byte_offset);
  uint32_t line = static_cast<uint32_t>(it - line_starts_.begin());
  uint32_t column = 1;
  for (uint32_t i = line_starts_[line - 1]; i < byte_offset; ++i)
    if (!is_continuation_byte(static_cast<unsigned char>(text_[i]))) ++column;
  return {byte_offset, line, column};
}

std::string_view SourceFile::line_text(uint32_t line) const {
  if (line == 0 || line > line_starts_.size()) return {};
  uint32_t begin = line_starts_[line - 1];
  uint32_t end = line < line_starts_.size() ? line_starts_[line] : text_.size();
  std::string_view view(text_.data() + begin, end - begin);
  while (!view.empty() && (view.back() == '\n' || view.back() == '\r')) view.remove_suffix(1);
  return view;
}

uint32_t SourceFile::offset_of(uint32_t line, uint32_t column) const {
  if (line == 0 || line > line_starts_.size()) return text_.size();
  uint32_t offset = line_starts_[line - 1];
  for (uint32_t seen = 1; offset < text_.size() && seen < column; ++offset) {
    if (offset + 1 >= text_.size() ||
        !is_continuation_byte(static_cast<unsigned char>(text_[offset + 1])))
      ++seen;
  }
  return offset;
}

}  // namespace cgram
