/* Line reading for the REPL; see line_input.h. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <editline/readline.h>

#include "interrupt.h"
#include "line_input.h"

static int use_readline;
static volatile sig_atomic_t window_resized;

/* libedit's own signal handling is off (it would re-raise Ctrl-C to the whole process
 * group), so a resized terminal is noticed here and handed on from read_byte. */
static void on_window_resize(int sig) {
  (void)sig;
  window_resized = 1;
}

static void watch_window_size(void) {
#ifdef SIGWINCH
  struct sigaction action;
  action.sa_handler = on_window_resize;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0; /* interrupt the read so the new width applies at once */
  sigaction(SIGWINCH, &action, NULL);
#endif
}

/* One byte from fd, retrying reads that a signal interrupted unless it was Ctrl-C at the
 * prompt. Returns -1 at end of input or on Ctrl-C. */
static int read_byte(int fd) {
  unsigned char byte;
  for (;;) {
    if (interrupt_prompt_flag_is_set()) return -1;
    if (window_resized) {
      window_resized = 0;
      rl_resize_terminal();
    }
    ssize_t n = read(fd, &byte, 1);
    if (n == 1) return byte;
    if (n == 0 || errno != EINTR) return -1;
  }
}

/* libedit's key reader. It is replaced so that Ctrl-C at the prompt (the SIGINT handler only
 * sets a flag) ends readline at once: a newline is handed over and the caller, seeing the
 * flag, drops the line. libedit takes the result as one wide character, so UTF-8 sequences
 * are decoded here. */
static int read_key(FILE *stream) {
  int fd = stream != NULL ? fileno(stream) : STDIN_FILENO;
  int c = read_byte(fd);
  if (c < 0) return interrupt_prompt_flag_is_set() ? '\n' : EOF;
  int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
  if (extra == 0) return c;
  int code = c & (0x3F >> extra);
  for (int i = 0; i < extra; i++) {
    int next = read_byte(fd);
    if (next < 0) return interrupt_prompt_flag_is_set() ? '\n' : EOF;
    code = (code << 6) | (next & 0x3F);
  }
  return code;
}

int line_input_open(void) {
  use_readline = isatty(STDIN_FILENO);
  if (!use_readline) return 0;
  rl_readline_name = "lt"; /* for "lt:" sections of ~/.editrc */
  rl_catch_signals = 0;    /* SIGINT is ours, see interrupt.c */
  rl_getc_function = read_key;
  watch_window_size();
  return 1;
}

static line_status read_with_readline(const char *prompt, char **line) {
  *line = readline(prompt);
  if (interrupt_take_prompt_flag()) {
    free(*line);
    *line = NULL;
    return LINE_INTERRUPTED;
  }
  return *line != NULL ? LINE_OK : LINE_END;
}

static line_status read_plain(const char *prompt, char **line) {
  size_t capacity = 0;
  fputs(prompt, stdout);
  fflush(stdout);
  *line = NULL;
  ssize_t n = getline(line, &capacity, stdin);
  if (interrupt_take_prompt_flag()) {
    free(*line);
    *line = NULL;
    clearerr(stdin);
    fputc('\n', stdout);
    return LINE_INTERRUPTED;
  }
  if (n < 0) {
    free(*line);
    *line = NULL;
    return LINE_END;
  }
  if (n > 0 && (*line)[n - 1] == '\n') (*line)[n - 1] = '\0';
  return LINE_OK;
}

line_status line_input_read(const char *prompt, char **line) {
  return use_readline ? read_with_readline(prompt, line) : read_plain(prompt, line);
}
