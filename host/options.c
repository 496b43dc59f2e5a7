/* Command-line parsing. Lua's options behave as in lua.c, so `busted --lua=lt` and scripts
 * written for `lua` work unchanged; lt's own options are long ones that take a value. */
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "version.h"

void options_print_usage(FILE *to) {
  fprintf(to,
    "usage: " LT_PROGNAME " [options] [script [args]]\n"
    "Available options are:\n"
    "  -e stat            execute string 'stat'\n"
    "  -i                 enter interactive mode after executing 'script'\n"
    "  -l mod             require library 'mod' into global 'mod'\n"
    "  -l g=mod           require library 'mod' into global 'g'\n"
    "  -v                 show version information\n"
    "  -E                 ignore environment variables\n"
    "  -W                 turn warnings on\n"
    "  --                 stop handling options\n"
    "  -                  stop handling options and execute stdin\n"
    "  --threads N        use N CPU threads (lt.set_num_threads)\n"
    "  --device NAME      default device: cpu (cuda when the backend is available)\n"
    "  --memory-report F  write lt.memory.report(F) when the run ends\n"
    "  -h, --help         show this help\n"
    "The global 'lt' holds require \"lt\". With no script and a terminal on stdin, lt starts\n"
    "the REPL: prompts '> ' and '>> ' (continued statement; _PROMPT and _PROMPT2 override),\n"
    "results are printed and the last one is kept in '_', Tab completes names and fields,\n"
    "Ctrl-C stops a running statement (twice: quits) or clears the line, Ctrl-D exits.\n"
    "History: ~/.lt_history, or the file named by LT_HISTORY.\n");
}

static int bad_command_line(const char *fmt, const char *what) {
  fprintf(stderr, LT_PROGNAME ": ");
  fprintf(stderr, fmt, what);
  fprintf(stderr, "\n");
  options_print_usage(stderr);
  return 0;
}

/* "--name VALUE" or "--name=VALUE": 1 and *value set when argv[*i] is option `name`,
 * advancing *i past a separate value; -1 when the value is missing; 0 when not this option. */
static int long_option(char **argv, int *i, const char *name, const char **value) {
  size_t n = strlen(name);
  const char *arg = argv[*i];
  if (strncmp(arg, name, n) != 0) return 0;
  if (arg[n] == '=') { *value = arg + n + 1; return 1; }
  if (arg[n] != '\0') return 0;
  if (argv[*i + 1] == NULL) return -1;
  *value = argv[++*i];
  return 1;
}

static int parse_threads(const char *text, int *threads) {
  char *end;
  long n = strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || n < 1 || n > 4096) {
    fprintf(stderr, LT_PROGNAME ": --threads: expected a positive integer, got '%s'\n", text);
    return 0;
  }
  *threads = (int)n;
  return 1;
}

/* -e and -l take the rest of the word ("-eprint(1)") or the next word. */
static int short_value(char **argv, int *i, const char **value) {
  if (argv[*i][2] != '\0') { *value = argv[*i] + 2; return 1; }
  if (argv[*i + 1] == NULL || argv[*i + 1][0] == '-') return 0; /* as lua.c: no option-like values */
  *value = argv[++*i];
  return 1;
}

static int parse_long(char **argv, int *i, lt_options *opts) {
  const char *value = NULL;
  int found;
  if (strcmp(argv[*i], "--help") == 0) { opts->help = 1; return 1; }
  if ((found = long_option(argv, i, "--threads", &value)) != 0)
    return found < 0 ? bad_command_line("'%s' needs an argument", "--threads")
                     : parse_threads(value, &opts->threads);
  if ((found = long_option(argv, i, "--device", &value)) != 0) {
    if (found < 0) return bad_command_line("'%s' needs an argument", "--device");
    opts->device = value;
    return 1;
  }
  if ((found = long_option(argv, i, "--memory-report", &value)) != 0) {
    if (found < 0 || *value == '\0')
      return bad_command_line("'%s' needs a file name", "--memory-report");
    opts->memory_report = value;
    return 1;
  }
  return bad_command_line("unrecognized option '%s'", argv[*i]);
}

static int parse_short(char **argv, int *i, lt_options *opts) {
  const char *arg = argv[*i];
  const char *value = NULL;
  char letter = arg[1];
  switch (letter) {
    case 'e': case 'l':
      if (!short_value(argv, i, &value))
        return bad_command_line("'%s' needs argument", arg);
      if (letter == 'e') opts->has_e = 1;
      opts->actions[opts->n_actions++] = (lt_action){letter, value};
      return 1;
    default:
      break;
  }
  if (arg[2] != '\0') return bad_command_line("unrecognized option '%s'", arg);
  switch (letter) {
    case 'i': opts->has_i = 1; opts->has_v = 1; return 1; /* -i implies -v, as in lua */
    case 'v': opts->has_v = 1; return 1;
    case 'E': opts->has_E = 1; return 1;
    case 'W': opts->actions[opts->n_actions++] = (lt_action){'W', NULL}; return 1;
    case 'h': opts->help = 1; return 1;
    default: return bad_command_line("unrecognized option '%s'", arg);
  }
}

int options_parse(int argc, char **argv, lt_options *opts) {
  memset(opts, 0, sizeof *opts);
  opts->actions = malloc(sizeof(lt_action) * (size_t)(argc > 0 ? argc : 1));
  if (opts->actions == NULL) {
    fprintf(stderr, LT_PROGNAME ": not enough memory\n");
    return 0;
  }
  for (int i = 1; i < argc && argv[i] != NULL; i++) {
    const char *arg = argv[i];
    if (arg[0] != '-' || arg[1] == '\0') { opts->script = i; return 1; } /* script or "-" */
    if (strcmp(arg, "--") == 0) {
      if (i + 1 < argc && argv[i + 1] != NULL) opts->script = i + 1;
      return 1;
    }
    int ok = arg[1] == '-' ? parse_long(argv, &i, opts) : parse_short(argv, &i, opts);
    if (!ok) return 0;
  }
  return 1;
}

void options_free(lt_options *opts) {
  free(opts->actions);
  opts->actions = NULL;
}
