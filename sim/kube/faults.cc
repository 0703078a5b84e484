#include "sim/kube/faults.h"

#include <algorithm>
#include <cstdlib>

#include "base/strings.h"

namespace gpuop::simkube {
namespace {

const char* const kVerbs[] = {"get",    "list",  "watch",  "create",
                              "update", "patch", "delete", "deletecollection"};

// A latency: a Go duration (base's grammar), at most an hour.
Result<std::chrono::milliseconds> ParseLatency(std::string_view s, const std::string& rule) {
  auto d = ParseDuration(s);
  if (!d.ok() || *d > std::chrono::hours(1)) {
    return InvalidArgument("fault rule \"" + rule + "\": latency \"" + std::string(s) +
                           "\" is not a duration like 250ms or 2s (at most 1h)");
  }
  return *d;
}

Result<int64_t> ParseCount(std::string_view key, std::string_view v, const std::string& rule) {
  auto n = ParseUint(v);
  if (!n || *n > 1000000000) {
    return InvalidArgument("fault rule \"" + rule + "\": " + std::string(key) + "=" +
                           std::string(v) + " is not a whole number");
  }
  return static_cast<int64_t>(*n);
}

Result<FaultRule> ParseRule(const std::string& text) {
  FaultRule r;
  r.text = text;
  std::vector<std::string> tokens = Split(text, ',');
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string tok(Trim(tokens[i]));
    size_t eq = tok.find('=');
    std::string key = tok.substr(0, eq);
    std::string val = eq == std::string::npos ? "" : tok.substr(eq + 1);
    if (i == 0) {
      if (key == "error") {
        r.kind = FaultKind::kError;
        GPUOP_ASSIGN_OR_RETURN(int64_t code, ParseCount(key, val, text));
        if (code < 400 || code > 599) {
          return InvalidArgument("fault rule \"" + text + "\": error=" + val +
                                 " is not an HTTP error code (400-599)");
        }
        r.code = static_cast<int>(code);
      } else if (key == "latency") {
        r.kind = FaultKind::kLatency;
        GPUOP_ASSIGN_OR_RETURN(r.latency, ParseLatency(val, text));
      } else if (key == "drop-watch") {
        r.kind = FaultKind::kDropWatch;
        r.verbs = {"watch"};
        if (!val.empty()) {
          GPUOP_ASSIGN_OR_RETURN(int64_t n, ParseCount(key, val, text));
          r.after_events = static_cast<int>(n);
        }
      } else if (key == "gone" && val.empty()) {
        r.kind = FaultKind::kGone;
      } else if (key == "pause" && val.empty()) {
        r.kind = FaultKind::kPause;
      } else {
        return InvalidArgument("fault rule \"" + text +
                               "\" must start with error=CODE, latency=DURATION, "
                               "drop-watch[=N], gone or pause");
      }
      continue;
    }
    if (key == "verb") {
      r.verbs.clear();
      for (const auto& v : Split(val, '|')) {
        if (std::find(std::begin(kVerbs), std::end(kVerbs), v) == std::end(kVerbs)) {
          return InvalidArgument("fault rule \"" + text + "\": unknown verb \"" + v +
                                 "\" (get, list, watch, create, update, patch, delete, "
                                 "deletecollection)");
        }
        r.verbs.push_back(v);
      }
    } else if (key == "resource") {
      r.resources = Split(val, '|');
    } else if (key == "rate") {
      char* end = nullptr;
      double d = std::strtod(val.c_str(), &end);
      if (val.empty() || end != val.c_str() + val.size() || !(d >= 0.0 && d <= 1.0)) {
        return InvalidArgument("fault rule \"" + text + "\": rate=" + val +
                               " is not a fraction between 0 and 1");
      }
      r.rate = d;
    } else if (key == "count") {
      GPUOP_ASSIGN_OR_RETURN(r.remaining, ParseCount(key, val, text));
    } else if (key == "after") {
      GPUOP_ASSIGN_OR_RETURN(r.pass_first, ParseCount(key, val, text));
    } else if (key == "retry-after") {
      GPUOP_ASSIGN_OR_RETURN(int64_t n, ParseCount(key, val, text));
      r.retry_after_s = static_cast<int>(n);
    } else {
      return InvalidArgument("fault rule \"" + text + "\": unknown token \"" + tok +
                             "\" (verb=, resource=, rate=, count=, after=, retry-after=)");
    }
  }
  return r;
}

bool Matches(const FaultRule& r, std::string_view verb, std::string_view resource,
             std::string_view group) {
  if (!r.verbs.empty() && std::find(r.verbs.begin(), r.verbs.end(), verb) == r.verbs.end()) {
    return false;
  }
  if (r.resources.empty()) return true;
  std::string qualified =
      group.empty() ? std::string(resource) : std::string(resource) + "." + std::string(group);
  for (const auto& want : r.resources) {
    if (want == "*" || want == resource || want == qualified) return true;
  }
  return false;
}

}  // namespace

Result<std::vector<FaultRule>> ParseFaultSpec(std::string_view spec) {
  std::vector<FaultRule> rules;
  for (const auto& part : Split(spec, ';')) {
    std::string text(Trim(part));
    if (text.empty()) continue;
    GPUOP_ASSIGN_OR_RETURN(FaultRule r, ParseRule(text));
    rules.push_back(std::move(r));
  }
  return rules;
}

Status FaultInjector::Set(std::string_view spec) {
  GPUOP_ASSIGN_OR_RETURN(auto rules, ParseFaultSpec(spec));
  {
    std::lock_guard lock(mu_);
    rules_ = std::move(rules);
  }
  cv_.notify_all();
  return Status::Ok();
}

void FaultInjector::Clear() {
  {
    std::lock_guard lock(mu_);
    rules_.clear();
  }
  cv_.notify_all();
}

nlohmann::json FaultInjector::ToJson() const {
  std::lock_guard lock(mu_);
  nlohmann::json rules = nlohmann::json::array();
  std::vector<std::string> texts;
  for (const auto& r : rules_) {
    nlohmann::json j{{"rule", r.text}};
    if (r.remaining >= 0) j["remaining"] = r.remaining;
    if (r.pass_first > 0) j["after"] = r.pass_first;
    j["fired"] = r.fired;
    rules.push_back(std::move(j));
    texts.push_back(r.text);
  }
  return {{"spec", Join(texts, ";")}, {"rules", std::move(rules)}};
}

FaultDecision FaultInjector::Decide(std::string_view verb, std::string_view resource,
                                    std::string_view group) {
  FaultDecision d;
  std::lock_guard lock(mu_);
  for (auto& r : rules_) {
    if (r.kind == FaultKind::kPause || r.remaining == 0) continue;
    if (!Matches(r, verb, resource, group)) continue;
    if (r.kind == FaultKind::kGone && verb != "watch" && verb != "list") continue;
    if (r.pass_first > 0) {
      --r.pass_first;
      continue;
    }
    if (r.rate < 1.0 && std::uniform_real_distribution<double>(0.0, 1.0)(rng_) >= r.rate) {
      continue;
    }
    bool fired = true;
    switch (r.kind) {
      case FaultKind::kError:
        if (d.error_code)
          fired = false;
        else
          d.error_code = r.code, d.retry_after_s = r.retry_after_s;
        break;
      case FaultKind::kLatency:
        d.latency += r.latency;
        break;
      case FaultKind::kDropWatch:
        if (d.drop_watch_after)
          fired = false;
        else
          d.drop_watch_after = r.after_events;
        break;
      case FaultKind::kGone:
        d.gone = true;
        break;
      case FaultKind::kPause:
        break;
    }
    if (fired) ++r.fired;
    if (fired && r.remaining > 0) --r.remaining;
  }
  return d;
}

bool FaultInjector::paused() const {
  std::lock_guard lock(mu_);
  return std::any_of(rules_.begin(), rules_.end(),
                     [](const FaultRule& r) { return r.kind == FaultKind::kPause; });
}

void FaultInjector::WaitWhilePaused() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] {
    return shutdown_ || std::none_of(rules_.begin(), rules_.end(), [](const FaultRule& r) {
             return r.kind == FaultKind::kPause;
           });
  });
}

void FaultInjector::Shutdown() {
  {
    std::lock_guard lock(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
}

}  // namespace gpuop::simkube
