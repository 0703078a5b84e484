// The request heads the component HTTP server (/metrics, /healthz) reads from
// any peer that can reach its port, pipelined as the server parses them.
// Invariants: a parsed head is consumed whole and within the input, and its
// views point into it.
#include "fuzz_util.h"
#include "http/request.h"

using namespace gpuop::http;
using gpuop::fuzz::Check;

namespace {

bool Within(std::string_view part, std::string_view whole) {
  return part.empty() ||
         (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest = gpuop::fuzz::AsText(data, size);
  while (!rest.empty()) {
    Request req;
    size_t consumed = 0;
    ParseResult r = ParseRequest(rest, &req, &consumed);
    if (r != ParseResult::kRequest) break;
    Check(consumed > 0 && consumed <= rest.size(), "a request head is consumed beyond the input");
    std::string_view head = rest.substr(0, consumed);
    // An absolute-form target without a path reads as "/", which is not in the head.
    Check(Within(req.method, head) && (Within(req.path, head) || req.path == "/"),
          "a parsed request points outside its head");
    Check(!req.method.empty(), "a parsed request has no method");
    rest.remove_prefix(consumed);
  }
  return 0;
}
