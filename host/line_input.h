/* Reading one line of REPL input: libedit's readline on a terminal, plain stdin otherwise. */
#ifndef LT_HOST_LINE_INPUT_H
#define LT_HOST_LINE_INPUT_H

typedef enum line_status {
  LINE_OK,          /* *line holds the text (malloc'd, no newline) */
  LINE_END,         /* end of input (Ctrl-D) */
  LINE_INTERRUPTED, /* Ctrl-C at the prompt: the line and any pending statement are dropped */
} line_status;

/* Sets up line editing when stdin is a terminal; returns whether it is one. */
int line_input_open(void);

line_status line_input_read(const char *prompt, char **line);

#endif
