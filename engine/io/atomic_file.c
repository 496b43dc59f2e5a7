/* Files replaced atomically: the new contents go to a temporary in the
 * target's directory, are synced, and are renamed over the target, so that
 * the target holds its old contents or the complete new ones, never a part.
 *
 * A process killed while writing must not leave its temporary behind. On
 * Linux the temporary is an O_TMPFILE, a file without a name that the kernel
 * drops with its last descriptor; it is linked as "<path>.tmp.<pid>" only
 * for the rename, which follows at once. Where O_TMPFILE is missing (other
 * systems, file systems without it, no /proc to link it through) the
 * temporary is "<path>.tmp.<pid>" from the start, and every save of path
 * removes those of processes that no longer exist (kill(pid, 0) fails with
 * ESRCH), so a killed save is cleaned up by the next one. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* O_TMPFILE */
#endif
#include "io/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lt/io.h"

/* Off only in tests of the named fallback (lt_atomic_file_set_anonymous). */
static bool use_anonymous = true;

void lt_atomic_file_set_anonymous(bool on) { use_anonymous = on; }

static lt_status file_error(const lt_atomic_file *f, const char *what, const char *path) {
  return lt_error(LT_ERR_IO, "%s: %s %s: %s", f->who, what, path, strerror(errno));
}

/* path's directory into dir ("." when path has no slash); the base name. */
static const char *split_path(const char *path, char *dir, size_t size) {
  const char *slash = strrchr(path, '/');
  if (!slash) {
    snprintf(dir, size, ".");
    return path;
  }
  if (slash == path) snprintf(dir, size, "/");
  else snprintf(dir, size, "%.*s", (int)(slash - path), path);
  return slash + 1;
}

/* The pid in a temporary's name: name is base ".tmp." digits. */
static long temporary_pid(const char *name, const char *base, size_t base_len) {
  static const char suffix[] = ".tmp.";
  if (strncmp(name, base, base_len) != 0) return 0;
  const char *digits = name + base_len;
  if (strncmp(digits, suffix, sizeof suffix - 1) != 0) return 0;
  digits += sizeof suffix - 1;
  size_t n = strlen(digits);
  if (n == 0 || n > 10 || strspn(digits, "0123456789") != n) return 0;
  return strtol(digits, NULL, 10);
}

/* Removes "<path>.tmp.<pid>" files whose process is gone. A live process's
 * temporary (or one of a process this one may not signal: EPERM) stays. */
static void remove_stale_temporaries(const char *path) {
  char dir[4096];
  if (strlen(path) >= sizeof dir) return;
  const char *base = split_path(path, dir, sizeof dir);
  const size_t base_len = strlen(base);
  if (base_len == 0) return;
  DIR *d = opendir(dir);
  if (!d) return;
  const long self = (long)getpid();
  const int saved = errno;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    const long pid = temporary_pid(e->d_name, base, base_len);
    if (pid <= 0 || pid == self || (pid_t)pid != pid) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    char stale[8192];
    if (snprintf(stale, sizeof stale, "%s/%s", dir, e->d_name) < (int)sizeof stale) (void)unlink(stale);
  }
  closedir(d);
  errno = saved;
}

/* An unnamed temporary in dir, if the system and the file system have them
 * and it can be linked through /proc later; -1 otherwise. */
static int open_anonymous(const char *dir) {
#ifdef O_TMPFILE
  int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (fd < 0) return -1;
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  if (access(proc, F_OK) == 0) return fd;
  close(fd);
#else
  (void)dir;
#endif
  return -1;
}

lt_status lt_atomic_file_open(const char *who, const char *path, lt_atomic_file *f) {
  *f = (lt_atomic_file){.fd = -1, .who = who};
  char dir[4096];
  if (strlen(path) >= sizeof dir)
    return lt_error(LT_ERR_ARG, "%s: cannot write %s: the path is too long", who, path);
  f->path = strdup(path);
  f->tmp = malloc(strlen(path) + 32);
  if (!f->path || !f->tmp) {
    lt_atomic_file_abort(f);
    return lt_error(LT_ERR_OOM, "%s: cannot write %s: out of memory", who, path);
  }
  snprintf(f->tmp, strlen(path) + 32, "%s.tmp.%ld", path, (long)getpid());
  remove_stale_temporaries(path);
  split_path(path, dir, sizeof dir);
  f->fd = use_anonymous ? open_anonymous(dir) : -1;
  f->anonymous = f->fd >= 0;
  if (f->fd < 0) f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (f->fd < 0) {
    lt_status st = lt_error(LT_ERR_IO, "%s: cannot write %s: cannot create %s: %s", who, path,
                            f->tmp, strerror(errno));
    lt_atomic_file_abort(f);
    return st;
  }
  return LT_OK;
}

/* Makes the rename itself durable; a failure here loses nothing written. */
static void sync_directory_of(const char *path) {
  char dir[4096];
  split_path(path, dir, sizeof dir);
  int fd = open(dir, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)fsync(fd);
  close(fd);
}

/* The anonymous temporary gets its name. A file of that name is this pid's
 * own leftover (a process killed between link and rename had this pid). */
static lt_status link_anonymous(lt_atomic_file *f) {
#ifdef O_TMPFILE
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", f->fd);
  (void)unlink(f->tmp);
  if (linkat(AT_FDCWD, proc, AT_FDCWD, f->tmp, AT_SYMLINK_FOLLOW) == 0) return LT_OK;
#endif
  return file_error(f, "cannot create", f->tmp);
}

lt_status lt_atomic_file_commit(lt_atomic_file *f) {
  lt_status st = LT_OK;
  if (fsync(f->fd) != 0) st = file_error(f, "cannot sync", f->tmp);
  bool named = !f->anonymous;
  if (st == LT_OK && f->anonymous) {
    st = link_anonymous(f);
    named = st == LT_OK;
  }
  if (close(f->fd) != 0 && st == LT_OK) st = file_error(f, "cannot write", f->tmp);
  f->fd = -1;
  if (st == LT_OK && rename(f->tmp, f->path) != 0) st = file_error(f, "cannot rename the new file to", f->path);
  if (st != LT_OK && named) (void)unlink(f->tmp); /* the old file, if any, is untouched */
  if (st == LT_OK) sync_directory_of(f->path);
  lt_atomic_file_abort(f); /* frees the names; fd is closed already */
  return st;
}

void lt_atomic_file_abort(lt_atomic_file *f) {
  if (f->fd >= 0) {
    close(f->fd);
    if (!f->anonymous && f->tmp) (void)unlink(f->tmp);
  }
  f->fd = -1;
  free(f->path);
  free(f->tmp);
  f->path = NULL;
  f->tmp = NULL;
}

lt_status lt_write_file_atomically(const char *who, const char *path, const void *data, size_t n) {
  lt_atomic_file f;
  LT_TRY(lt_atomic_file_open(who, path, &f));
  const char *p = data;
  for (size_t done = 0; done < n;) {
    ssize_t put = write(f.fd, p + done, n - done < ((size_t)1 << 30) ? n - done : (size_t)1 << 30);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) {
      lt_status st = file_error(&f, "cannot write", f.tmp);
      lt_atomic_file_abort(&f);
      return st;
    }
    done += (size_t)put;
  }
  return lt_atomic_file_commit(&f);
}
