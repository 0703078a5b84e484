// Small string helpers shared by every module. Pure functions, thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuop {

std::vector<std::string> Split(std::string_view s, char sep, bool skip_empty = true);
std::string_view Trim(std::string_view s);
bool StartsWith(std::string_view s, std::string_view prefix);
bool EndsWith(std::string_view s, std::string_view suffix);
std::string ToLower(std::string_view s);
std::string Join(const std::vector<std::string>& parts, std::string_view sep);
// A JSON string literal, with quotes and escapes.
std::string JsonQuote(std::string_view s);
// For an error message that quotes an input: `text` whole when it has at
// most `max_bytes`, else its first `max_bytes` (cut between UTF-8 characters)
// and "... (N bytes)". Errors go to logs, and a misdirected path may point at
// a secret, so no input is quoted whole. Escape line breaks before.
std::string Excerpt(std::string_view text, size_t max_bytes = 80);
// The offset of the first byte of `s` that is not part of well-formed UTF-8
// (RFC 3629: no overlong forms, surrogates or code points past U+10FFFF);
// nullopt when all of `s` is UTF-8. YAML and JSON text must be UTF-8, and
// nlohmann::json cannot serialise a string that is not.
std::optional<size_t> InvalidUtf8Offset(std::string_view s);
// Strict unsigned parse of the whole string (decimal, or hex with 0x).
std::optional<uint64_t> ParseUint(std::string_view s);
// Standard base64 (RFC 4648, '+' and '/'), as kubeconfig *-data fields and
// Secret data hold it. Whitespace and line breaks are skipped and padding may
// be missing; nullopt for any other character, data after '=', or a single
// dangling character.
std::optional<std::string> Base64Decode(std::string_view in);

// FNV-1a, 32 bits: a hash stable across runs, builds and machines (std::hash
// is not). `seed` continues an earlier hash.
uint32_t Fnv1a32(std::string_view s, uint32_t seed = 2166136261u);

// A Go-style duration: "500ms", "30s", "5m", "1h", or a sum like "1m30s".
// InvalidArgument for anything else, and for zero.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text);

// The standard reason phrase of an HTTP status ("Not Found"); "" for a code
// without one here.
std::string_view HttpReasonPhrase(int status);

}  // namespace gpuop
