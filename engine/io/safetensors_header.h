/* The JSON header of a safetensors file, as data: parsing (a hand-written
 * parser for exactly the subset the format uses, every read bounds-checked)
 * and writing. Internal to engine/io. */
#ifndef LT_IO_SAFETENSORS_HEADER_H
#define LT_IO_SAFETENSORS_HEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lt/tensor.h"

/* The reference implementation refuses headers above 100 MB; so does lt, so
 * that a corrupt length cannot make it allocate gigabytes. */
#define ST_MAX_HEADER_BYTES 100000000u

typedef struct st_entry {
  char *name;
  lt_dtype dtype;
  int ndim;
  int64_t shape[LT_MAX_DIMS];
  uint64_t begin, end; /* byte offsets into the data section */
} st_entry;

typedef struct st_header {
  st_entry *entries;
  int count, capacity;
  char **meta_keys, **meta_values;
  int nmeta, meta_capacity;
} st_header;

/* Parses len bytes of header JSON (not NUL-terminated) from the file at
 * path (named in errors) into *out, zeroed first. Checks the JSON, the
 * field names and kinds, dtypes, shapes, duplicate names and keys; not the
 * offsets against the data (the caller knows the data's size). On failure
 * *out is left empty. */
lt_status st_header_parse(const char *path, const char *json, size_t len, st_header *out);
void st_header_free(st_header *h);

/* The format's dtype name ("F32") of an lt dtype, and back. */
const char *st_dtype_name(lt_dtype dt);
bool st_dtype_parse(const char *name, lt_dtype *out);

/* Whether s (NUL-terminated) is valid UTF-8, as the reference parser
 * requires of the whole header. */
bool st_valid_utf8(const char *s, size_t len);

/* The header text for n entries (in the order given, offsets already set)
 * and nmeta metadata pairs (written first, as "__metadata__"), padded with
 * spaces to a multiple of 8 bytes. *out is malloc'ed. */
lt_status st_header_write(const st_entry *entries, int n, const char *const *meta_keys,
                          const char *const *meta_values, int nmeta, char **out, size_t *len);

#endif
