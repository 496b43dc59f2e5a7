/* History file; see repl_history.h. One entry per line, with "\\" and "\n" escaped so that
 * multi-line chunks stay one entry; otherwise plain text, easy to grep. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <editline/readline.h>

#include "repl_history.h"

enum { KEEP_ENTRIES = 1000, REWRITE_ABOVE = 2000 };

static char *history_path;
static char *last_entry;
static int recording; /* set once the history has been loaded: only terminal sessions */

/* History can hold secrets typed at the prompt: the file is private to its owner. */
static FILE *open_private(const char *path, int flags, const char *mode) {
  int fd = open(path, flags | O_WRONLY | O_CREAT, 0600);
  if (fd < 0) return NULL;
  FILE *file = fdopen(fd, mode);
  if (file == NULL) close(fd);
  return file;
}

static char *choose_path(void) {
  const char *explicit_path = getenv("LT_HISTORY");
  if (explicit_path != NULL) return explicit_path[0] != '\0' ? strdup(explicit_path) : NULL;
  const char *home = getenv("HOME");
  if (home == NULL || home[0] == '\0') return NULL;
  size_t size = strlen(home) + sizeof "/.lt_history";
  char *path = malloc(size);
  if (path != NULL) snprintf(path, size, "%s/.lt_history", home);
  return path;
}

/* Decodes an escaped line in place. */
static void unescape(char *text) {
  char *out = text;
  for (const char *in = text; *in != '\0'; in++) {
    if (*in == '\\' && in[1] == 'n') { *out++ = '\n'; in++; }
    else if (*in == '\\' && in[1] == '\\') { *out++ = '\\'; in++; }
    else *out++ = *in;
  }
  *out = '\0';
}

static void write_escaped(FILE *file, const char *entry) {
  for (const char *p = entry; *p != '\0'; p++) {
    if (*p == '\n') fputs("\\n", file);
    else if (*p == '\\') fputs("\\\\", file);
    else fputc(*p, file);
  }
  fputc('\n', file);
}

/* Keeps the file from growing without bound: rewritten with its newest entries. */
static void rewrite_file(char **newest, size_t count, size_t first) {
  size_t size = strlen(history_path) + sizeof ".tmp";
  char *temporary = malloc(size);
  if (temporary == NULL) return;
  snprintf(temporary, size, "%s.tmp", history_path);
  FILE *file = open_private(temporary, O_TRUNC, "w");
  if (file != NULL) {
    for (size_t i = 0; i < count; i++) fprintf(file, "%s\n", newest[(first + i) % KEEP_ENTRIES]);
    if (fclose(file) == 0) rename(temporary, history_path);
    else remove(temporary);
  }
  free(temporary);
}

void repl_history_load(void) {
  recording = 1;
  history_path = choose_path();
  using_history();
  stifle_history(KEEP_ENTRIES);
  if (history_path == NULL) return;
  FILE *file = fopen(history_path, "r");
  if (file == NULL) return;

  char *newest[KEEP_ENTRIES] = {0}; /* ring of the last lines, still escaped */
  size_t total = 0;
  char *line = NULL;
  size_t capacity = 0;
  ssize_t n;
  while ((n = getline(&line, &capacity, file)) >= 0) {
    if (n > 0 && line[n - 1] == '\n') line[n - 1] = '\0';
    if (line[0] == '\0') continue;
    size_t slot = total++ % KEEP_ENTRIES;
    free(newest[slot]);
    newest[slot] = strdup(line);
  }
  free(line);
  fclose(file);

  size_t kept = total < KEEP_ENTRIES ? total : KEEP_ENTRIES;
  size_t first = total < KEEP_ENTRIES ? 0 : total % KEEP_ENTRIES;
  if (total > REWRITE_ABOVE) rewrite_file(newest, kept, first);
  for (size_t i = 0; i < kept; i++) {
    char *entry = newest[(first + i) % KEEP_ENTRIES];
    if (entry == NULL) continue;
    unescape(entry);
    add_history(entry);
    if (i + 1 == kept) {
      free(last_entry);
      last_entry = strdup(entry);
    }
  }
  for (size_t i = 0; i < KEEP_ENTRIES; i++) free(newest[i]);
}

static int is_blank(const char *text) {
  for (; *text != '\0'; text++)
    if (*text != ' ' && *text != '\t' && *text != '\n' && *text != '\r') return 0;
  return 1;
}

void repl_history_add(const char *entry) {
  if (!recording || is_blank(entry) || (last_entry != NULL && strcmp(entry, last_entry) == 0))
    return;
  add_history(entry);
  free(last_entry);
  last_entry = strdup(entry);
  if (history_path == NULL) return;
  FILE *file = open_private(history_path, O_APPEND, "a");
  if (file == NULL) return; /* a read-only home must not break the REPL */
  write_escaped(file, entry);
  fclose(file);
}
