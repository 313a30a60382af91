# Fails when a module includes what its layer must not (ARCHITECTURE.md):
#   policy/  pure: no event loop, resolver, HTTP parser, TLS, logging, sockets or streams to
#            files, and nothing of certs/ or proxy/
#   certs/   OpenSSL only: no event loop, resolver, HTTP parser, and nothing of policy/ or proxy/
#   base/    nothing at all of ours
#   proxy/http/, proxy/tls/  sans-IO: no event loop, resolver, or other proxy/ sub-modules
set(forbidden_everywhere_below_proxy "uv\\.h" "ares\\.h" "ares_[a-z_]*\\.h" "llhttp\\.h")
set(policy_forbidden ${forbidden_everywhere_below_proxy}
    "openssl/" "spdlog/" "fmt/" "sys/socket\\.h" "netinet/" "arpa/" "netdb\\.h" "fstream"
    "iostream" "unistd\\.h" "fcntl\\.h" "dirent\\.h" "filesystem" "certs/" "proxy/")
set(certs_forbidden ${forbidden_everywhere_below_proxy} "spdlog/" "sys/socket\\.h" "netinet/"
    "policy/" "proxy/")
set(base_forbidden ${forbidden_everywhere_below_proxy} "openssl/" "policy/" "certs/" "proxy/")
# Protocol code is sans-IO: bytes in, bytes out, no loop.
set(http_forbidden "uv\\.h" "ares\\.h" "openssl/" "proxy/io/" "proxy/session/" "proxy/tls/"
    "proxy/dns/")
set(tls_forbidden "uv\\.h" "ares\\.h" "llhttp\\.h" "proxy/io/" "proxy/session/" "proxy/http/"
    "proxy/dns/")

set(failures "")
foreach(dir policy certs base proxy/http proxy/tls)
  get_filename_component(module ${dir} NAME)
  file(GLOB_RECURSE files ${SOURCE_DIR}/${dir}/*.h ${SOURCE_DIR}/${dir}/*.cc)
  foreach(f ${files})
    file(STRINGS ${f} includes REGEX "^[ \t]*#[ \t]*include")
    foreach(line ${includes})
      foreach(pattern ${${module}_forbidden})
        if(line MATCHES "[<\"]([^>\"]*/)?${pattern}")
          list(APPEND failures "${f}: ${line}  (forbidden in ${module}/: ${pattern})")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()

if(failures)
  list(JOIN failures "\n" text)
  message(FATAL_ERROR "layering violations:\n${text}")
endif()
message(STATUS "layering: policy/, certs/, base/, proxy/http/ and proxy/tls/ include only what "
               "their layer allows")
