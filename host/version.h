/* The version the host reports with -v; keep in step with project(VERSION) in CMakeLists.txt. */
#ifndef LT_HOST_VERSION_H
#define LT_HOST_VERSION_H

#include <lua.h>

#ifndef LT_VERSION
#define LT_VERSION "0.1.0"
#endif

#define LT_VERSION_LINE "lt " LT_VERSION " (" LUA_RELEASE ")"

/* Messages from the host start with this, as lua.c's start with its progname. */
#define LT_PROGNAME "lt"

#endif
