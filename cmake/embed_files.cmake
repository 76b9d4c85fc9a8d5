# Turns files into a C++ source that holds them as byte arrays
# (gateway/control/ui_files.h), so the binary serves them without reading anything at run
# time: the admin status page (src/gateway/control/ui/). Run at build time by the custom
# command in CMakeLists.txt:
#
#   cmake -DOUT=ui_files.cc -DDIR=src/gateway/control/ui -DNAMES=status.html,status.js \
#         -P cmake/embed_files.cmake
#
# NAMES are separated by commas (a semicolon would split the custom command's argument).
# Each file is served under its name; its content type follows its extension (.html,
# .css, .js, .svg, .png, .json; anything else is application/octet-stream). The build
# runs it only when one of the files (or this script) changed.
if(NOT OUT OR NOT DIR OR NOT NAMES)
  message(FATAL_ERROR "embed_files.cmake: set OUT, DIR and NAMES")
endif()
string(REPLACE "," ";" names "${NAMES}")

set(line "")
foreach(k RANGE 1 16)
  string(APPEND line "0x[0-9a-f][0-9a-f],")
endforeach()
set(arrays "")
set(entries "")
set(i 0)
foreach(name IN LISTS names)
  set(path ${DIR}/${name})
  get_filename_component(ext ${name} LAST_EXT)
  if(ext STREQUAL ".html")
    set(type "text/html; charset=utf-8")
  elseif(ext STREQUAL ".css")
    set(type "text/css; charset=utf-8")
  elseif(ext STREQUAL ".js")
    set(type "text/javascript; charset=utf-8")
  elseif(ext STREQUAL ".svg")
    set(type "image/svg+xml")
  elseif(ext STREQUAL ".png")
    set(type "image/png")
  elseif(ext STREQUAL ".json")
    set(type "application/json")
  else()
    set(type "application/octet-stream")
  endif()
  file(READ "${path}" hex HEX)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  # 0x3c,0x21,... sixteen bytes a line (CMake's regular expressions have no {16}).
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(${line})" "\\1\n    " bytes "${bytes}")
  if(size EQUAL 0)
    set(bytes "0x00,")  # an array cannot be empty; the size below stays 0
  endif()
  string(APPEND arrays "// ${name}\nconst unsigned char kFile${i}[] = {\n    ${bytes}\n};\n")
  string(APPEND entries "      {\"${name}\", \"${type}\",\n"
                        "       std::string_view(reinterpret_cast<const char*>(kFile${i}), ${size})},\n")
  math(EXPR i "${i} + 1")
endforeach()

set(text "// Generated at build time by cmake/embed_files.cmake: do not edit.
#include \"gateway/control/ui_files.h\"

namespace kvgate::gateway {
namespace {

${arrays}
}  // namespace

std::span<const EmbeddedFile> ui_files() {
  static const EmbeddedFile files[] = {
${entries}  };
  return files;
}

}  // namespace kvgate::gateway
")
file(WRITE ${OUT} "${text}")
