# The Endpoint Picker's wire format (`kvgate epp`, src/epp/, docs/epp.md): Envoy's
# External Processing messages, written from Envoy's API in proto/ and compiled by
# Debian's protoc (protobuf-compiler; libprotobuf-dev through pkg-config), with gRPC's
# health checking protocol (grpc.health.v1, which `kvgate epp` serves itself) and, for the
# services, gRPC's C++ plugin (protobuf-compiler-grpc, libgrpc++-dev: Debian 12 ships no
# CMake config for gRPC). Included by the main build and the fuzz build, which both call
#
#   kvgate_protos(<target> OUT <dir> [GRPC] [PYTHON <python-target>])
#
# <target>: a static library of the generated C++ (compiled without the project's
# warnings, -w, and seen by its users as a system include directory, <dir>), linked to
# protobuf, and with GRPC to gRPC++ and the ExternalProcessor and Health services' stubs.
# PYTHON: the same protoc run also writes the Python modules (the conformance test and
# the bench import them from <dir>), built by the custom target <python-target>.
set(KVGATE_PROTO_DIR ${CMAKE_CURRENT_LIST_DIR}/../proto)
get_filename_component(KVGATE_PROTO_DIR ${KVGATE_PROTO_DIR} ABSOLUTE)
set(KVGATE_PROTO_STEMS envoy/type/v3/http_status envoy/config/core/v3/base
    envoy/service/ext_proc/v3/external_processor grpc/health/v1/health)

function(kvgate_protos target)
  cmake_parse_arguments(P "GRPC" "OUT;PYTHON" "" ${ARGN})
  if(NOT P_OUT)
    message(FATAL_ERROR "kvgate_protos(${target}): OUT <dir> is required")
  endif()
  find_program(KVGATE_PROTOC protoc REQUIRED)
  if(NOT TARGET PkgConfig::PROTOBUF)
    pkg_check_modules(PROTOBUF REQUIRED IMPORTED_TARGET protobuf)
  endif()
  set(outs)
  set(sources)
  set(files)
  set(paths)
  set(flags --cpp_out=${P_OUT})
  if(P_PYTHON)
    list(APPEND flags --python_out=${P_OUT})
  endif()
  if(P_GRPC)
    find_program(KVGATE_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
    if(NOT TARGET PkgConfig::GRPCPP)
      pkg_check_modules(GRPCPP REQUIRED IMPORTED_TARGET grpc++)
    endif()
    list(APPEND flags --grpc_out=${P_OUT} --plugin=protoc-gen-grpc=${KVGATE_GRPC_CPP_PLUGIN})
  endif()
  foreach(stem ${KVGATE_PROTO_STEMS})
    list(APPEND files ${stem}.proto)
    list(APPEND paths ${KVGATE_PROTO_DIR}/${stem}.proto)
    list(APPEND outs ${P_OUT}/${stem}.pb.cc ${P_OUT}/${stem}.pb.h)
    list(APPEND sources ${P_OUT}/${stem}.pb.cc)
    if(P_GRPC)
      list(APPEND outs ${P_OUT}/${stem}.grpc.pb.cc ${P_OUT}/${stem}.grpc.pb.h)
    endif()
    if(P_PYTHON)
      list(APPEND outs ${P_OUT}/${stem}_pb2.py)
    endif()
  endforeach()
  if(P_GRPC)
    # Only the ext_proc and health files define services: the other .grpc.pb.cc are empty.
    list(APPEND sources ${P_OUT}/envoy/service/ext_proc/v3/external_processor.grpc.pb.cc
         ${P_OUT}/grpc/health/v1/health.grpc.pb.cc)
  endif()
  file(MAKE_DIRECTORY ${P_OUT})
  add_custom_command(
    OUTPUT ${outs}
    COMMAND ${KVGATE_PROTOC} -I${KVGATE_PROTO_DIR} -I/usr/include ${flags} ${files}
    DEPENDS ${paths}
    WORKING_DIRECTORY ${KVGATE_PROTO_DIR}
    COMMENT "Generating the ext_proc and health protobuf code (proto/) for ${target}"
    VERBATIM)
  add_library(${target} STATIC ${sources})
  target_compile_options(${target} PRIVATE -w)
  target_include_directories(${target} SYSTEM PUBLIC ${P_OUT})
  if(P_GRPC)
    target_link_libraries(${target} PUBLIC PkgConfig::GRPCPP)
  endif()
  target_link_libraries(${target} PUBLIC PkgConfig::PROTOBUF)
  if(P_PYTHON)
    add_custom_target(${P_PYTHON}
      DEPENDS ${P_OUT}/envoy/service/ext_proc/v3/external_processor_pb2.py)
  endif()
endfunction()
