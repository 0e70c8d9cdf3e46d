# The kubelet's protos (proto/), compiled at build time by protoc-c (Debian protobuf-c-compiler):
# gs_kubelet_proto, a static library of the C code of pluginregistration v1 and DRA v1beta1
# (whose messages serve v1 too: src/daemon/dra_wire.c), and GS_KUBELET_PROTO_SET, a
# FileDescriptorSet of all three for the tests' gRPC client (tests/k8s/kubelet.py).
if(TARGET gs_kubelet_proto)
  return()
endif()
find_program(PROTOC_C protoc-c)
if(NOT PROTOC_C)
  message(FATAL_ERROR "protoc-c is needed for gpusliced's kubelet protos (Debian: apt-get install "
                      "protobuf-c-compiler libprotobuf-c-dev; scripts/install-deps does)")
endif()
set(GS_PROTO_DIR ${CMAKE_SOURCE_DIR}/proto)
set(GS_PROTO_OUT ${CMAKE_BINARY_DIR}/proto)
set(GS_PROTO_C pluginregistration/v1/api dra/v1beta1/api)
set(GS_PROTO_ALL pluginregistration/v1/api.proto dra/v1/api.proto dra/v1beta1/api.proto)
set(GS_KUBELET_PROTO_SET ${GS_PROTO_OUT}/kubelet.pb)
set(_srcs "")
foreach(p ${GS_PROTO_C})
  list(APPEND _srcs ${GS_PROTO_OUT}/${p}.pb-c.c)
  add_custom_command(OUTPUT ${GS_PROTO_OUT}/${p}.pb-c.c ${GS_PROTO_OUT}/${p}.pb-c.h
                     COMMAND ${CMAKE_COMMAND} -E make_directory ${GS_PROTO_OUT}
                     COMMAND ${PROTOC_C} -I${GS_PROTO_DIR} --c_out=${GS_PROTO_OUT} ${p}.proto
                     DEPENDS ${GS_PROTO_DIR}/${p}.proto
                     COMMENT "protoc-c ${p}.proto")
endforeach()
set(_all "")
foreach(p ${GS_PROTO_ALL})
  list(APPEND _all ${GS_PROTO_DIR}/${p})
endforeach()
add_custom_command(OUTPUT ${GS_KUBELET_PROTO_SET}
                   COMMAND ${CMAKE_COMMAND} -E make_directory ${GS_PROTO_OUT}
                   COMMAND ${PROTOC_C} -I${GS_PROTO_DIR} --descriptor_set_out=${GS_KUBELET_PROTO_SET}
                           --include_imports ${GS_PROTO_ALL}
                   DEPENDS ${_all} COMMENT "protoc-c: the kubelet's FileDescriptorSet")
add_custom_target(gs_kubelet_proto_set ALL DEPENDS ${GS_KUBELET_PROTO_SET})
add_library(gs_kubelet_proto STATIC ${_srcs})
# Generated code: our warnings are not its author's; -Werror stays on our own files.
target_compile_options(gs_kubelet_proto PRIVATE -w)
target_include_directories(gs_kubelet_proto PUBLIC ${GS_PROTO_OUT})
target_link_libraries(gs_kubelet_proto PUBLIC PkgConfig::PROTOBUFC)
add_dependencies(gs_kubelet_proto gs_kubelet_proto_set)
