#include "runtime/containerd.h"

#include <fnmatch.h>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/strings.h"
#include "runtime/toml_util.h"

namespace gpuop::runtime {
namespace {

constexpr std::string_view kRuncType = "io.containerd.runc.v2";
constexpr std::string_view kDefaultRuntimeName = "runc";  // containerd's built-in default


// What gpuop changed outside its drop-in, kept in the drop-in itself so that
// --revert can undo exactly that.
struct Record {
  std::string config;                         // the main config's host path
  std::string import_edit;                    // text inserted into it; empty: none
  std::optional<std::string> created_config;  // its bytes when gpuop created it
  std::vector<std::string> created_dirs;      // directories gpuop created, deepest first
};

bool OwnedByGpuop(std::string_view drop_in) {
  return StartsWith(drop_in, kRecordPrefix) ||
         drop_in.find("\n" + std::string(kRecordPrefix)) != std::string_view::npos;
}

std::optional<Record> ReadRecord(std::string_view drop_in) {
  size_t at =
      StartsWith(drop_in, kRecordPrefix) ? 0 : drop_in.find("\n" + std::string(kRecordPrefix));
  if (at == std::string_view::npos) return std::nullopt;
  if (at != 0) ++at;
  size_t start = at + kRecordPrefix.size();
  size_t end = drop_in.find('\n', start);
  std::string_view json = drop_in.substr(start, end == std::string_view::npos ? end : end - start);
  try {
    auto j = nlohmann::json::parse(json);
    Record r;
    r.config = j.value("config", "");
    r.import_edit = j.value("import_edit", "");
    // "created_dir": one directory, as records written before 2026-12-06 have it.
    if (j.contains("created_dir") && j["created_dir"].is_string()) {
      r.created_dirs.push_back(j["created_dir"].get<std::string>());
    }
    if (j.contains("created_dirs") && j["created_dirs"].is_array()) {
      for (const auto& d : j["created_dirs"]) {
        if (d.is_string()) r.created_dirs.push_back(d.get<std::string>());
      }
    }
    if (j.contains("created_config") && j["created_config"].is_string()) {
      r.created_config = j["created_config"].get<std::string>();
    }
    return r;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

std::string RecordLine(const Record& r) {
  nlohmann::json j = {{"config", r.config}, {"import_edit", r.import_edit}};
  if (!r.created_dirs.empty()) j["created_dirs"] = r.created_dirs;
  j["created_config"] = r.created_config ? nlohmann::json(*r.created_config) : nlohmann::json();
  return std::string(kRecordPrefix) + j.dump() + "\n";
}

Result<int> ConfigVersion(std::string_view path, const toml::table& t) {
  auto v = t["version"].value<int64_t>();
  if (!v) {
    return InvalidArgument(std::string(path) +
                           " has no `version` key: containerd reads it as config version 1, "
                           "which gpuop does not edit; add `version = 2` as its first line "
                           "(containerd 1.3 and later read it)");
  }
  if (*v != 2 && *v != 3) {
    return InvalidArgument(std::string(path) + ": containerd config version " + std::to_string(*v) +
                           " is not supported (gpuop edits versions 2 and 3)");
  }
  return static_cast<int>(*v);
}

const toml::table* PluginTable(const toml::table& t, std::string_view plugin) {
  const toml::table* plugins = t["plugins"].as_table();
  return plugins == nullptr ? nullptr : (*plugins)[plugin].as_table();
}

toml::table& EnsureTable(toml::table& t, std::string_view key) {
  if (!t[key].is_table()) t.insert_or_assign(key, toml::table{});
  return *t[key].as_table();
}

// The extent of a TOML array in `text`, found by a small lexer that knows
// strings and comments: `open` is its '[', `close` its ']', and `last` the
// end of the last token before the ']' (`last_char` is that token's last
// character: '[' for an empty array, ',' after a trailing comma).
struct ArraySpan {
  size_t open = 0;
  size_t close = 0;
  size_t last = 0;
  char last_char = '[';
};

Result<ArraySpan> ScanArray(std::string_view path, std::string_view text, size_t open) {
  if (open >= text.size() || text[open] != '[') {
    return Internal(std::string(path) + ": cannot locate the `imports` array");
  }
  ArraySpan span;
  span.open = open;
  span.last = open + 1;
  int depth = 0;
  size_t i = open;
  while (i < text.size()) {
    char c = text[i];
    if (c == '#') {
      size_t nl = text.find('\n', i);
      i = nl == std::string_view::npos ? text.size() : nl;
      continue;
    }
    if (c == '"' || c == '\'') {
      std::string triple(3, c);
      size_t end;
      if (text.substr(i, 3) == triple) {
        end = text.find(triple, i + 3);
        if (end != std::string_view::npos) end += 3;
      } else {
        end = i + 1;
        while (end < text.size() && text[end] != c) end += (c == '"' && text[end] == '\\') ? 2 : 1;
        if (end < text.size()) ++end;
      }
      if (end == std::string_view::npos || end > text.size()) break;
      span.last = end;
      span.last_char = c;
      i = end;
      continue;
    }
    if (c == '[') ++depth;
    if (c == ']' && --depth == 0) {
      span.close = i;
      return span;
    }
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
      span.last = i + 1;
      span.last_char = c;
    }
    ++i;
  }
  return Internal(std::string(path) + ": the `imports` array has no end");
}

Result<ArraySpan> ImportsSpan(std::string_view path, std::string_view text, const toml::table& t) {
  const toml::node* imports = t.get("imports");
  const auto& begin = imports->source().begin;
  return ScanArray(path, text, OffsetOfPosition(text, begin.line, begin.column));
}

std::string ImportLine(std::string_view drop_in_path) {
  return "imports = [" + JsonQuote(drop_in_path) + "]  " + std::string(kImportMarker) + "\n";
}

struct TextEdit {
  std::string text;      // the whole new file
  std::string inserted;  // exactly what was inserted
};

// Adds the drop-in to the main config's imports with one insertion: a new
// `imports` line after `version`, or one more element in an existing array.
Result<TextEdit> AddImport(std::string_view path, std::string_view text, const toml::table& t,
                           std::string_view drop_in_path) {
  TextEdit edit;
  edit.text = std::string(text);
  if (!t.contains("imports")) {
    size_t line = t.get("version")->source().begin.line;
    size_t at = OffsetOfPosition(text, line + 1, 1);
    std::string ins = ImportLine(drop_in_path);
    if (at == text.size() && (text.empty() || text.back() != '\n')) {
      ins = "\n" + ins.substr(0, ins.size() - 1);  // the version line ends the file
    }
    edit.text.insert(at, ins);
    edit.inserted = std::move(ins);
    return edit;
  }
  if (!t["imports"].is_array()) {
    return InvalidArgument(std::string(path) + ": `imports` is not an array of paths");
  }
  GPUOP_ASSIGN_OR_RETURN(ArraySpan span, ImportsSpan(path, text, t));
  std::string quoted = JsonQuote(drop_in_path);
  std::string ins = span.last_char == '['   ? quoted
                    : span.last_char == ',' ? " " + quoted + ","
                                            : ", " + quoted;
  edit.text.insert(span.last, ins);
  edit.inserted = std::move(ins);
  return edit;
}

// Removes the literal `drop_in_path` from the imports array and one comma
// next to it; returns `text` unchanged when the array does not list it.
Result<std::string> RemoveImportLiteral(std::string_view path, std::string_view text,
                                        std::string_view drop_in_path) {
  GPUOP_ASSIGN_OR_RETURN(toml::table t, ParseToml(path, text));
  const toml::array* arr = t["imports"].as_array();
  if (arr == nullptr) return std::string(text);
  GPUOP_ASSIGN_OR_RETURN(ArraySpan span, ImportsSpan(path, text, t));
  std::string quoted = JsonQuote(drop_in_path);
  size_t at = text.substr(0, span.close).find(quoted, span.open);
  if (at == std::string_view::npos) return std::string(text);
  size_t from = at, to = at + quoted.size();
  size_t before = from;
  while (before > span.open + 1 && (text[before - 1] == ' ' || text[before - 1] == '\t')) --before;
  size_t after = to;
  while (after < span.close && (text[after] == ' ' || text[after] == '\t')) ++after;
  if (before > span.open + 1 && text[before - 1] == ',') {
    from = before - 1;
  } else if (after < span.close && text[after] == ',') {
    to = after + 1;
    while (to < span.close && text[to] == ' ') ++to;
  }
  std::string out(text);
  out.erase(from, to - from);
  return out;
}

// The line (with its newline) holding gpuop's import marker, if any.
std::string MarkedImportLine(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    std::string_view line = text.substr(pos, end - pos);
    if (StartsWith(Trim(line), "imports") && line.find(kImportMarker) != std::string_view::npos) {
      return std::string(line);
    }
    pos = end;
  }
  return "";
}

bool AfterDropIn(std::string_view path, std::string_view drop_in_path) {
  return DirName(path) == DirName(drop_in_path) && path > drop_in_path;
}

struct Parsed {
  std::string path;
  toml::table table;
};

Result<std::vector<Parsed>> ParseImported(const ContainerdInputs& in) {
  std::vector<Parsed> out;
  for (const ImportedFile& f : in.imported) {
    if (f.path == in.drop_in_path) continue;
    GPUOP_ASSIGN_OR_RETURN(toml::table t, ParseToml(f.path, f.content));
    out.push_back({f.path, std::move(t)});
  }
  return out;
}

// The CRI section containerd ends up with from the main config and the files
// imported before the drop-in: version 2 replaces the section per file
// (containerd 1.x), version 3 merges key by key (containerd 2.x).
std::optional<toml::table> EffectiveCri(int version, const toml::table* main,
                                        const std::vector<Parsed>& imported,
                                        std::string_view drop_in_path) {
  std::string_view plugin = version == 3 ? kCriPluginV3 : kCriPluginV2;
  std::optional<toml::table> cri;
  auto apply = [&](const toml::table& t) {
    const toml::table* section = PluginTable(t, plugin);
    if (section == nullptr) return;
    if (version == 3 && cri) {
      DeepMerge(*cri, *section);
    } else {
      cri = *section;
    }
  };
  if (main != nullptr) apply(*main);
  for (const Parsed& p : imported) {
    if (!AfterDropIn(p.path, drop_in_path)) apply(p.table);
  }
  return cri;
}

std::string DefaultRuntimeName(const std::optional<toml::table>& cri) {
  if (!cri) return std::string(kDefaultRuntimeName);
  return (*cri)["containerd"]["default_runtime_name"].value_or(std::string(kDefaultRuntimeName));
}

// The handler's table: the default runtime's (or runc's) runtime_type and
// options; runtime_type io.containerd.runc.v2 when there is none.
toml::table HandlerRuntime(const std::optional<toml::table>& cri, std::string_view name) {
  toml::table runtime;
  const toml::table* runtimes = cri ? (*cri)["containerd"]["runtimes"].as_table() : nullptr;
  std::string default_name = DefaultRuntimeName(cri);
  if (runtimes != nullptr) {
    const toml::table* src = nullptr;
    if (default_name != name) src = (*runtimes)[default_name].as_table();
    if (src == nullptr) src = (*runtimes)[kDefaultRuntimeName].as_table();
    if (src != nullptr) runtime = *src;
  }
  if (!runtime.contains("runtime_type")) runtime.insert("runtime_type", std::string(kRuncType));
  return runtime;
}

std::string DropInHeader(const ConfigureOptions& opts, std::string_view config_path, int version) {
  std::string h =
      "# Written by `gpuop runtime configure --runtime containerd`: the CRI runtime\n"
      "# handler \"" +
      opts.runtime_name +
      "\" (the RuntimeClass handler name).\n"
      "# `gpuop runtime configure --runtime containerd --revert` removes this file and\n"
      "# the imports entry gpuop added to " +
      std::string(config_path) + ".\n";
  if (version == 2) {
    h += "# containerd 1.x replaces a whole plugin section with an imported one, so this\n"
         "# file also carries a copy of the CRI plugin settings of " +
         std::string(config_path) +
         ":\n# after changing them there, run `gpuop runtime configure` again.\n";
  }
  return h;
}

Result<Plan> Configure(const ContainerdInputs& in, const ConfigureOptions& opts) {
  if (in.drop_in && !OwnedByGpuop(*in.drop_in)) {
    return FailedPrecondition(in.drop_in_path +
                              " exists and was not written by gpuop (NVIDIA's toolkit writes "
                              "this path); move it away, then run gpuop runtime configure again");
  }
  std::optional<Record> old = in.drop_in ? ReadRecord(*in.drop_in) : std::nullopt;
  Record record;
  record.config = in.config_path;
  if (old) {
    record.created_dirs = old->created_dirs;
  } else {
    record.created_dirs = in.missing_dirs;
  }

  // The main config: parsed, or created.
  std::string main_text;
  bool creating = !in.main.has_value();
  if (creating) {
    main_text = "version = " + std::to_string(in.installed_major >= 2 ? 3 : 2) + "\n";
  } else {
    main_text = *in.main;
  }
  GPUOP_ASSIGN_OR_RETURN(toml::table main, ParseToml(in.config_path, main_text));
  GPUOP_ASSIGN_OR_RETURN(int version, ConfigVersion(in.config_path, main));
  GPUOP_ASSIGN_OR_RETURN(std::vector<Parsed> imported, ParseImported(in));

  // Only version 2 drop-ins copy the CRI section, so only there does a later
  // file that replaces it lose the handler.
  if (version == 2) {
    for (const Parsed& p : imported) {
      if (AfterDropIn(p.path, in.drop_in_path) && PluginTable(p.table, kCriPluginV2) != nullptr) {
        return FailedPrecondition(
            p.path + " is imported after " + in.drop_in_path + " and replaces the whole CRI " +
            "plugin section, which would drop the runtime handler; merge it into " +
            in.config_path + " or give it a name that sorts before the drop-in");
      }
    }
  }

  // The imports entry.
  GPUOP_ASSIGN_OR_RETURN(auto imports, ContainerdImports(in.config_path, main_text));
  std::string new_main = main_text;
  if (!ImportsCover(imports, in.drop_in_path)) {
    GPUOP_ASSIGN_OR_RETURN(TextEdit edit,
                           AddImport(in.config_path, main_text, main, in.drop_in_path));
    new_main = std::move(edit.text);
    record.import_edit = std::move(edit.inserted);
  } else if (old && !old->import_edit.empty() &&
             main_text.find(old->import_edit) != std::string::npos) {
    record.import_edit = old->import_edit;  // added by an earlier run
  } else {
    record.import_edit = MarkedImportLine(main_text);
  }
  if (creating) {
    record.created_config = new_main;
  } else if (old && old->created_config && *old->created_config == main_text) {
    record.created_config = old->created_config;
  }

  // The drop-in.
  std::optional<toml::table> cri = EffectiveCri(version, &main, imported, in.drop_in_path);
  toml::table handler = HandlerRuntime(cri, opts.runtime_name);
  toml::table section = version == 2 && cri ? *cri : toml::table{};
  toml::table& ctd = EnsureTable(section, "containerd");
  toml::table& runtimes = EnsureTable(ctd, "runtimes");
  if (version == 2) {
    // Defining `runtimes` replaces containerd's built-in map, so the default
    // runtime must stay defined or the CRI plugin fails to load.
    std::string default_name = DefaultRuntimeName(cri);
    if (default_name == kDefaultRuntimeName && !runtimes.contains(default_name)) {
      runtimes.insert(default_name, toml::table{{"runtime_type", std::string(kRuncType)}});
    }
  }
  runtimes.insert_or_assign(opts.runtime_name, std::move(handler));
  if (opts.set_as_default) ctd.insert_or_assign("default_runtime_name", opts.runtime_name);
  if (opts.cdi_enabled) {
    section.insert_or_assign("enable_cdi", true);
    if (!section.contains("cdi_spec_dirs")) {
      section.insert("cdi_spec_dirs", toml::array{"/etc/cdi", "/var/run/cdi"});
    }
  }
  toml::table root;
  root.insert("version", version);
  toml::table plugins;
  plugins.insert(version == 3 ? kCriPluginV3 : kCriPluginV2, std::move(section));
  root.insert("plugins", std::move(plugins));
  std::string drop_in =
      DropInHeader(opts, in.config_path, version) + RecordLine(record) + "\n" + FormatToml(root);

  // Validate the whole plan before anything is written.
  GPUOP_RETURN_IF_ERROR(ParseToml(in.drop_in_path, drop_in).status());
  GPUOP_ASSIGN_OR_RETURN(auto new_imports, ContainerdImports(in.config_path, new_main));
  if (!ImportsCover(new_imports, in.drop_in_path)) {
    return Internal(in.config_path + " would not import " + in.drop_in_path);
  }

  Plan plan;
  // The drop-in first: containerd fails to start on an import that is missing.
  if (in.drop_in != drop_in) plan.changes.push_back({in.drop_in_path, in.drop_in, drop_in});
  if (creating || new_main != *in.main) plan.changes.push_back({in.config_path, in.main, new_main});
  plan.notes.push_back("configured containerd runtime handler '" + opts.runtime_name +
                       "' (RuntimeClass handler: " + opts.runtime_name + ")");
  if (plan.changes.empty()) {
    plan.notes.push_back("nothing to change: " + in.drop_in_path + " is up to date");
    return plan;
  }
  if (opts.cdi_enabled) {
    plan.notes.push_back("CDI: enable_cdi = true (containerd 1.7 and later; 1.6 ignores it)");
  }
  plan.notes.push_back(
      "restart containerd to apply: systemctl restart containerd (containerd reads its config "
      "only at start; SIGHUP stops containerd 1.x instead of reloading it)");
  return plan;
}

Result<Plan> Revert(const ContainerdInputs& in, const ConfigureOptions& opts) {
  Plan plan;
  bool ours = in.drop_in && OwnedByGpuop(*in.drop_in);
  std::optional<Record> record = ours ? ReadRecord(*in.drop_in) : std::nullopt;
  if (in.drop_in && !ours) {
    plan.notes.push_back("left " + in.drop_in_path + " in place: it was not written by gpuop");
  }

  std::optional<std::string> new_main = in.main;
  if (in.main) {
    std::string text = *in.main;
    bool removed = false;
    if (record && !record->import_edit.empty()) {
      size_t at = text.find(record->import_edit);
      if (at != std::string::npos) {
        text.erase(at, record->import_edit.size());
        removed = true;
      }
    }
    if (!removed) {
      std::string line = MarkedImportLine(text);
      if (!line.empty()) text.erase(text.find(line), line.size());
    }
    // containerd refuses to start when a plain (non-glob) import is missing,
    // so an entry naming the drop-in must go with it.
    if (ours || !in.drop_in) {
      GPUOP_ASSIGN_OR_RETURN(text, RemoveImportLiteral(in.config_path, text, in.drop_in_path));
    }
    GPUOP_RETURN_IF_ERROR(ParseToml(in.config_path, text).status());
    if (record && record->created_config && *record->created_config == *in.main) {
      plan.changes.push_back({in.config_path, in.main, std::nullopt});
      new_main.reset();
    } else if (text != *in.main) {
      plan.changes.push_back({in.config_path, in.main, text});
      new_main = text;
    }
  }
  if (ours) plan.changes.push_back({in.drop_in_path, in.drop_in, std::nullopt});
  if (record) {
    for (const std::string& dir : record->created_dirs) {
      plan.changes.push_back({dir, std::nullopt, std::nullopt, true});
    }
  }

  // After the revert, the default runtime must not be the removed handler.
  if (new_main) {
    GPUOP_ASSIGN_OR_RETURN(toml::table t, ParseToml(in.config_path, *new_main));
    GPUOP_ASSIGN_OR_RETURN(std::vector<Parsed> imported, ParseImported(in));
    int version = t["version"].value_or(2);
    auto cri = EffectiveCri(version, &t, imported, in.drop_in_path);
    if (DefaultRuntimeName(cri) == opts.runtime_name) {
      plan.notes.push_back("warning: containerd's default_runtime_name is still '" +
                           opts.runtime_name + "', set outside gpuop (in " + in.config_path +
                           " or a file it imports); set it back to runc there");
    }
  }

  if (plan.changes.empty()) {
    plan.notes.push_back("nothing to revert: gpuop has not configured containerd at " +
                         in.config_path);
    return plan;
  }
  plan.notes.push_back("removed containerd runtime handler '" + opts.runtime_name + "'");
  plan.notes.push_back(
      "restart containerd to apply: systemctl restart containerd (containerd reads its config "
      "only at start; SIGHUP stops containerd 1.x instead of reloading it)");
  return plan;
}

}  // namespace

Result<std::vector<std::string>> ContainerdImports(std::string_view config_path,
                                                   std::string_view text) {
  GPUOP_ASSIGN_OR_RETURN(toml::table t, ParseToml(config_path, text));
  std::vector<std::string> out;
  const toml::node* node = t.get("imports");
  if (node == nullptr) return out;
  const toml::array* arr = node->as_array();
  if (arr == nullptr) {
    return InvalidArgument(std::string(config_path) + ": `imports` is not an array of paths");
  }
  for (const toml::node& e : *arr) {
    auto s = e.value<std::string>();
    if (!s) {
      return InvalidArgument(std::string(config_path) +
                             ": `imports` holds a value that is not "
                             "a path string");
    }
    out.push_back(StartsWith(*s, "/") ? *s : DirName(config_path) + "/" + *s);
  }
  return out;
}

bool ImportsCover(const std::vector<std::string>& imports, std::string_view path) {
  std::string p(path);
  for (const std::string& pattern : imports) {
    if (pattern == p || ::fnmatch(pattern.c_str(), p.c_str(), FNM_PATHNAME) == 0) return true;
  }
  return false;
}

Result<Plan> PlanContainerd(const ContainerdInputs& in, const ConfigureOptions& opts) {
  if (!ValidRuntimeName(opts.runtime_name)) {
    return InvalidArgument("runtime name '" + opts.runtime_name +
                           "' is not a valid handler name (letters, digits, '-', '_', '.')");
  }
  if (in.drop_in_path == in.config_path) {
    return InvalidArgument("the drop-in " + in.drop_in_path + " cannot be the main config");
  }
  return opts.revert ? Revert(in, opts) : Configure(in, opts);
}

}  // namespace gpuop::runtime
