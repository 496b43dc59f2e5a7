/* Atomic file replacement (engine/io/atomic_file.c), with the O_TMPFILE
 * temporary and with the named fallback: a save removes the temporaries of
 * processes that are gone and leaves a live process's alone; a writer killed
 * before its commit leaves the old file intact, and its temporary (named
 * fallback) is removed by the next save, or never had a name (O_TMPFILE). */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "io/atomic_file.h"
#include "lt/io.h"

static char dir[64];

static char *in_dir(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/%s", dir, name);
  return buf;
}

static bool exists(const char *name) {
  char p[256];
  struct stat sb;
  return stat(in_dir(p, sizeof p, name), &sb) == 0;
}

static void touch(const char *name) {
  char p[256];
  int fd = open(in_dir(p, sizeof p, name), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) close(fd);
}

static int count_temporaries(void) {
  int n = 0;
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d)) != NULL;)
    if (strncmp(e->d_name, "F.tmp.", 6) == 0) n++;
  if (d) closedir(d);
  return n;
}

/* The contents of F, or "" when it cannot be read. */
static const char *contents(char *buf, size_t size) {
  char p[256];
  buf[0] = '\0';
  FILE *f = fopen(in_dir(p, sizeof p, "F"), "r");
  if (!f) return buf;
  size_t n = fread(buf, 1, size - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* A pid that is no process: a child that exited and was reaped. */
static pid_t dead_pid(void) {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, NULL, 0);
  return pid;
}

static void save(const char *text) {
  char p[256];
  CHECK(lt_write_file_atomically("test", in_dir(p, sizeof p, "F"), text, strlen(text)) == LT_OK);
}

static void test_stale_removed(bool anonymous) {
  lt_atomic_file_set_anonymous(anonymous);
  save("old");
  pid_t live = fork();
  if (live == 0) {
    pause();
    _exit(0);
  }
  char stale[64], alive[64], other[64];
  snprintf(stale, sizeof stale, "F.tmp.%ld", (long)dead_pid());
  snprintf(alive, sizeof alive, "F.tmp.%ld", (long)live);
  snprintf(other, sizeof other, "G.tmp.%ld", (long)dead_pid());
  touch(stale);
  touch(alive);
  touch(other);
  touch("F.tmp.12x");
  touch("F.tmp.");
  save("new");
  char buf[64];
  CHECK_EQ_STR(contents(buf, sizeof buf), "new");
  CHECK(!exists(stale));   /* its process is gone */
  CHECK(exists(alive));    /* a live process's: it may still be writing */
  CHECK(exists(other));    /* another file's */
  CHECK(exists("F.tmp.12x") && exists("F.tmp."));
  char own[64];
  snprintf(own, sizeof own, "F.tmp.%ld", (long)getpid());
  CHECK(!exists(own));
  kill(live, SIGKILL);
  waitpid(live, NULL, 0);
  save("newer"); /* now that one is stale too */
  CHECK(!exists(alive));
  char p[256];
  unlink(in_dir(p, sizeof p, other));
  unlink(in_dir(p, sizeof p, "F.tmp.12x"));
  unlink(in_dir(p, sizeof p, "F.tmp."));
  CHECK_EQ_INT(count_temporaries(), 0);
}

/* A child opens F's temporary, writes half, and is killed (SIGKILL) before
 * its commit. */
static void test_killed_writer(bool anonymous) {
  lt_atomic_file_set_anonymous(anonymous);
  save("old");
  pid_t pid = fork();
  if (pid == 0) {
    char p[256];
    lt_atomic_file f;
    if (lt_atomic_file_open("test", in_dir(p, sizeof p, "F"), &f) == LT_OK &&
        write(f.fd, "ne", 2) == 2)
      kill(getpid(), SIGKILL);
    _exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  char buf[64];
  CHECK_EQ_STR(contents(buf, sizeof buf), "old");
  /* O_TMPFILE: nothing had a name. Named: the temporary stays until... */
  CHECK_EQ_INT(count_temporaries(), anonymous ? 0 : 1);
  save("new"); /* ...the next save of F removes it */
  CHECK_EQ_INT(count_temporaries(), 0);
  CHECK_EQ_STR(contents(buf, sizeof buf), "new");
}

static void test_errors(void) {
  lt_atomic_file_set_anonymous(true);
  char p[256];
  CHECK(lt_write_file_atomically("test", in_dir(p, sizeof p, "no/such/F"), "x", 1) == LT_ERR_IO);
  CHECK(strstr(lt_last_error(), "test: cannot write ") != NULL);
  CHECK(strstr(lt_last_error(), "no/such/F: cannot create ") != NULL);
  /* Renaming over a directory fails: the temporary goes, the directory stays. */
  mkdir(in_dir(p, sizeof p, "D"), 0755);
  CHECK(lt_write_file_atomically("test", p, "x", 1) == LT_ERR_IO);
  CHECK(strstr(lt_last_error(), "cannot rename the new file to") != NULL);
  DIR *d = opendir(dir);
  int names = 0;
  for (struct dirent *e; d && (e = readdir(d)) != NULL;)
    if (strncmp(e->d_name, "D.tmp.", 6) == 0) names++;
  if (d) closedir(d);
  CHECK_EQ_INT(names, 0);
  rmdir(p);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/lt_test_atomic_XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_stale_removed(true);
  test_stale_removed(false);
  test_killed_writer(true);
  test_killed_writer(false);
  test_errors();
  char p[256];
  unlink(in_dir(p, sizeof p, "F"));
  rmdir(dir);
  return check_summary("test_atomic_file");
}
