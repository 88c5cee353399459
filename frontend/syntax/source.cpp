#include "source.h"

#include <algorithm>

namespace cgram {
namespace {
bool is_continuation_byte(unsigned char c) { return (c & 0xC0) == 0x80; }
}  // namespace

SourceFile::SourceFile(std::string name, std::string text)
    : name_(std::move(name)), text_(std::move(text)) {
  line_starts_.push_back(0);
  uint32_t characters = 0;
  for (uint32_t i = 0; i < text_.size(); ++i) {
    if (i % kCheckpointBytes == 0) checkpoints_.push_back(characters);
    if (!is_continuation_byte(static_cast<unsigned char>(text_[i]))) ++characters;
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
  }
  checkpoints_.push_back(characters);
  ascii_ = characters == text_.size();
}

uint32_t SourceFile::character_index(uint32_t byte_offset) const {
  if (ascii_) return std::min<uint32_t>(byte_offset, text_.size());
  uint32_t block = byte_offset / kCheckpointBytes;
  if (block >= checkpoints_.size()) return checkpoints_.back();
  uint32_t index = checkpoints_[block];
  for (uint32_t i = block * kCheckpointBytes; i < byte_offset; ++i)
    if (!is_continuation_byte(static_cast<unsigned char>(text_[i]))) ++index;
  return index;
}

SourceLoc SourceFile::location_of(uint32_t byte_offset) const {
  byte_offset = std::min<uint32_t>(byte_offset, text_.size());
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), byte_offset);
  uint32_t line = static_cast<uint32_t>(it - line_starts_.begin());
  uint32_t column = character_index(byte_offset) - character_index(line_starts_[line - 1]) + 1;
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
  if (ascii_) return std::min<uint64_t>(uint64_t{line_starts_[line - 1]} + (column == 0 ? 0 : column - 1), text_.size());
  // The character with index `wanted` in the whole text: find its block
  // through the checkpoints, then walk at most one block.
  uint64_t wanted = uint64_t{character_index(line_starts_[line - 1])} + (column == 0 ? 0 : column - 1);
  auto it = std::upper_bound(checkpoints_.begin(), checkpoints_.end(), wanted);
  uint32_t block = it == checkpoints_.begin() ? 0 : static_cast<uint32_t>(it - checkpoints_.begin() - 1);
  uint32_t offset = std::max(block * kCheckpointBytes, line_starts_[line - 1]);
  uint64_t seen = character_index(offset);
  // Characters are counted at their first byte: stop at the first byte of
  // character `wanted` (or the end of the text).
  for (; offset < text_.size(); ++offset) {
    if (is_continuation_byte(static_cast<unsigned char>(text_[offset]))) continue;
    if (seen == wanted) break;
    ++seen;
  }
  return offset;
}

uint32_t original_offset(const OffsetMap& offsets, uint32_t offset) {
  auto it = std::upper_bound(offsets.begin(), offsets.end(), std::make_pair(offset, UINT32_MAX));
  if (it == offsets.begin()) return 0;
  return std::prev(it)->second;
}

}  // namespace cgram
