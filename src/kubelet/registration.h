// Registering a device plugin with the kubelet: one Register call on
// /v1beta1.Registration at the kubelet's socket, with version "v1beta1", the
// plugin's socket basename (it must sit in the same directory) and the
// resource name. The kubelet then dials the plugin and opens ListAndWatch, so
// the plugin must already be serving (DevicePluginServer::Start).
// Thread-safe: no shared state.
#pragma once

#include <chrono>
#include <stop_token>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpuop::kubelet {

// kubernetes/kubelet pkg/apis/deviceplugin/v1beta1/constants.go.
inline constexpr std::string_view kDevicePluginApiVersion = "v1beta1";
inline constexpr std::string_view kDevicePluginPath = "/var/lib/kubelet/device-plugins/";
inline constexpr std::string_view kKubeletSocketName = "kubelet.sock";

// Sends RegisterRequest{version=v1beta1, endpoint=endpoint_basename,
// resource_name, options{get_preferred_allocation_available=preferred_allocation}}
// and waits up to `timeout` for the kubelet's answer (waiting for the socket
// to accept within that time). Errors name the socket and the likely fix:
// a missing socket ("is the kubelet running? is <dir> mounted?"), no answer in
// time, or the kubelet's own rejection message (unsupported version, bad
// resource name). A stop request on `stop` cancels the wait at once (so a
// stale kubelet.sock cannot hold a shutting-down plugin for `timeout`).
Status RegisterWithKubelet(const std::string& kubelet_socket, const std::string& endpoint_basename,
                           const std::string& resource_name, bool preferred_allocation,
                           std::chrono::milliseconds timeout, std::stop_token stop = {});

}  // namespace gpuop::kubelet
