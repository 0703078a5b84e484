// A small line diff for `gpuop runtime configure --dry-run`: the unified
// format `diff -u` and `patch` read (headers, @@ hunks with 3 lines of
// context). Pure functions of their inputs; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace gpuop::runtime {

// The unified diff turning `before` into `after`, with `---`/`+++` headers
// naming `before_label` and `after_label`. Empty when the texts are equal.
// A last line without a newline gets the "\ No newline at end of file"
// marker, like diff(1).
std::string UnifiedDiff(std::string_view before_label, std::string_view after_label,
                        std::string_view before, std::string_view after, int context = 3);

}  // namespace gpuop::runtime
