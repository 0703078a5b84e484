// What the fuzz targets share: an invariant check that reports and aborts
// (libFuzzer then keeps the input as a crash artifact), a per-process
// scratch file for the parsers whose entry point reads a path, and the
// [object, patch] input of the patch targets.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gpuop::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input as a JSON array of two, [object, patch]; nullopt for anything else.
inline std::optional<std::pair<nlohmann::json, nlohmann::json>> ObjectAndPatch(const uint8_t* data,
                                                                               size_t size) {
  nlohmann::json in = nlohmann::json::parse(AsText(data, size), nullptr, false);
  if (in.is_discarded() || !in.is_array() || in.size() != 2) return std::nullopt;
  return std::make_pair(std::move(in[0]), std::move(in[1]));
}

// A broken invariant: print what and why, then abort.
inline void Check(bool ok, const char* what, const std::string& detail = "") {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n%s\n", what, detail.c_str());
  std::abort();
}

// Writes `bytes` to a file of this process under $TMPDIR (or /tmp) and
// returns its path: the same path on every call, removed at exit. A plain
// write: the atomic, fsynced one of base/files.h would dominate the run.
inline std::string ScratchFile(std::string_view bytes, const char* name) {
  static const std::string path = [name] {
    const char* dir = std::getenv("TMPDIR");
    std::string p = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/gpuop-fuzz-" +
                    std::to_string(getpid()) + "-" + name;
    static std::string at_exit;
    at_exit = p;
    std::atexit([] { unlink(at_exit.c_str()); });
    return p;
  }();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  Check(f != nullptr, "cannot write the scratch file", path);
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = std::fclose(f) == 0 && ok;
  Check(ok, "cannot write the scratch file", path);
  return path;
}

}  // namespace gpuop::fuzz
