#include "runtime/diff.h"

#include <cstdint>
#include <vector>

namespace gpuop::runtime {
namespace {

// Lines keep their '\n', so "x" and "x\n" differ like they do for diff(1).
std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    size_t len = nl == std::string_view::npos ? text.size() : nl + 1;
    out.push_back(text.substr(0, len));
    text.remove_prefix(len);
  }
  return out;
}

enum class Op : uint8_t { kEqual, kDelete, kInsert };
struct Edit {
  Op op;
  size_t a;  // index in before (kEqual, kDelete)
  size_t b;  // index in after (kEqual, kInsert)
};

// Longest common subsequence by dynamic programming; config files are small.
// Past a size where the table would be large, every line is replaced, which
// is still a correct diff.
std::vector<Edit> Edits(const std::vector<std::string_view>& a,
                        const std::vector<std::string_view>& b) {
  std::vector<Edit> out;
  const size_t n = a.size(), m = b.size();
  constexpr size_t kMaxCells = 16u << 20;
  if (n != 0 && m != 0 && (n + 1) * (m + 1) > kMaxCells) {
    for (size_t i = 0; i < n; ++i) out.push_back({Op::kDelete, i, 0});
    for (size_t j = 0; j < m; ++j) out.push_back({Op::kInsert, 0, j});
    return out;
  }
  std::vector<uint32_t> lcs((n + 1) * (m + 1), 0);
  auto at = [&](size_t i, size_t j) -> uint32_t& { return lcs[i * (m + 1) + j]; };
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      at(i, j) = a[i] == b[j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
    }
  }
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      out.push_back({Op::kEqual, i++, j++});
    } else if (j < m && (i == n || at(i, j + 1) > at(i + 1, j))) {
      out.push_back({Op::kInsert, i, j++});
    } else {
      out.push_back({Op::kDelete, i++, j});
    }
  }
  return out;
}

void AppendLine(std::string* out, char tag, std::string_view line) {
  out->push_back(tag);
  out->append(line);
  if (line.empty() || line.back() != '\n') out->append("\n\\ No newline at end of file\n");
}

std::string Range(size_t start, size_t len) {
  // diff -u: 1-based start; an empty range names the line before it.
  std::string s = std::to_string(len == 0 ? start : start + 1);
  if (len != 1) s += "," + std::to_string(len);
  return s;
}

}  // namespace

std::string UnifiedDiff(std::string_view before_label, std::string_view after_label,
                        std::string_view before, std::string_view after, int context) {
  if (before == after) return "";
  const auto a = Lines(before);
  const auto b = Lines(after);
  const auto edits = Edits(a, b);
  const size_t ctx = context < 0 ? 0 : static_cast<size_t>(context);

  std::string out;
  out.append("--- ").append(before_label).append("\n");
  out.append("+++ ").append(after_label).append("\n");

  size_t k = 0;
  while (k < edits.size()) {
    // Find the next change, then extend the hunk while changes are close.
    size_t first = k;
    while (first < edits.size() && edits[first].op == Op::kEqual) ++first;
    if (first == edits.size()) break;
    size_t start = first >= ctx ? first - ctx : 0;
    if (start < k) start = k;
    size_t end = first;  // one past the last change in the hunk
    size_t scan = first;
    while (scan < edits.size()) {
      if (edits[scan].op != Op::kEqual) {
        end = scan + 1;
        ++scan;
        continue;
      }
      size_t run = scan;
      while (run < edits.size() && edits[run].op == Op::kEqual) ++run;
      if (run == edits.size() || run - scan > 2 * ctx) break;
      scan = run;
    }
    size_t stop = std::min(edits.size(), end + ctx);

    size_t a_start = edits[start].a, b_start = edits[start].b, a_len = 0, b_len = 0;
    for (size_t e = start; e < stop; ++e) {
      if (edits[e].op != Op::kInsert) ++a_len;
      if (edits[e].op != Op::kDelete) ++b_len;
    }
    out.append("@@ -").append(Range(a_start, a_len)).append(" +");
    out.append(Range(b_start, b_len)).append(" @@\n");
    for (size_t e = start; e < stop; ++e) {
      switch (edits[e].op) {
        case Op::kEqual:
          AppendLine(&out, ' ', a[edits[e].a]);
          break;
        case Op::kDelete:
          AppendLine(&out, '-', a[edits[e].a]);
          break;
        case Op::kInsert:
          AppendLine(&out, '+', b[edits[e].b]);
          break;
      }
    }
    k = stop;
  }
  return out;
}

}  // namespace gpuop::runtime
