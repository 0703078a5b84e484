// The node's CDI specs as the runtime on this machine must read them.
//
// A CDI spec names host paths as its node sees them (/dev/nvidia0,
// /usr/lib/x86_64-linux-gnu/libcuda.so.570.172.08, the hook binary). A
// simulated node's "/" is a directory here, so before podman (the CDI
// consumer) resolves a name, every host path of the node's specs is moved
// under the node's root, as a node container of kind sees its own root. Names,
// devices, env and hooks' arguments are untouched: podman resolves them.
//
// TranslateCdiSpec is pure; SyncCdiView rewrites the view directory from
// <root>/etc/cdi and <root>/var/run/cdi (only what changed). Thread-compatible.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace gpuop::simcluster {

// The spec with each deviceNodes[].hostPath (or path, when hostPath is
// absent), mounts[].hostPath and hooks[].path prefixed with `root`.
nlohmann::json TranslateCdiSpec(const nlohmann::json& spec, const std::string& root);

// Writes <view_dir>/<file>.json for every *.yaml, *.yml and *.json spec under
// <root>/etc/cdi and <root>/var/run/cdi (the latter wins on equal names, as
// CDI's dynamic dir does) and removes views whose spec is gone. A spec that
// does not parse is skipped (podman would refuse it too) and named in the
// returned status, which is otherwise OK.
Status SyncCdiView(const std::string& root, const std::string& view_dir);

}  // namespace gpuop::simcluster
