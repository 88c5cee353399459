#pragma once
// What the cgram command reads (grammars and texts, bounded) and writes
// (JSON that is always valid UTF-8, bytes made safe for a terminal).
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "commands.h"
#include "grammar.h"
#include "file_io.h"
#include "gbnf.h"
#include "json_schema.h"
#include "parse.h"
#include "utf8.h"

namespace cgram::cli {

// Grammars are read up to the front end's own limit (a larger one would be
// refused by the parser anyway, after reading all of it).
inline Result<std::string> read_grammar_file(const std::string& path) {
  return read_regular_file(path, "grammar", kMaxSourceBytes);
}

// JSON strings must be UTF-8, but paths, rule names, diagnostics and
// generated text are bytes (a generation cut inside a character, a file name
// with byte 0xFF). A string that is valid UTF-8 is written as it is. One
// that is not is written with each byte outside a valid character as the
// four characters \xHH (upper-case hex) and each backslash doubled, so that
// the bytes can be recovered exactly; the object then also holds
// "<key>_escaped": true. (Replacing bad bytes with U+FFFD would lose them,
// and \u00HH would be read back as a different, valid character.)
inline std::string escape_invalid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + 8);
  for (size_t pos = 0; pos < bytes.size();) {
    size_t at = pos;
    if (decode_utf8(bytes, pos)) {
      for (size_t i = at; i < pos; ++i) {
        if (bytes[i] == '\\') out += '\\';
        out += bytes[i];
      }
    } else {
      out += fmt::format("\\x{:02X}", static_cast<unsigned char>(bytes[at]));
    }
  }
  return out;
}

// Sets obj[key] to `bytes` as described above.
inline void put_bytes(nlohmann::json& obj, const std::string& key, std::string_view bytes) {
  if (!first_invalid_utf8(bytes)) {
    obj[key] = std::string(bytes);
    return;
  }
  obj[key] = escape_invalid_utf8(bytes);
  obj[key + "_escaped"] = true;
}

// Dumps with invalid bytes replaced rather than throwing: every byte string
// is meant to go through put_bytes, and a string that was missed must cost a
// U+FFFD, never an abort.
inline std::string dump_json(const nlohmann::json& value, int indent = -1) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Bytes for a terminal: control characters (ESC starts terminal escape
// sequences), DEL and bytes outside valid UTF-8 as \xHH; \n, \t and \r as
// themselves escaped, unless keep_layout (a message of several lines).
inline std::string printable(std::string_view bytes, bool keep_layout = false) {
  std::string out;
  for (size_t pos = 0; pos < bytes.size();) {
    size_t at = pos;
    auto cp = decode_utf8(bytes, pos);
    unsigned char u = static_cast<unsigned char>(bytes[at]);
    if (!cp) out += fmt::format("\\x{:02X}", u);
    else if (keep_layout && (*cp == '\n' || *cp == '\t')) out += static_cast<char>(*cp);
    else if (*cp == '\n') out += "\\n";
    else if (*cp == '\t') out += "\\t";
    else if (*cp == '\r') out += "\\r";
    else if (*cp < 0x20 || *cp == 0x7F) out += fmt::format("\\x{:02X}", u);
    else if (*cp >= 0x80 && *cp < 0xA0) out += fmt::format("\\u{{{:x}}}", *cp);  // C1 controls
    else out.append(bytes.substr(at, pos - at));
  }
  return out;
}

// How to read a grammar file: --format when given, else by its extension
// (.gbnf is llama.cpp's GBNF, .lark Lark, .json a JSON Schema, anything else .cgram).
inline ParseOptions grammar_options(const std::string& path, const std::string& start,
                                    const GrammarInput& input = {}) {
  ParseOptions options;
  options.start = start;
  // CLI11 has checked the name already.
  options.format = grammar_format(input.format, path).value_or(GrammarFormat::Cgram);
  options.schema.whitespace = parse_json_whitespace(input.whitespace).value_or(JsonWhitespace::Flexible);
  options.schema.strict = input.strict;
  options.tool_format = parse_tool_format(input.tool_format).value_or(ToolFormat::Hermes);
  options.open_tool_arguments = input.open_tool_arguments;
  options.schema.property_order = parse_json_property_order(input.property_order).value_or(JsonPropertyOrder::Schema);
  options.max_memory_bytes = input.max_memory_mib << 20;
  // CLI11 has checked it: "unbounded" or a number.
  options.schema.max_whitespace =
      input.max_whitespace == "unbounded" ? std::nullopt
                                          : std::optional<uint32_t>(static_cast<uint32_t>(std::stoul(input.max_whitespace)));
  return options;
}

// An error for the terminal. Messages quote file names and other bytes the
// user gave, so control characters are escaped (lines kept).
inline void print_error(std::string_view message) {
  std::cerr << "cgram: error: " << printable(message, true) << "\n";
}

// Writes `text` to the file `path`, or to standard output when `path` is
// empty. Exit status 0, or 1 with the reason printed.
inline int write_output(const std::string& path, std::string_view text) {
  if (path.empty()) {
    std::cout << text;
    return 0;
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) {
    print_error(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
    return 1;
  }
  return 0;
}

}  // namespace cgram::cli
