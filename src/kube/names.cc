#include "kube/names.h"

#include <algorithm>

#include "base/strings.h"

namespace gpuop::kube {

namespace {

constexpr std::string_view kDns1123LabelFmt = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
constexpr std::string_view kDns1123SubdomainFmt =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr std::string_view kDns1035LabelFmt = "[a-z]([-a-z0-9]*[a-z0-9])?";
constexpr std::string_view kQualifiedNameFmt = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
constexpr std::string_view kLabelValueFmt = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
constexpr std::string_view kConfigMapKeyFmt = "[-._a-zA-Z0-9]+";

// The formats above, matched by hand: they are simple enough, and gpuop's
// node components then carry no std::regex.
bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

// kDns1123LabelFmt; kDns1035LabelFmt when `letter_first`.
bool MatchesDnsLabel(std::string_view v, bool letter_first = false) {
  if (v.empty() || !IsLowerAlnum(v.front()) || !IsLowerAlnum(v.back())) return false;
  if (letter_first && !(v.front() >= 'a' && v.front() <= 'z')) return false;
  return std::all_of(v.begin(), v.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

// kDns1123SubdomainFmt: DNS labels joined by single dots.
bool MatchesDnsSubdomain(std::string_view v) {
  for (const std::string& label : Split(v, '.', /*skip_empty=*/false)) {
    if (!MatchesDnsLabel(label)) return false;
  }
  return true;
}

// kQualifiedNameFmt.
bool MatchesQualifiedName(std::string_view v) {
  if (v.empty() || !IsAlnum(v.front()) || !IsAlnum(v.back())) return false;
  return std::all_of(v.begin(), v.end(),
                     [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

// kConfigMapKeyFmt.
bool MatchesConfigMapKey(std::string_view v) {
  return !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
    return IsAlnum(c) || c == '-' || c == '_' || c == '.';
  });
}

std::string MaxLenError(int n) {
  return "must be no more than " + std::to_string(n) + " characters";
}

std::string RegexError(std::string msg, std::string_view fmt,
                       const std::vector<std::string>& examples) {
  if (examples.empty()) return msg + " (regex used for validation is '" + std::string(fmt) + "')";
  msg += " (e.g. ";
  for (size_t i = 0; i < examples.size(); ++i) {
    if (i > 0) msg += " or ";
    msg += "'" + examples[i] + "', ";
  }
  return msg + "regex used for validation is '" + std::string(fmt) + "')";
}

}  // namespace

std::vector<std::string> IsDns1123Subdomain(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > 253) errs.push_back(MaxLenError(253));
  if (!MatchesDnsSubdomain(value)) {
    errs.push_back(RegexError(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
        "or '.', and must start and end with an alphanumeric character",
        kDns1123SubdomainFmt, {"example.com"}));
  }
  return errs;
}

std::vector<std::string> IsDns1123Label(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > 63) errs.push_back(MaxLenError(63));
  if (!MatchesDnsLabel(value)) {
    if (MatchesDnsSubdomain(value)) {
      errs.push_back("must not contain dots");
    } else {
      errs.push_back(RegexError(
          "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
          "and must start and end with an alphanumeric character",
          kDns1123LabelFmt, {"my-name", "123-abc"}));
    }
  }
  return errs;
}

std::vector<std::string> IsDns1035Label(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > 63) errs.push_back(MaxLenError(63));
  if (!MatchesDnsLabel(value, /*letter_first=*/true)) {
    errs.push_back(RegexError(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
        "an alphabetic character, and end with an alphanumeric character",
        kDns1035LabelFmt, {"my-name", "abc-123"}));
  }
  return errs;
}

std::vector<std::string> IsPathSegmentName(std::string_view value) {
  std::vector<std::string> errs;
  if (value == "." || value == "..") {
    errs.push_back("may not be '" + std::string(value) + "'");
    return errs;
  }
  if (value.find('/') != std::string_view::npos) errs.push_back("may not contain '/'");
  if (value.find('%') != std::string_view::npos) errs.push_back("may not contain '%'");
  return errs;
}

std::vector<std::string> IsQualifiedName(std::string_view value) {
  std::vector<std::string> errs;
  auto parts = Split(value, '/', /*skip_empty=*/false);
  std::string name;
  auto key_msg = [] {
    return RegexError(
        "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
        "an alphanumeric character",
        kQualifiedNameFmt, {"MyName", "my.name", "123-abc"});
  };
  if (parts.size() == 1) {
    name = parts[0];
  } else if (parts.size() == 2) {
    const std::string& prefix = parts[0];
    name = parts[1];
    if (prefix.empty()) {
      errs.push_back("prefix part must be non-empty");
    } else {
      for (const std::string& m : IsDns1123Subdomain(prefix)) errs.push_back("prefix part " + m);
    }
  } else {
    errs.push_back("a qualified name " + key_msg() +
                   " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
    return errs;
  }
  if (name.empty()) {
    errs.push_back("name part must be non-empty");
  } else if (name.size() > 63) {
    errs.push_back("name part " + MaxLenError(63));
  }
  if (!MatchesQualifiedName(name)) errs.push_back("name part " + key_msg());
  return errs;
}

std::vector<std::string> IsLabelValue(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > 63) errs.push_back(MaxLenError(63));
  if (!value.empty() && !MatchesQualifiedName(value)) {
    errs.push_back(RegexError(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
        "or '.', and must start and end with an alphanumeric character",
        kLabelValueFmt, {"MyValue", "my_value", "12345"}));
  }
  return errs;
}

std::vector<std::string> IsConfigMapKey(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > 253) errs.push_back(MaxLenError(253));
  if (!MatchesConfigMapKey(value)) {
    errs.push_back(
        RegexError("a valid config key must consist of alphanumeric characters, '-', "
                   "'_' or '.'",
                   kConfigMapKeyFmt, {"key.name", "KEY_NAME", "key-name"}));
  }
  if (value == ".")
    errs.push_back("must not be '.'");
  else if (value == "..")
    errs.push_back("must not be '..'");
  else if (StartsWith(value, ".."))
    errs.push_back("must not start with '..'");
  return errs;
}

}  // namespace gpuop::kube
