/* The REPL's history file: ~/.lt_history, or $LT_HISTORY (empty: no file). Loaded at start,
 * appended after every entry so that a crash or a second session loses nothing. */
#ifndef LT_HOST_REPL_HISTORY_H
#define LT_HOST_REPL_HISTORY_H

void repl_history_load(void);

/* Adds a chunk (possibly several lines) to the in-memory history and the file. */
void repl_history_add(const char *entry);

#endif
