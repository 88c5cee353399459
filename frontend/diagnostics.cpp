#include "diagnostics.h"

#include <algorithm>
#include <fmt/format.h>

namespace cgram {

const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
  }
  return "error";
}

void Diagnostics::error(SourceRange range, std::string message) {
  list_.push_back({Severity::Error, range, std::move(message)});
  ++error_count_;
}

void Diagnostics::warning(SourceRange range, std::string message) {
  list_.push_back({Severity::Warning, range, std::move(message)});
}

void Diagnostics::note(SourceRange range, std::string message) {
  list_.push_back({Severity::Note, range, std::move(message)});
}

void Diagnostics::error_at_file(std::string message) {
  SourceRange none;
  none.begin.line = 0;
  list_.push_back({Severity::Error, none, std::move(message)});
  ++error_count_;
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
  const std::string name = file_ ? file_->name() : std::string("<input>");
  const char* bold = color ? "\033[1m" : "";
  const char* reset = color ? "\033[0m" : "";
  const char* tint = !color ? ""
                     : d.severity == Severity::Error ? "\033[1;31m"
                     : d.severity == Severity::Warning ? "\033[1;35m"
                                                       : "\033[1;36m";
  if (d.range.begin.line == 0)
    return fmt::format("{}{}:{} {}{}:{} {}\n", bold, name, reset, tint, severity_name(d.severity),
                       reset, d.message);
  std::string out = fmt::format("{}{}:{}:{}:{} {}{}:{} {}{}{}\n", bold, name, d.range.begin.line,
                                d.range.begin.column, reset, tint, severity_name(d.severity),
                                reset, bold, d.message, reset);
  if (!file_) return out;
  std::string_view line = file_->line_text(d.range.begin.line);
  out += fmt::format("{}\n", line);
  // Caret under the first character; tildes under the rest of the range on that line.
  // Tabs are copied so that the caret lines up whatever the tab width.
  std::string marker;
  uint32_t column = 1;
  for (size_t i = 0; i < line.size() && column < d.range.begin.column; ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xC0) == 0x80) continue;
    marker += line[i] == '\t' ? '\t' : ' ';
    ++column;
  }
  for (; column < d.range.begin.column; ++column) marker += ' ';
  marker += '^';
  if (d.range.end.line == d.range.begin.line && d.range.end.column > d.range.begin.column + 1)
    marker.append(d.range.end.column - d.range.begin.column - 1, '~');
  out += fmt::format("{}{}{}\n", color ? "\033[1;32m" : "", marker, reset);
  return out;
}

std::string Diagnostics::render(bool color) const {
  std::string out;
  for (const Diagnostic& d : sorted()) out += render_one(d, color);
  return out;
}

}  // namespace cgram
