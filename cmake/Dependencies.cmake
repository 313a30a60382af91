# Every dependency comes from a Debian 12 package; see scripts/install-deps.
# Debian ships c-ares, libuv and nghttp2 with pkg-config files only, yaml-cpp 0.7 names its target
# plain `yaml-cpp`, and llhttp arrives as generated C sources (node-llhttp) that we build here.

find_package(OpenSSL 3.0 REQUIRED)
find_package(PkgConfig REQUIRED)

find_package(c-ares 1.18 CONFIG QUIET)
if(NOT TARGET c-ares::cares)
  pkg_check_modules(CARES REQUIRED IMPORTED_TARGET libcares>=1.18)
  add_library(c-ares::cares ALIAS PkgConfig::CARES)
endif()

find_package(libuv 1.44 CONFIG QUIET)
if(NOT TARGET libuv::uv)
  pkg_check_modules(LIBUV REQUIRED IMPORTED_TARGET libuv>=1.44)
  add_library(libuv::uv ALIAS PkgConfig::LIBUV)
endif()

# HTTP/2 framing, HPACK and the stream rules of RFC 9113 (libnghttp2-dev).
pkg_check_modules(NGHTTP2 REQUIRED IMPORTED_TARGET libnghttp2>=1.52)
add_library(nghttp2::nghttp2 ALIAS PkgConfig::NGHTTP2)

find_package(yaml-cpp 0.7 CONFIG REQUIRED)
if(NOT TARGET yaml-cpp::yaml-cpp)
  add_library(yaml-cpp::yaml-cpp ALIAS yaml-cpp)
endif()

find_package(spdlog 1.10 CONFIG REQUIRED)

# The package firewall (docs/packages.md): registry metadata (JSON of up to tens of MiB) is read
# with simdjson's on-demand parser, whose raw spans let a filter copy what it keeps unchanged;
# zlib inflates gzip'd metadata and the OSV zips, and deflates what is served back gzip'd.
find_package(simdjson 3.0 CONFIG REQUIRED)
find_package(ZLIB REQUIRED)

set(LLHTTP_SRC_DIR /usr/share/llhttp CACHE PATH "generated llhttp.c, api.c, http.c")
set(LLHTTP_INCLUDE_DIR /usr/share/include/llhttp CACHE PATH "directory of llhttp.h")
foreach(f ${LLHTTP_SRC_DIR}/llhttp.c ${LLHTTP_SRC_DIR}/api.c ${LLHTTP_SRC_DIR}/http.c
          ${LLHTTP_INCLUDE_DIR}/llhttp.h)
  if(NOT EXISTS ${f})
    message(FATAL_ERROR "llhttp source ${f} missing: run scripts/install-deps (package node-llhttp)")
  endif()
endforeach()
add_library(llhttp STATIC ${LLHTTP_SRC_DIR}/llhttp.c ${LLHTTP_SRC_DIR}/api.c
                          ${LLHTTP_SRC_DIR}/http.c)
add_library(llhttp::llhttp ALIAS llhttp)
target_include_directories(llhttp SYSTEM PUBLIC ${LLHTTP_INCLUDE_DIR})
# Strict mode: the lenient parser accepts framing a filtering proxy must refuse.
target_compile_definitions(llhttp PUBLIC LLHTTP_STRICT_MODE=1)
set_target_properties(llhttp PROPERTIES C_STANDARD 99 POSITION_INDEPENDENT_CODE ON C_CLANG_TIDY "")
target_compile_options(llhttp PRIVATE -w)

if(SLUICE_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()
