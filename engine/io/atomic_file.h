/* Files replaced atomically (see atomic_file.c): a writer gets a file
 * descriptor for the new contents, and commit puts them in place of path in
 * one rename once they are complete and synced. */
#ifndef LT_IO_ATOMIC_FILE_H
#define LT_IO_ATOMIC_FILE_H

#include <stdbool.h>

#include "lt/error.h"

typedef struct lt_atomic_file {
  int fd;
  bool anonymous; /* an O_TMPFILE: it has no name until commit links it as tmp */
  const char *who; /* the op named in messages ("safetensors") */
  char *path;      /* the file replaced */
  char *tmp;       /* "<path>.tmp.<pid>": the temporary's name (or the name it gets) */
} lt_atomic_file;

/* Removes the temporaries of path left by processes that no longer exist,
 * then opens a temporary in path's directory. */
lt_status lt_atomic_file_open(const char *who, const char *path, lt_atomic_file *f);

/* Syncs the temporary and renames it over path (then syncs the directory);
 * on an error path is untouched and the temporary removed. Closes f. */
lt_status lt_atomic_file_commit(lt_atomic_file *f);

/* Drops the temporary; path is untouched. Closes f. */
void lt_atomic_file_abort(lt_atomic_file *f);

/* Tests: false makes every temporary a named one, as where O_TMPFILE is
 * missing. */
void lt_atomic_file_set_anonymous(bool on);

#endif
