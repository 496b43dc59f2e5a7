# cmake --install BUILD --prefix P puts lt where Lua users expect it:
#   P/bin/lt                        the host (it finds its library by its own path)
#   P/share/lua/5.4/lt/...          the Lua library, require "lt" for plain lua5.4
#   P/lib/lua/5.4/lt/core.so        the C half of require "lt"
#   P/share/man/man1/lt.1           the manual page
# LT_INSTALL_LUADIR and LT_INSTALL_LIBDIR move the two Lua trees (luarocks
# sets them to a rock's directories; see lt-scm-1.rockspec).
set(LT_INSTALL_LUADIR "share/lua/5.4" CACHE STRING "where the Lua library is installed (under the prefix unless absolute)")
set(LT_INSTALL_LIBDIR "lib/lua/5.4" CACHE STRING "where lt/core.so is installed (under the prefix unless absolute)")
option(LT_INSTALL_HOST "install the lt executable and its manual page" ON)

install(DIRECTORY lua/lt DESTINATION ${LT_INSTALL_LUADIR} FILES_MATCHING PATTERN "*.lua")
install(TARGETS lt_core_module LIBRARY DESTINATION ${LT_INSTALL_LIBDIR}/lt)
if(LT_INSTALL_HOST)
  install(TARGETS lt RUNTIME DESTINATION bin)
  install(FILES docs/lt.1 DESTINATION share/man/man1)
endif()
