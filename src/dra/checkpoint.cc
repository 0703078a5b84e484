#include "dra/checkpoint.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpuop::dra {
namespace {

using Json = nlohmann::json;

constexpr char kKind[] = "GpuopDraCheckpoint";
constexpr int kVersion = 1;

std::string Hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

// The checksum of `data`: FNV-1a over its compact dump, whose keys nlohmann
// sorts, so the same content always gives the same bytes.
std::string Checksum(const Json& data) { return Hex32(Fnv1a32(data.dump())); }

std::string_view StateName(PrepareState s) {
  return s == PrepareState::kStarted ? "PrepareStarted" : "PrepareCompleted";
}

Json DeviceToJson(const CheckpointDevice& d) {
  Json j = {{"requests", d.requests}, {"pool", d.pool},
            {"device", d.device},     {"adminAccess", d.admin_access},
            {"cdiIds", d.cdi_ids},    {"type", d.type == DeviceType::kGpu ? "gpu" : "mig"},
            {"uuid", d.uuid}};
  if (d.type == DeviceType::kMig) j["migUUID"] = d.mig_uuid;
  return j;
}

// The decoding below throws nlohmann's type errors on a wrong shape; the
// caller turns them into one "corrupt" error.
CheckpointDevice DeviceFromJson(const Json& j) {
  CheckpointDevice d;
  d.requests = j.at("requests").get<std::vector<std::string>>();
  d.pool = j.at("pool").get<std::string>();
  d.device = j.at("device").get<std::string>();
  d.admin_access = j.at("adminAccess").get<bool>();
  d.cdi_ids = j.at("cdiIds").get<std::vector<std::string>>();
  const std::string type = j.at("type").get<std::string>();
  if (type != "gpu" && type != "mig") throw std::invalid_argument("device type " + type);
  d.type = type == "gpu" ? DeviceType::kGpu : DeviceType::kMig;
  d.uuid = j.at("uuid").get<std::string>();
  if (d.type == DeviceType::kMig) d.mig_uuid = j.at("migUUID").get<std::string>();
  return d;
}

CheckpointClaim ClaimFromJson(const Json& j) {
  CheckpointClaim c;
  const std::string state = j.at("state").get<std::string>();
  if (state == StateName(PrepareState::kStarted)) {
    c.state = PrepareState::kStarted;
  } else if (state == StateName(PrepareState::kCompleted)) {
    c.state = PrepareState::kCompleted;
  } else {
    throw std::invalid_argument("claim state " + state);
  }
  c.name = j.at("name").get<std::string>();
  c.ns = j.at("namespace").get<std::string>();
  c.time_slice_applied = j.at("timeSliceApplied").get<bool>();
  for (const Json& d : j.at("devices")) c.devices.push_back(DeviceFromJson(d));
  return c;
}

Json DataToJson(const Checkpoint& cp) {
  Json claims = Json::object();
  for (const auto& [uid, c] : cp.claims) {
    Json devices = Json::array();
    for (const CheckpointDevice& d : c.devices) devices.push_back(DeviceToJson(d));
    claims[uid] = {{"state", StateName(c.state)},
                   {"name", c.name},
                   {"namespace", c.ns},
                   {"timeSliceApplied", c.time_slice_applied},
                   {"devices", std::move(devices)}};
  }
  return {{"nodeBootID", cp.node_boot_id}, {"preparedClaims", std::move(claims)}};
}

}  // namespace

std::string SerializeCheckpoint(const Checkpoint& checkpoint) {
  Json data = DataToJson(checkpoint);
  Json file = {{"kind", kKind}, {"version", kVersion}, {"checksum", Checksum(data)}};
  file["data"] = std::move(data);
  return file.dump(2) + "\n";
}

Result<Checkpoint> ParseCheckpoint(std::string_view text, const std::string& origin) {
  const std::string fix =
      "; move it away to start with an empty checkpoint (the kubelet prepares its claims again)";
  Json file = Json::parse(text, nullptr, false);
  if (file.is_discarded() || !file.is_object()) {
    return InvalidArgument("DRA checkpoint " + origin + " is corrupt: not a JSON object" + fix);
  }
  if (file.value("kind", Json()) != kKind || !file.contains("version")) {
    return InvalidArgument("DRA checkpoint " + origin + " is not a gpuop checkpoint (kind " +
                           kKind + ")" + fix);
  }
  if (file["version"] != kVersion) {
    return InvalidArgument("DRA checkpoint " + origin + " has version " +
                           Excerpt(file["version"].dump()) + "; this gpuop reads version " +
                           std::to_string(kVersion) + fix);
  }
  auto data = file.find("data");
  auto sum = file.find("checksum");
  if (data == file.end() || sum == file.end() || !sum->is_string()) {
    return InvalidArgument("DRA checkpoint " + origin + " is corrupt: no data or checksum" + fix);
  }
  const std::string want = Checksum(*data);
  if (*sum != want) {
    return InvalidArgument("DRA checkpoint " + origin + " is corrupt: checksum " +
                           Excerpt(sum->get<std::string>()) + " does not match its content (" +
                           want + ")" + fix);
  }
  try {
    Checkpoint cp;
    cp.node_boot_id = data->at("nodeBootID").get<std::string>();
    for (const auto& [uid, c] : data->at("preparedClaims").items()) {
      cp.claims[uid] = ClaimFromJson(c);
    }
    return cp;
  } catch (const std::exception& e) {
    return InvalidArgument("DRA checkpoint " + origin + " is corrupt: " + Excerpt(e.what()) + fix);
  }
}

Result<Checkpoint> CheckpointFile::Load() const {
  auto boot = ReadFile(boot_id_path_);
  if (!boot.ok()) return boot.status().Annotate("reading the boot ID for the DRA checkpoint");
  const std::string boot_id(Trim(*boot));
  auto text = ReadFile(path_);
  if (!text.ok() && text.status().code() == StatusCode::kNotFound) {
    return Checkpoint{boot_id, {}};
  }
  if (!text.ok()) return text.status();
  GPUOP_ASSIGN_OR_RETURN(Checkpoint cp, ParseCheckpoint(*text, path_));
  if (cp.node_boot_id != boot_id) {
    // A reboot undid every preparation the file records.
    LogInfo("DRA checkpoint from another boot reset",
            {{"path", path_}, {"claims", cp.claims.size()}, {"boot_id", boot_id}});
    return Checkpoint{boot_id, {}};
  }
  return cp;
}

Status CheckpointFile::Save(const Checkpoint& checkpoint) const {
  return WriteFileAtomic(path_, SerializeCheckpoint(checkpoint), 0600);
}

}  // namespace gpuop::dra
