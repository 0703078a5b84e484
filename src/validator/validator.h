// `gpuop validator`: runs one of NVIDIA's validator components and keeps its
// file under OUTPUT_DIR true.
//
//   RunCheck     driver, toolkit, cuda or plugin: deletes the component's
//                file when it starts (NVIDIA does), runs the check (again
//                every SLEEP_INTERVAL_SECONDS while WITH_WAIT and it fails),
//                and writes the file atomically once it passes.
//   RunMain      no COMPONENT: the DaemonSet's main container. Every init
//                check has passed when it starts; it reports success, holds
//                the node's validations until `stop`, then removes the
//                *-ready files (as NVIDIA's preStop does; the operator also
//                renders that preStop, so either one suffices).
//   Cleanup      removes every *-ready file (not .driver-ctr-ready, which is
//                the driver container's).
//
// Thread-safety: each function may run on any thread; they share nothing.
#pragma once

#include <stop_token>
#include <string>

#include "base/status.h"
#include "kube/client.h"
#include "validator/options.h"

namespace gpuop::validator {

// `client` may be null for driver and toolkit; cuda and plugin need it.
Status RunCheck(const Options& o, kube::Client* client, std::stop_token stop);

// Blocks until `stop`, then removes the *-ready files.
Status RunMain(const Options& o, std::stop_token stop);

Status Cleanup(const std::string& output_dir);

}  // namespace gpuop::validator
