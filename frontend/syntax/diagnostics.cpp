#include "diagnostics.h"

#include <algorithm>
#include <fmt/format.h>

#include <optional>

#include "utf8.h"

namespace cgram {

namespace {

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Appends one character of grammar text (a lead byte and the continuation
// bytes after it, as columns are counted) as a terminal may show it, and
// returns its width in columns. Grammars come from anyone: a raw ESC would
// start a terminal escape sequence, so control characters (C0, DEL, C1) and
// bytes outside valid UTF-8 are shown as \xHH, one escape per byte. A tab is
// kept when `keep_tab` (the source line: the caret line copies it).
size_t append_shown(std::string& out, std::string_view unit, bool keep_tab) {
  size_t pos = 0;
  std::optional<uint32_t> cp = decode_utf8(unit, pos);
  const bool control = cp && (*cp < 0x20 || *cp == 0x7F || (*cp >= 0x80 && *cp < 0xA0));
  size_t width = 0;
  if (cp && (!control || (keep_tab && *cp == '\t'))) {
    out.append(unit.substr(0, pos));
    width = 1;
  } else {
    pos = 0;
  }
  // The rest: a control character, or bytes that are not a character.
  for (; pos < unit.size(); ++pos, width += 4)
    out += fmt::format("\\x{:02X}", static_cast<unsigned char>(unit[pos]));
  return width;
}

// The units of `text` in order: each lead byte with its continuation bytes
// (a stray continuation byte at the start is a unit of its own).
template <typename F>
void for_each_unit(std::string_view text, F&& f) {
  for (size_t i = 0; i < text.size();) {
    size_t j = i + 1;
    while (j < text.size() && is_continuation(text[j])) ++j;
    f(text.substr(i, j - i));
    i = j;
  }
}

std::string shown(std::string_view text) {
  std::string out;
  for_each_unit(text, [&](std::string_view unit) { append_shown(out, unit, /*keep_tab=*/false); });
  return out;
}

}  // namespace

const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
  }
  return "error";
}

bool Diagnostics::keep(Severity severity) {
  if (severity == Severity::Error) ++error_count_;
  if (list_.size() < max_kept_) return true;
  ++dropped_;
  if (severity != Severity::Error) return false;
  // Errors come first: one takes the place of the last warning or note kept
  // (a schema with a hundred ignored keywords must still show why it failed).
  auto last = std::find_if(list_.rbegin(), list_.rend(), [](const Diagnostic& d) { return d.severity != Severity::Error; });
  if (last == list_.rend()) return false;
  list_.erase(std::next(last).base());
  return true;
}

void Diagnostics::error(SourceRange range, std::string message) {
  if (keep(Severity::Error)) list_.push_back({Severity::Error, range, std::move(message)});
}

void Diagnostics::warning(SourceRange range, std::string message) {
  if (keep(Severity::Warning)) list_.push_back({Severity::Warning, range, std::move(message)});
}

void Diagnostics::note(SourceRange range, std::string message) {
  if (keep(Severity::Note)) list_.push_back({Severity::Note, range, std::move(message)});
}

void Diagnostics::add(Diagnostic d) {
  if (keep(d.severity)) list_.push_back(std::move(d));
}

void Diagnostics::error_at_file(std::string message) {
  SourceRange none;
  none.begin.line = 0;
  if (keep(Severity::Error)) list_.push_back({Severity::Error, none, std::move(message)});
}

size_t Diagnostics::warning_count() const {
  return std::count_if(list_.begin(), list_.end(),
                       [](const Diagnostic& d) { return d.severity == Severity::Warning; });
}

std::vector<Diagnostic> Diagnostics::sorted() const {
  std::vector<Diagnostic> out = list_;
  std::stable_sort(out.begin(), out.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return a.range.begin.offset < b.range.begin.offset;
  });
  return out;
}

std::string Diagnostics::render_one(const Diagnostic& d, bool color) const {
  // The file name, the message and the source line are shown escaped (see
  // append_shown); only the colors are raw escape sequences.
  const std::string name = file_ ? shown(file_->name()) : std::string("<input>");
  // A message quotes names from the grammar, which may be any length.
  constexpr size_t kMaxMessage = 1000;
  const std::string message =
      d.message.size() > kMaxMessage ? shown(d.message.substr(0, kMaxMessage)) + "..." : shown(d.message);
  const char* bold = color ? "\033[1m" : "";
  const char* reset = color ? "\033[0m" : "";
  const char* tint = !color ? ""
                     : d.severity == Severity::Error ? "\033[1;31m"
                     : d.severity == Severity::Warning ? "\033[1;35m"
                                                       : "\033[1;36m";
  if (d.range.begin.line == 0)
    return fmt::format("{}{}:{} {}{}:{} {}\n", bold, name, reset, tint, severity_name(d.severity),
                       reset, message);
  std::string out = fmt::format("{}{}:{}:{}:{} {}{}:{} {}{}{}\n", bold, name, d.range.begin.line,
                                d.range.begin.column, reset, tint, severity_name(d.severity),
                                reset, bold, message, reset);
  if (!file_) return out;
  // Caret under the first character; tildes under the rest of the range on
  // that line. Each character takes as many columns in the caret line as it
  // is shown with (an escape is four per byte); tabs are copied so that the
  // caret lines up whatever the tab width.
  // Long lines (a minified or generated grammar) are shown as a window of
  // kContext columns either side of the caret, with "..." where cut.
  constexpr uint32_t kContext = 80;
  const uint32_t first = d.range.begin.column;
  const uint32_t window_begin = first > kContext ? first - kContext : 1;
  const uint32_t window_end = first + kContext;
  const uint32_t last = std::min(window_end, d.range.end.line == d.range.begin.line && d.range.end.column > first + 1
                                                 ? d.range.end.column - 1
                                                 : first);
  // Only the window's bytes are looked at (a diagnostic on a line of
  // megabytes costs no more than one on a short line).
  const std::string_view text = file_->line_text(d.range.begin.line);
  const uint32_t line_start = file_->offset_of(d.range.begin.line, 1);
  const size_t from = std::min<size_t>(text.size(), file_->offset_of(d.range.begin.line, window_begin) - line_start);
  const size_t to = std::min<size_t>(text.size(), file_->offset_of(d.range.begin.line, window_end + 1) - line_start);
  std::string line, marker;
  // The column of the next character (stray continuation bytes take none).
  uint32_t column = file_->location_of(line_start + static_cast<uint32_t>(from)).column;
  bool caret = false;
  const bool cut_end = to < text.size();
  if (from > 0) line += "...", marker += "   ";
  for_each_unit(text.substr(from, to - from), [&](std::string_view unit) {
    const bool counts = !is_continuation(unit[0]);
    const size_t width = append_shown(line, unit, /*keep_tab=*/true);
    if (column < first) {
      marker += unit == "\t" ? std::string("\t") : std::string(width, ' ');
    } else if (!caret) {
      marker += '^';
      marker.append(width - 1, '~');
      caret = true;
    } else if (column <= last) {
      marker.append(width, '~');
    }
    if (counts) ++column;
  });
  if (cut_end) line += "...";
  // A range that starts or goes on past the end of the line.
  if (!caret) {
    for (column = std::max(column, window_begin); column < first; ++column) marker += ' ';
    marker += '^';
    column = first + 1;
  }
  if (column <= last) marker.append(last - column + 1, '~');
  out += fmt::format("{}\n", line);
  out += fmt::format("{}{}{}\n", color ? "\033[1;32m" : "", marker, reset);
  return out;
}

std::string Diagnostics::render(bool color) const {
  std::string out;
  for (const Diagnostic& d : sorted()) out += render_one(d, color);
  if (dropped_ > 0)
    out += fmt::format("{} more diagnostics not shown ({} are kept, errors first)\n", dropped_, max_kept_);
  return out;
}

}  // namespace cgram
