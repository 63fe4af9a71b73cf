/* attr_print.c - prints the Shardy model in the form MLIR prints Shardy
 * attributes (shardy's printers.cc), so export writes what JAX and XLA
 * write. */
#include <string.h>

#include "sdy.h"

/* A quoted MLIR string, escaping quotes, backslashes and control bytes. */
static void print_string(const char *s, hk_buf *b) {
  hk_buf_puts(b, "\"");
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') hk_buf_printf(b, "\\%c", ch);
    else if (ch < 0x20 || ch >= 0x7f) hk_buf_printf(b, "\\%02X", ch);
    else hk_buf_put(b, s, 1);
  }
  hk_buf_puts(b, "\"");
}

/* A symbol: bare when it is an identifier, else quoted. */
static void print_symbol(const char *s, hk_buf *b) {
  bool bare = (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_';
  for (const char *q = s; *q && bare; q++)
    bare = (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
           strchr("_$.", *q);
  if (bare) hk_buf_puts(b, s);
  else print_string(s, b);
}

void sdy_print_mesh_body(const sdy_mesh *m, hk_buf *b) {
  hk_buf_puts(b, "<[");
  for (int k = 0; k < m->n_axes; k++) {
    if (k) hk_buf_puts(b, ", ");
    print_string(m->axes[k].name, b);
    hk_buf_printf(b, "=%lld", (long long)m->axes[k].size);
  }
  hk_buf_puts(b, "]");
  if (m->n_devices) {
    hk_buf_puts(b, ", device_ids=[");
    for (int k = 0; k < m->n_devices; k++)
      hk_buf_printf(b, "%s%lld", k ? ", " : "", (long long)m->devices[k]);
    hk_buf_puts(b, "]");
  }
  hk_buf_puts(b, ">");
}

void sdy_print_meshes(const sdy_meshes *ms, hk_buf *b) {
  hk_buf_puts(b, "{");
  for (int k = 0; k < ms->n; k++) {
    if (k) hk_buf_puts(b, ", ");
    print_symbol(ms->m[k].name, b);
    hk_buf_puts(b, " = #sdy.mesh");
    sdy_print_mesh_body(&ms->m[k], b);
  }
  hk_buf_puts(b, "}");
}

static void print_axis_ref(const sdy_axis_ref *r, hk_buf *b) {
  print_string(r->name, b);
  if (r->sub) hk_buf_printf(b, ":(%lld)%lld", (long long)r->pre_size, (long long)r->size);
}

static void print_axis_list(const sdy_axis_ref *v, int n, hk_buf *b) {
  hk_buf_puts(b, "{");
  for (int k = 0; k < n; k++) {
    if (k) hk_buf_puts(b, ", ");
    print_axis_ref(&v[k], b);
  }
  hk_buf_puts(b, "}");
}

static void print_dim(const sdy_dim *d, hk_buf *b) {
  hk_buf_puts(b, "{");
  for (int k = 0; k < d->n_axes; k++) {
    if (k) hk_buf_puts(b, ", ");
    print_axis_ref(&d->axes[k], b);
  }
  if (d->open) hk_buf_puts(b, d->n_axes ? ", ?" : "?");
  hk_buf_puts(b, "}");
  if (d->priority >= 0) hk_buf_printf(b, "p%lld", (long long)d->priority);
}

void sdy_print_sharding_body(const sdy_sharding *s, hk_buf *b) {
  hk_buf_puts(b, "<");
  if (s->mesh_name[0]) {
    hk_buf_puts(b, "@");
    print_symbol(s->mesh_name, b);
  } else {
    hk_buf_puts(b, "mesh");
    sdy_print_mesh_body(&s->inline_mesh, b);
  }
  hk_buf_puts(b, ", [");
  for (int k = 0; k < s->rank; k++) {
    if (k) hk_buf_puts(b, ", ");
    print_dim(&s->dims[k], b);
  }
  hk_buf_puts(b, "]");
  if (s->n_replicated) {
    hk_buf_puts(b, ", replicated=");
    print_axis_list(s->replicated, s->n_replicated, b);
  }
  if (s->n_unreduced) {
    hk_buf_puts(b, ", unreduced=");
    print_axis_list(s->unreduced, s->n_unreduced, b);
  }
  hk_buf_puts(b, ">");
}

void sdy_print_sharding(const sdy_sharding *s, hk_buf *b) {
  hk_buf_puts(b, "#sdy.sharding");
  sdy_print_sharding_body(s, b);
}

void sdy_print_per_value(const sdy_sharding *v, int n, hk_buf *b) {
  hk_buf_puts(b, "#sdy.sharding_per_value<[");
  for (int k = 0; k < n; k++) {
    if (k) hk_buf_puts(b, ", ");
    sdy_print_sharding_body(&v[k], b);
  }
  hk_buf_puts(b, "]>");
}

void sdy_print_manual_axes(const sdy_manual_axes *ma, hk_buf *b) {
  hk_buf_puts(b, "#sdy<manual_axes{");
  for (int k = 0; k < ma->n; k++) {
    if (k) hk_buf_puts(b, ", ");
    print_string(ma->names[k], b);
  }
  hk_buf_puts(b, "}>");
}
