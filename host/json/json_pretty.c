/* json_pretty.c - pretty JSON output for people: objects one key per line, arrays without objects on one line. */
#include <stdio.h>
#include <string.h>

#include "json/json_internal.h"

static void put_escaped(hk_buf *out, const char *s, size_t n) {
  hk_buf_put(out, "\"", 1);
  size_t run = 0;   /* start of the pending unescaped run */
  for (size_t k = 0; k < n; k++) {
    unsigned char ch = (unsigned char)s[k];
    if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
    hk_buf_put(out, s + run, k - run);
    run = k + 1;
    switch (ch) {
      case '"': hk_buf_put(out, "\\\"", 2); break;
      case '\\': hk_buf_put(out, "\\\\", 2); break;
      case '\n': hk_buf_put(out, "\\n", 2); break;
      case '\t': hk_buf_put(out, "\\t", 2); break;
      case '\r': hk_buf_put(out, "\\r", 2); break;
      default: hk_buf_printf(out, "\\u%04x", ch); break;
    }
  }
  hk_buf_put(out, s + run, n - run);
  hk_buf_put(out, "\"", 1);
}

static bool has_object(json_object *v) {
  if (json_object_is_type(v, json_type_object)) return true;
  if (!json_object_is_type(v, json_type_array)) return false;
  for (size_t k = 0; k < json_object_array_length(v); k++)
    if (has_object(json_object_array_get_idx(v, k))) return true;
  return false;
}

static void newline(hk_buf *out, int indent) {
  hk_buf_put(out, "\n", 1);
  for (int k = 0; k < indent; k++) hk_buf_put(out, "  ", 2);
}

static void write_value(json_object *v, int indent, hk_buf *out);

static void write_array(json_object *v, int indent, hk_buf *out) {
  size_t n = json_object_array_length(v);
  bool multiline = has_object(v);
  hk_buf_put(out, "[", 1);
  for (size_t k = 0; k < n; k++) {
    if (k) hk_buf_put(out, multiline ? "," : ", ", multiline ? 1 : 2);
    if (multiline) newline(out, indent + 1);
    write_value(json_object_array_get_idx(v, k), indent + 1, out);
  }
  if (multiline && n) newline(out, indent);
  hk_buf_put(out, "]", 1);
}

/* Nodes in v, counting no further than limit. */
static int count_nodes(json_object *v, int limit) {
  int n = 1;
  if (json_object_is_type(v, json_type_array)) {
    for (size_t k = 0; k < json_object_array_length(v) && n <= limit; k++)
      n += count_nodes(json_object_array_get_idx(v, k), limit - n);
  } else if (json_object_is_type(v, json_type_object)) {
    json_object_object_foreach(v, key, val) {
      (void)key;
      if (n > limit) break;
      n += count_nodes(val, limit - n);
    }
  }
  return n;
}

static void write_inline(json_object *v, hk_buf *out) {
  if (json_object_is_type(v, json_type_array)) {
    hk_buf_put(out, "[", 1);
    for (size_t k = 0; k < json_object_array_length(v); k++) {
      if (k) hk_buf_put(out, ", ", 2);
      write_inline(json_object_array_get_idx(v, k), out);
    }
    hk_buf_put(out, "]", 1);
  } else if (json_object_is_type(v, json_type_object)) {
    hk_buf_put(out, "{", 1);
    bool first = true;
    json_object_object_foreach(v, key, val) {
      if (!first) hk_buf_put(out, ", ", 2);
      first = false;
      put_escaped(out, key, strlen(key));
      hk_buf_put(out, ": ", 2);
      write_inline(val, out);
    }
    hk_buf_put(out, "}", 1);
  } else {
    write_value(v, 0, out);
  }
}

/* Small objects (a shape, a window dim) go on one line when it is short;
 * instructions and computations always get a line per key. */
#define INLINE_WIDTH 100
static bool try_inline(json_object *v, hk_buf *out) {
  if (hkj_get(v, "opcode") || hkj_get(v, "instructions") || count_nodes(v, 40) > 40) return false;
  hk_buf tmp;
  hk_buf_init(&tmp);
  write_inline(v, &tmp);
  bool fits = tmp.len <= INLINE_WIDTH;
  if (fits) hk_buf_put(out, tmp.data, tmp.len);
  hk_buf_free(&tmp);
  return fits;
}

static void write_object(json_object *v, int indent, hk_buf *out) {
  if (indent > 0 && try_inline(v, out)) return;
  hk_buf_put(out, "{", 1);
  bool first = true;
  json_object_object_foreach(v, key, val) {
    if (!first) hk_buf_put(out, ",", 1);
    first = false;
    newline(out, indent + 1);
    put_escaped(out, key, strlen(key));
    hk_buf_put(out, ": ", 2);
    write_value(val, indent + 1, out);
  }
  if (!first) newline(out, indent);
  hk_buf_put(out, "}", 1);
}

static void write_value(json_object *v, int indent, hk_buf *out) {
  switch (json_object_get_type(v)) {
    case json_type_object: write_object(v, indent, out); return;
    case json_type_array: write_array(v, indent, out); return;
    case json_type_string:
      put_escaped(out, json_object_get_string(v), (size_t)json_object_get_string_len(v));
      return;
    default: {
      size_t len = 0;
      const char *s = json_object_to_json_string_length(v, JSON_C_TO_STRING_PLAIN, &len);
      hk_buf_put(out, s, len);
      return;
    }
  }
}

void hkj_write_pretty(json_object *doc, hk_buf *out) {
  write_value(doc, 0, out);
  hk_buf_put(out, "\n", 1);
}
