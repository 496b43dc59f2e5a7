-- luarocks make (in this directory) builds lt with CMake and installs require "lt" for
-- plain lua5.4 (lt/core.so and the Lua library) and the lt executable into the rocks tree.
rockspec_format = "3.0"
package = "lt"
version = "scm-1"
source = {
  url = "git+file://.", -- luarocks make builds this checkout; nothing is fetched
}
description = {
  summary = "Tensors, autograd, nn modules and optimizers for Lua 5.4, with exact memory control",
  detailed = [[
lt embeds Lua 5.4 around a C tensor engine (CPU, and CUDA when the toolkit is found):
tensors, autograd, nn modules, optimizers and memory controls as Lua userdata.
]],
}
dependencies = {
  "lua >= 5.4, < 5.5",
}
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    LT_INSTALL_LUADIR = "$(LUADIR)",
    LT_INSTALL_LIBDIR = "$(LIBDIR)",
    LUA_INCDIR = "$(LUA_INCDIR)",
  },
}
