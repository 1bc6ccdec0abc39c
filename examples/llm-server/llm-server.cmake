# llm-server's build, included by examples/CMakeLists.txt after it made the target: cpp-httplib (Debian's
# libcpp-httplib-dev is a compiled library; pkg-config gives its flags, which must match the library's
# build) and the web page public/index.html, embedded through a generated header.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
endif()
if(NOT HTTPLIB_FOUND)
  message(WARNING "llm-server is left out of the build: cpp-httplib not found "
                  "(scripts/setup-deps.sh installs libcpp-httplib-dev)")
  set_target_properties(llm-server PROPERTIES EXCLUDE_FROM_ALL TRUE)
  return()
endif()
set(_llm_server_gen ${CMAKE_CURRENT_BINARY_DIR}/llm-server-gen)
add_custom_command(
  OUTPUT ${_llm_server_gen}/index.html.h
  COMMAND ${CMAKE_COMMAND} -DIN=${CMAKE_CURRENT_LIST_DIR}/public/index.html -DOUT=${_llm_server_gen}/index.html.h
          -DNAME=srv_index_html -P ${CMAKE_CURRENT_LIST_DIR}/embed.cmake
  DEPENDS ${CMAKE_CURRENT_LIST_DIR}/public/index.html ${CMAKE_CURRENT_LIST_DIR}/embed.cmake
  COMMENT "Embedding llm-server's web page")
target_sources(llm-server PRIVATE ${_llm_server_gen}/index.html.h)
target_include_directories(llm-server PRIVATE ${_llm_server_gen})
target_link_libraries(llm-server PRIVATE PkgConfig::HTTPLIB Threads::Threads)
