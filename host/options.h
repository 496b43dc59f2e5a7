/* The command line: lua's own options (-e -l -i -v -E -W - --) plus lt's (--threads, --device,
 * --memory-report, --help). */
#ifndef LT_HOST_OPTIONS_H
#define LT_HOST_OPTIONS_H

#include <stdio.h>

/* -e, -l and -W run in command-line order, so they are kept as a list. */
typedef struct lt_action {
  char letter;       /* 'e', 'l' or 'W' */
  const char *value; /* the statement or module; NULL for -W */
} lt_action;

typedef struct lt_options {
  int script;                /* argv index of the script (or "-"); 0 when there is none */
  int has_e;                 /* -e given: no REPL by default */
  int has_i;                 /* -i: REPL after the script */
  int has_v;                 /* -v (also set by -i): print the version */
  int has_E;                 /* -E: ignore LUA_INIT, LUA_PATH, LUA_CPATH */
  int help;                  /* -h / --help */
  int threads;               /* --threads N; 0 when not given */
  const char *device;        /* --device NAME; NULL when not given */
  const char *memory_report; /* --memory-report FILE; NULL when not given */
  lt_action *actions;        /* argc entries at most; free with options_free */
  int n_actions;
} lt_options;

/* Fills opts from argv. On a bad command line prints the reason and the usage to stderr and
 * returns 0. */
int options_parse(int argc, char **argv, lt_options *opts);
void options_free(lt_options *opts);
void options_print_usage(FILE *to);

#endif
