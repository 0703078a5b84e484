#include "host/mig_minors.h"

#include "base/strings.h"

namespace gpuop::host {
namespace {

// "gpu12" with prefix "gpu" → 12.
std::optional<unsigned> Numbered(std::string_view s, std::string_view prefix) {
  if (!StartsWith(s, prefix) || s.size() == prefix.size()) return std::nullopt;
  std::string_view digits = s.substr(prefix.size());
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  auto v = ParseUint(digits);
  if (!v || *v > 0xFFFFFFu) return std::nullopt;
  return static_cast<unsigned>(*v);
}

}  // namespace

std::optional<unsigned> MigMinors::Gi(unsigned gpu_minor, unsigned gi) const {
  auto it = minors_.find({gpu_minor, gi, -1});
  if (it == minors_.end()) return std::nullopt;
  return it->second;
}

std::optional<unsigned> MigMinors::Ci(unsigned gpu_minor, unsigned gi, unsigned ci) const {
  auto it = minors_.find({gpu_minor, gi, static_cast<int>(ci)});
  if (it == minors_.end()) return std::nullopt;
  return it->second;
}

Result<MigMinors> ParseMigMinors(std::string_view text, const std::string& origin) {
  MigMinors out;
  size_t line_no = 0;
  for (const std::string& raw : Split(text, '\n', /*skip_empty=*/false)) {
    ++line_no;
    std::string_view line = Trim(raw);
    if (line.empty() || !StartsWith(line, "gpu")) continue;
    auto bad = [&] {
      return InvalidArgument(origin + " line " + std::to_string(line_no) + " \"" +
                             std::string(line) +
                             "\" is not \"gpu<N>/gi<G>[/ci<C>]/access <minor>\"");
    };
    auto fields = Split(line, ' ');
    if (fields.size() != 2) return bad();
    auto minor = ParseUint(fields[1]);
    if (!minor || *minor > 0xFFFFFu) return bad();
    auto parts = Split(fields[0], '/', /*skip_empty=*/false);
    if (parts.size() < 3 || parts.size() > 4 || parts.back() != "access") return bad();
    auto gpu = Numbered(parts[0], "gpu");
    auto gi = Numbered(parts[1], "gi");
    if (!gpu || !gi) return bad();
    int ci = -1;
    if (parts.size() == 4) {
      auto c = Numbered(parts[2], "ci");
      if (!c) return bad();
      ci = static_cast<int>(*c);
    }
    out.Add(*gpu, *gi, ci, static_cast<unsigned>(*minor));
  }
  return out;
}

}  // namespace gpuop::host
