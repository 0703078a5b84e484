# Code generation for the kubelet gRPC APIs (included from src/CMakeLists.txt).
# protoc and grpc_cpp_plugin write into the build dir, never the source tree:
#   <build>/generated/proto/deviceplugin/v1beta1/api.{pb,grpc.pb}.{h,cc}
# so code includes "deviceplugin/v1beta1/api.grpc.pb.h". The generated code is
# not ours: it is compiled without warnings and its include dir is SYSTEM, so
# -Werror never trips on it.
# Needs (top-level CMakeLists.txt): gpuop_dep_grpc, GPUOP_PROTOC, GPUOP_GRPC_CPP_PLUGIN.

set(GPUOP_PROTO_ROOT ${CMAKE_SOURCE_DIR}/api/proto)
set(GPUOP_PROTO_OUT ${CMAKE_BINARY_DIR}/generated/proto)

# gpuop_proto_library(TARGET proto...): one static library of the messages and
# gRPC stubs of the given .proto files (paths relative to api/proto).
function(gpuop_proto_library target)
  set(srcs)
  set(hdrs)
  foreach(proto ${ARGN})
    string(REGEX REPLACE "\\.proto$" "" stem ${proto})
    set(out
      ${GPUOP_PROTO_OUT}/${stem}.pb.cc ${GPUOP_PROTO_OUT}/${stem}.pb.h
      ${GPUOP_PROTO_OUT}/${stem}.grpc.pb.cc ${GPUOP_PROTO_OUT}/${stem}.grpc.pb.h)
    add_custom_command(
      OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${GPUOP_PROTO_OUT}
      COMMAND ${GPUOP_PROTOC}
        --proto_path=${GPUOP_PROTO_ROOT}
        --cpp_out=${GPUOP_PROTO_OUT}
        --grpc_out=${GPUOP_PROTO_OUT}
        --plugin=protoc-gen-grpc=${GPUOP_GRPC_CPP_PLUGIN}
        ${GPUOP_PROTO_ROOT}/${proto}
      DEPENDS ${GPUOP_PROTO_ROOT}/${proto} ${GPUOP_PROTOC} ${GPUOP_GRPC_CPP_PLUGIN}
      COMMENT "Generating C++ and gRPC code for ${proto}"
      VERBATIM)
    list(APPEND srcs ${GPUOP_PROTO_OUT}/${stem}.pb.cc ${GPUOP_PROTO_OUT}/${stem}.grpc.pb.cc)
  endforeach()
  add_library(${target} STATIC ${srcs})
  target_compile_options(${target} PRIVATE -w)
  target_include_directories(${target} SYSTEM PUBLIC ${GPUOP_PROTO_OUT})
  target_link_libraries(${target} PUBLIC gpuop_dep_grpc)
endfunction()

gpuop_proto_library(gpuop_kubelet_proto deviceplugin/v1beta1/api.proto podresources/v1/api.proto
                    dra/v1/api.proto dra/v1beta1/api.proto pluginregistration/v1/api.proto)
