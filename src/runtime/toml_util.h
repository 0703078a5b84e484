// toml++ at the module boundary: parsing that turns the parser's exception
// into a Status naming file:line:column, and the one TOML output format gpuop
// writes (basic strings, no indentation, tables in key order). Pure
// functions; thread-safe.
#pragma once

#include <toml++/toml.h>

#include <string>
#include <string_view>

#include "base/status.h"

namespace gpuop::runtime {

// Parses `text`; on error: "PATH:LINE:COL: <parser message>" (InvalidArgument).
Result<toml::table> ParseToml(std::string_view path, std::string_view text);

// Serialises a table as TOML, ending with a newline.
std::string FormatToml(const toml::table& table);

// The byte offset of a 1-based line and column (columns count UTF-8 code
// points, as toml++ reports them); text.size() when past the end.
size_t OffsetOfPosition(std::string_view text, size_t line, size_t column);

// Merges `src` into `dst`: tables recursively, every other value replaced.
void DeepMerge(toml::table& dst, const toml::table& src);

}  // namespace gpuop::runtime
