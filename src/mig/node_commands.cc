#include "mig/node_commands.h"

#include <utility>

#include "base/process.h"
#include "base/strings.h"

namespace gpuop::mig {
namespace {

Status RunNodeCommand(const std::vector<std::string>& argv, const std::string& what) {
  if (argv.empty()) return InvalidArgument(what + ": empty command");
  const bool chroot = argv[0] == "chroot" && argv.size() >= 3;
  auto r = chroot ? RunCommand({argv.begin() + 2, argv.end()}, argv[1]) : RunCommand(argv);
  if (!r.ok()) return r.status().Annotate(what);
  if (r->status != 0) {
    return Internal(what + " (" + Join(argv, " ") + ") exited " + std::to_string(r->status) + ": " +
                    std::string(Trim(r->output)));
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::string> ExpandCommand(const std::string& command_line, unsigned gpu,
                                       const std::string& bus_id) {
  std::vector<std::string> argv;
  for (std::string word : Split(command_line, ' ')) {
    if (word.empty()) continue;
    for (const auto& [key, value] :
         {std::pair<std::string, std::string>{"{index}", std::to_string(gpu)},
          {"{bus_id}", bus_id}}) {
      for (size_t at; (at = word.find(key)) != std::string::npos;) {
        word.replace(at, key.size(), value);
      }
    }
    argv.push_back(std::move(word));
  }
  return argv;
}

std::function<Status(unsigned gpu, const std::string& bus_id)> GpuResetCommand(
    std::string command_line) {
  return [command_line = std::move(command_line)](unsigned gpu, const std::string& bus_id) {
    return RunNodeCommand(ExpandCommand(command_line, gpu, bus_id),
                          "resetting GPU " + std::to_string(gpu));
  };
}

std::function<Status()> RebootCommand(std::string command_line) {
  return [command_line = std::move(command_line)] {
    return RunNodeCommand(ExpandCommand(command_line, 0, ""), "rebooting the node");
  };
}

}  // namespace gpuop::mig
