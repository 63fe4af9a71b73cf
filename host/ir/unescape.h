/* unescape.h - C string escapes decoded as XLA's lexer decodes every quoted string (host-private). */
#ifndef HLOKIT_IR_UNESCAPE_H
#define HLOKIT_IR_UNESCAPE_H

#include <stdbool.h>
#include <stddef.h>

/* Decodes the n bytes of s (the text between the quotes) into out, which
 * has room for n bytes (no escape decodes to more bytes than it is written
 * in).  The rules and messages are absl's CUnescape's: \a \b \f \n \r \t \v
 * \\ \? \' \", up to three octal digits, any number of hex digits after \x,
 * exactly four after \u and eight after \U (written as UTF-8); a value past
 * 0xff (or past Unicode for \U) and any other escape are errors.  On error
 * returns false with msg (msg_cap bytes) saying why. */
bool hk_unescape(const char *s, size_t n, char *out, size_t *out_n, char *msg, size_t msg_cap);

#endif
