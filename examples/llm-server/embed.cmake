# embed.cmake - writes a C++ header holding a file's bytes (run at build time):
#   cmake -DIN=public/index.html -DOUT=gen/index.html.h -DNAME=srv_index_html -P embed.cmake
# gives  static const unsigned char srv_index_html[] = {...};  static const size_t srv_index_html_len = N;
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n_hex)
math(EXPR n "${n_hex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){32})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}.tmp" "// generated from ${IN} by embed.cmake: do not edit\n#pragma once\n#include <cstddef>\n"
     "static const unsigned char ${NAME}[] = {\n${bytes}0x00};\nstatic const size_t ${NAME}_len = ${n};\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
