/* lex.h - a tiny cursor lexer shared by the sharding and metadata parsers (errors as "@OFFSET: message"). */
#ifndef HK_SHARDING_LEX_H
#define HK_SHARDING_LEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hlokit/ir.h"
#include "hlokit/status.h"

typedef struct hk_cursor {
  const char *s;
  size_t n;   /* length of s */
  size_t i;   /* current offset */
} hk_cursor;

/* Skips blanks and C comments; returns the next byte (0 at the end). */
char hk_cur_peek(hk_cursor *c);
/* Consumes ch if it is next (after blanks). */
bool hk_cur_eat(hk_cursor *c, char ch);
/* Consumes `word` if it is next and is not followed by an identifier char. */
bool hk_cur_eat_word(hk_cursor *c, const char *word);
/* An identifier (a letter or _, then letters, digits, _ . -): sets start and len; false if none. */
bool hk_cur_ident(hk_cursor *c, const char **start, size_t *len);
/* "@OFFSET: message" at offset `at`. */
hk_status *hk_cur_error_at(size_t at, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same at the next token. */
hk_status *hk_cur_error(hk_cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Requires ch next; error "expected 'ch' what". */
hk_status *hk_cur_expect(hk_cursor *c, char ch, const char *what);
/* A decimal int64 with optional sign. */
hk_status *hk_cur_int(hk_cursor *c, int64_t *out);
/* A C-escaped string literal "..." unescaped into m (interned). */
hk_status *hk_cur_string(hk_cursor *c, hk_module *m, const char **out, size_t *len);
/* Skips one balanced value: a string, a {...} group or a bare token;
 * sets *start and *len to its text. */
hk_status *hk_cur_skip_value(hk_cursor *c, const char **start, size_t *len);

#endif
