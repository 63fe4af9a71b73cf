/* text.h - XLA's HLO text format: parse and print modules and pieces.
 *
 * hk_parse_module() accepts both the long form (%-names, operand shapes,
 * computation signatures) and the short form, with or without an HloModule
 * header.  Errors are "FILE:LINE:COL: was parsing LINE:COL: error: MESSAGE"
 * (XLA's wording after the position), the source line and a caret.
 * hk_print_module() prints exactly as XLA's HloModule::ToString does for the
 * chosen form, so print(parse(text)) is a fixed point. */
#ifndef HLOKIT_TEXT_H
#define HLOKIT_TEXT_H

#include "export.h"

#include "ir.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_ABI_BEGIN

typedef enum hk_print_form {
  HK_PRINT_LONG,    /* XLA's default ToString: %names, operand shapes, signatures, large constants */
  HK_PRINT_SHORT,   /* XLA's short parsable form: no %, no operand shapes */
} hk_print_form;

/* filename is used only in error messages (may be NULL: "<input>"). */
hk_status *hk_parse_module(const char *text, size_t len, const char *filename,
                           hk_module **out);

/* Pieces, as XLA's ParseShape / ParseSharding / ... do (whole text must be
 * consumed). */
hk_status *hk_parse_shape(hk_module *m, const char *text, size_t len, const hk_shape **out);
/* window={...} contents ("size=2x2 stride=1x2 pad=0_1x1_1", braces optional). */
hk_status *hk_parse_window(hk_module *m, const char *text, size_t len, const hk_window **out);
/* dim_labels ("b01f_01io->b01f"; '?' marks an unlabeled dimension, left -1). */
hk_status *hk_parse_conv_dnums(hk_module *m, const char *text, size_t len,
                               const hk_conv_dnums **out);
/* A pad instruction's padding ("0_1_0x2_3_4": lo_hi[_interior] per dimension). */
hk_status *hk_parse_padding_config(hk_module *m, const char *text, size_t len, int32_t *n,
                                   const hk_pad_dim **out);
/* frontend_attributes={...} contents with the braces ("{a=\"b\",c=\"d\"}"), in order (ABI 1.5). */
hk_status *hk_parse_frontend_attributes(hk_module *m, const char *text, size_t len, int32_t *n,
                                        const hk_kv **out);
/* replica_groups: "{{0,1},{2,3}}" or the iota form "[2,2]<=[4]" (ABI 1.5). */
hk_status *hk_parse_replica_groups(hk_module *m, const char *text, size_t len,
                                   const hk_replica_groups **out);

/* A growable output buffer. */
typedef struct hk_buf {
  char *data;
  size_t len, cap;
} hk_buf;
void hk_buf_init(hk_buf *b);
void hk_buf_free(hk_buf *b);
void hk_buf_put(hk_buf *b, const char *s, size_t n);
void hk_buf_puts(hk_buf *b, const char *s);
void hk_buf_printf(hk_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends the whole file at path ("-": standard input) to b, which stays
 * NUL-terminated (the NUL not counted in len); a file's size is read first
 * so its bytes are copied once.  Errors name the path: HK_NOT_FOUND when it
 * cannot be opened, HK_INVALID_ARGUMENT when reading fails (ABI 1.2). */
hk_status *hk_buf_read_file(hk_buf *b, const char *path);
/* A whole file's bytes, read-only, for parsing in place: a regular file is
 * mapped (no copy), anything else ("-": standard input, pipes) is read into
 * memory.  data is not NUL-terminated (the parsers take a length).  The
 * file must not be truncated while it is open.  Errors as hk_buf_read_file
 * (ABI 1.2). */
typedef struct hk_file_bytes {
  const char *data;
  size_t len;
  void *held;        /* host-private: the mapping or the buffer */
  size_t held_len;
} hk_file_bytes;
hk_status *hk_file_bytes_open(const char *path, hk_file_bytes *out);
void hk_file_bytes_close(hk_file_bytes *f);

void hk_print_module(const hk_module *m, hk_print_form form, hk_buf *out);
/* Prints m as hk_print_module does, handing the text to write(ctx, data,
 * len) in order, a megabyte or so at a time, as it is printed: the whole
 * text is never in memory at once (hlokit opt writes its output file
 * so).  The first nonzero return of write ends the printing (write is not
 * called again) and is returned; 0 when all the text was handed on.
 * write is called on the calling thread (ABI 1.5). */
typedef int (*hk_print_write_fn)(void *ctx, const char *data, size_t len);
int hk_print_module_stream(const hk_module *m, hk_print_form form, hk_print_write_fn write,
                           void *ctx);
void hk_print_shape(const hk_shape *s, hk_buf *out);
void hk_print_instr(const hk_instr *i, hk_print_form form, hk_buf *out);
/* malloc'ed strings, for messages and tests. */
char *hk_module_to_string(const hk_module *m, hk_print_form form);
char *hk_shape_to_string(const hk_shape *s);
char *hk_instr_to_string(const hk_instr *i, hk_print_form form);

HK_ABI_END

#ifdef __cplusplus
}
#endif
#endif
