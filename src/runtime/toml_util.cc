#include "runtime/toml_util.h"

#include <sstream>

namespace gpuop::runtime {

Result<toml::table> ParseToml(std::string_view path, std::string_view text) {
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    return InvalidArgument(std::string(path) + ":" + std::to_string(at.line) + ":" +
                           std::to_string(at.column) + ": " + std::string(e.description()) +
                           " (fix the file or restore it from a backup; nothing was written)");
  }
}

std::string FormatToml(const toml::table& table) {
  constexpr auto kFlags = toml::toml_formatter::default_flags &
                          ~toml::format_flags::allow_literal_strings &
                          ~toml::format_flags::indentation;
  std::ostringstream out;
  out << toml::toml_formatter(table, kFlags);
  std::string s = out.str();
  if (s.empty() || s.back() != '\n') s += '\n';
  return s;
}

size_t OffsetOfPosition(std::string_view text, size_t line, size_t column) {
  size_t pos = 0;
  for (size_t l = 1; l < line; ++l) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) return text.size();
    pos = nl + 1;
  }
  for (size_t c = 1; c < column && pos < text.size(); ++c) {
    ++pos;  // skip one code point: its lead byte and continuation bytes
    while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
  }
  return pos;
}

void DeepMerge(toml::table& dst, const toml::table& src) {
  for (auto&& [key, value] : src) {
    toml::table* dst_sub = dst[key].as_table();
    const toml::table* src_sub = value.as_table();
    if (dst_sub != nullptr && src_sub != nullptr) {
      DeepMerge(*dst_sub, *src_sub);
    } else {
      dst.insert_or_assign(key, value);
    }
  }
}

}  // namespace gpuop::runtime
