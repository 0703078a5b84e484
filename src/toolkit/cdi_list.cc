#include "toolkit/cdi_list.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/files.h"
#include "base/strings.h"
#include "toolkit/cdi_spec.h"

namespace gpuop::toolkit {
namespace {

// Where one fully-qualified name is defined.
struct Definition {
  int priority = 0;
  std::vector<size_t> files;  // indexes into the input, all of `priority`
};

}  // namespace

bool IsCdiSpecFileName(const std::string& name) {
  return !StartsWith(name, ".") &&
         (EndsWith(name, ".yaml") || EndsWith(name, ".yml") || EndsWith(name, ".json"));
}

CdiListing ListCdiDevices(const std::vector<CdiSpecFile>& files) {
  CdiListing out;
  std::map<std::string, Definition> defs;
  for (size_t i = 0; i < files.size(); ++i) {
    const CdiSpecFile& f = files[i];
    if (!f.read_error.empty()) {
      out.problems.push_back({f.path, f.read_error});
      continue;
    }
    auto spec = cdi::Parse(f.content);
    if (!spec.ok()) {
      out.problems.push_back({f.path, spec.status().message()});
      continue;
    }
    Status valid = cdi::Validate(*spec);
    if (!valid.ok()) {
      out.problems.push_back({f.path, valid.message()});
      continue;
    }
    for (const cdi::Device& d : spec->devices) {
      Definition& def = defs[spec->kind + "=" + d.name];
      if (def.files.empty() || f.priority > def.priority) {
        def = {f.priority, {i}};
      } else if (f.priority == def.priority) {
        def.files.push_back(i);
      }
    }
  }
  for (const auto& [name, def] : defs) {
    if (def.files.size() == 1) {
      out.devices.push_back(name);
      continue;
    }
    std::vector<std::string> paths;
    for (size_t i : def.files) paths.push_back(files[i].path);
    for (size_t i : def.files) {
      out.problems.push_back({files[i].path, "device " + name + " is also defined in " +
                                                 Join(paths, " and ") +
                                                 " (same directory); remove one of them"});
    }
  }
  // std::map iteration already sorted the names.
  return out;
}

std::vector<CdiSpecFile> ReadCdiSpecDirs(const std::vector<std::string>& dirs) {
  std::vector<CdiSpecFile> out;
  for (size_t d = 0; d < dirs.size(); ++d) {
    DIR* dir = ::opendir(dirs[d].c_str());
    if (dir == nullptr) continue;
    std::vector<std::string> names;
    while (dirent* e = ::readdir(dir)) {
      std::string name = e->d_name;
      if (IsCdiSpecFileName(name)) names.push_back(name);
    }
    ::closedir(dir);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      CdiSpecFile f;
      f.path = dirs[d] == "/" ? "/" + name : dirs[d] + "/" + name;
      f.priority = static_cast<int>(d);
      struct stat st {};
      if (::stat(f.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        f.read_error = "not a regular file";
      } else if (auto text = ReadFile(f.path); text.ok()) {
        f.content = std::move(*text);
      } else {
        f.read_error = text.status().message();
      }
      out.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace gpuop::toolkit
