/* parse_attrs.c - instruction attributes of HLO text (name=value after the operands) into hk_attrs and friends. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sharding/metadata.h"
#include "sharding/named.h"
#include "text/text_internal.h"

#define IS(lit) (len == sizeof(lit) - 1 && memcmp(name, lit, len) == 0)

static void add_raw(tx_parser *P, tx_pending *pi, const char *name, size_t len,
                    const char *v, size_t vlen) {
  if (pi->n_raw == pi->cap_raw) {
    pi->cap_raw = pi->cap_raw ? 2 * pi->cap_raw : 4;
    pi->raw = hk_check_alloc(realloc(pi->raw, (size_t)pi->cap_raw * sizeof *pi->raw));
  }
  pi->raw[pi->n_raw].name = tx_intern(P, name, len);
  pi->raw[pi->n_raw].value = tx_intern(P, v, vlen);
  pi->n_raw++;
  pi->has_attrs = true;
}

void tx_default_outfeed_shape(tx_parser *P, tx_pending *pi, const hk_shape *s) {
  for (int k = 0; k < pi->n_raw; k++)
    if (!strcmp(pi->raw[k].name, "outfeed_shape")) return;
  hk_buf b;
  hk_buf_init(&b);
  tx_print_shape(s, true, &b);
  add_raw(P, pi, "outfeed_shape", 13, b.data, b.len);
  hk_buf_free(&b);
}

/* A value whose grammar check reads it, kept verbatim. */
static bool parse_checked_raw(tx_parser *P, tx_pending *pi, const char *name, size_t len,
                              bool (*check)(tx_parser *)) {
  const char *st = (tx_skip(P), P->p);
  if (!check(P)) return false;
  add_raw(P, pi, name, len, st, (size_t)(P->p - st));
  return true;
}

static bool check_sparsity(tx_parser *P) { return tx_check_operand_configs(P, true); }
static bool check_block_scaling(tx_parser *P) { return tx_check_operand_configs(P, false); }

static bool parse_raw(tx_parser *P, tx_pending *pi, const char *name, size_t len) {
  const char *v;
  size_t vl;
  if (!tx_raw_value(P, &v, &vl)) return false;
  add_raw(P, pi, name, len, v, vl);
  return true;
}

/* Copies a status message of the form "@OFFSET: msg" from the sharding
 * folder into a positioned parse error. */
static bool offset_error(tx_parser *P, const char *base, hk_status *st) {
  const char *msg = st->message;
  const char *at = base;
  if (msg[0] == '@') {
    char *end;
    long off = strtol(msg + 1, &end, 10);
    if (end[0] == ':') {
      at = base + off;
      msg = end + 1;
      while (*msg == ' ') msg++;
    }
  }
  tx_error_at(P, at, "%s", msg);
  hk_status_free(st);
  return false;
}

bool tx_parse_sharding_value(tx_parser *P, const hk_sharding **out) {
  tx_skip(P);
  size_t used = 0;
  const char *base = P->p;
  if (tx_peek(P) != '{') return tx_error_at(P, P->p, "expects '{' to start a sharding");
  /* the same sharding text as lately: hk_sharding_parse would read the
   * same bytes and find the same interned sharding */
  int k = tx_memo_index(P, base);
  struct tx_sharding_memo *e = k < 0 ? NULL : &P->sharding_memo[k];
  if (e && e->text && (size_t)(P->end - base) >= e->len && tx_bytes_equal(base, e->text, e->len)) {
    *out = e->sharding;
    P->p = base + e->len;
    return true;
  }
  hk_status *st = hk_sharding_parse(P->m, base, (size_t)(P->end - base), out, &used);
  if (st) return offset_error(P, base, st);
  if (e && used && base[used - 1] == '}')
    *e = (struct tx_sharding_memo){base, (uint32_t)used, *out};
  P->p = base + used;
  return true;
}

static bool parse_metadata(tx_parser *P, tx_pending *pi) {
  tx_skip(P);
  const char *base = P->p;
  if (tx_peek(P) != '{') return tx_error_at(P, P->p, "expects '{' to start metadata");
  hk_metadata md;
  memset(&md, 0, sizeof md);
  size_t used = 0;
  hk_status *st = hk_metadata_parse(P->m, base, (size_t)(P->end - base), &md, &used);
  if (st) return offset_error(P, base, st);
  P->p = base + used;
  pi->a.metadata = hk_memdup(P->m, &md, sizeof md);
  pi->has_attrs = true;
  return true;
}

/* key=value pairs: frontend_attributes={a="b",c={...}} */
bool tx_parse_kv_list(tx_parser *P, int32_t *n_out, const hk_kv **out) {
  if (!tx_expect(P, '{', "at the start of attributes")) return false;
  hk_kv stack[16];
  hk_kv *kv = stack;
  int n = 0, cap = 16;
  bool ok = true;
  if (!tx_accept(P, '}')) {
    do {
      tx_skip(P);
      const char *k = P->p;
      while (P->p < P->end && *P->p != '=' && *P->p != '}' && *P->p != ',' && !isspace((unsigned char)*P->p))
        P->p++;
      size_t kl = (size_t)(P->p - k);
      if (!kl || !(ok = tx_expect(P, '=', "after an attribute key"))) {
        if (ok) ok = tx_error_at(P, k, "expects an attribute key");
        break;
      }
      const char *v;
      size_t vl;
      if (tx_peek(P) == '"') {
        if (!(ok = tx_string(P, &v, &vl))) break;
      } else {
        const char *rv;
        if (!(ok = tx_raw_value(P, &rv, &vl))) break;
        v = tx_intern(P, rv, vl);
      }
      if (n == cap) {
        cap *= 2;
        if (kv == stack) {
          kv = hk_check_alloc(malloc((size_t)cap * sizeof *kv));
          memcpy(kv, stack, sizeof stack);
        } else {
          kv = hk_check_alloc(realloc(kv, (size_t)cap * sizeof *kv));
        }
      }
      kv[n].key = tx_intern(P, k, kl);
      kv[n].value = v;
      n++;
    } while (tx_accept(P, ','));
    if (ok) ok = tx_expect(P, '}', "at the end of attributes");
  }
  if (ok) {
    *n_out = n;
    *out = n ? hk_memdup(P->m, kv, (size_t)n * sizeof *kv) : NULL;
  }
  if (kv != stack) free(kv);
  return ok;
}

/* ---- window / dim_labels / padding ---------------------------------------- */

bool tx_x_list(tx_parser *P, int64_t *vals, int *n, char sep_inner, int per,
                         const char *what) {
  /* a x-separated list of items, each `per` integers joined by sep_inner */
  int k = 0;
  for (;;) {
    for (int j = 0; j < per; j++) {
      int64_t v;
      tx_skip(P);
      if (!tx_int(P, &v)) return false;
      if (k >= HK_MAX_RANK * 3) return tx_error_at(P, P->p, "too many %s entries", what);
      vals[k++] = v;
      if (j + 1 < per) {
        if (P->p >= P->end || *P->p != sep_inner) {
          if (per == 2)
            return tx_error_at(P, P->p, "expects padding_low and padding_high separated by '_'");
          return tx_error_at(P, P->p, "expects '%c' in %s", sep_inner, what);
        }
        P->p++;
      }
    }
    if (P->p < P->end && *P->p == sep_inner && per == 2)
      return tx_error_at(P, P->p, "expects padding_low and padding_high separated by '_'");
    if (P->p < P->end && *P->p == 'x') {
      P->p++;
      continue;
    }
    break;
  }
  *n = k / per;
  return true;
}

static bool parse_window(tx_parser *P, tx_pending *pi) {
  const char *open = (tx_skip(P), P->p);
  if (!tx_expect(P, '{', "at the start of a window")) return false;
  int64_t size[HK_MAX_RANK * 3], stride[HK_MAX_RANK * 3], pad[HK_MAX_RANK * 3],
      lhs[HK_MAX_RANK * 3], rhs[HK_MAX_RANK * 3], rev[HK_MAX_RANK * 3];
  int ns = -1, nst = -1, np = -1, nl = -1, nr = -1, nrev = -1;
  /* XLA's ParseWindow: each field once; a window has size's dimensions */
  static const char *const names[6] = {"size", "stride", "pad", "lhs_dilate", "rhs_dilate",
                                       "rhs_reversal"};
  int64_t *vals[6] = {size, stride, pad, lhs, rhs, rev};
  int *counts[6] = {&ns, &nst, &np, &nl, &nr, &nrev};
  while (!tx_accept(P, '}')) {
    const char *k;
    size_t kl;
    const char *at = (tx_skip(P), P->p);
    if (!tx_ident(P, &k, &kl) || !tx_accept(P, '='))
      return tx_error_at(P, at, "expects sub-attributes in window");
    int f = 0;
    while (f < 6 && !(strlen(names[f]) == kl && !memcmp(names[f], k, kl))) f++;
    if (f == 6) return tx_error_at(P, at, "unexpected attribute name: %.*s", (int)kl, k);
    if (*counts[f] >= 0)
      return tx_error_at(P, (tx_skip(P), P->p), "sub-attribute '%s=' already exists",
                         f == 4 ? "rls_dilate" : names[f]);   /* (XLA's spelling) */
    if (!tx_x_list(P, vals[f], counts[f], f == 2 ? '_' : 'x', f == 2 ? 2 : 1, names[f]))
      return false;
  }
  int n = ns < 0 ? 0 : ns;
  for (int f = 1; f < 6; f++)
    if (*counts[f] >= 0 && *counts[f] != n)
      return tx_error_at(P, open, "expects '%s=' has the same size as 'size='", names[f]);
  hk_window *w = hk_alloc(P->m, sizeof *w);
  hk_window_dim *d = n ? hk_alloc(P->m, sizeof *d * (size_t)n) : NULL;
  for (int i = 0; i < n; i++) {
    d[i].size = ns >= 0 ? size[i] : 1;
    d[i].stride = nst >= 0 ? stride[i] : 1;
    d[i].pad_lo = np >= 0 ? pad[2 * i] : 0;
    d[i].pad_hi = np >= 0 ? pad[2 * i + 1] : 0;
    d[i].base_dilation = nl >= 0 ? lhs[i] : 1;
    d[i].window_dilation = nr >= 0 ? rhs[i] : 1;
    d[i].reversal = nrev >= 0 ? rev[i] != 0 : false;
  }
  w->n_dims = n;
  w->dims = d;
  pi->a.window = w;
  pi->has_attrs = true;
  pi->seen_window = true;
  return true;
}

/* Length of the run at q of characters in set (a dim_labels part). */
static size_t span_of(const char *q, const char *e, const char *set) {
  size_t n = 0;
  while (q + n < e && q[n] && strchr(set, q[n])) n++;
  return n;
}

/* One part of dim_labels (lhs "bf", rhs "io", output "bf" as `a`): every
 * letter once ('?' skips a dimension), digits below the part's length;
 * positions into batch/feature/spatial.  The spatial count is the number
 * of characters that are neither a letter of the part nor '?'. */
static bool dim_labels_part(tx_parser *P, const char *at, const char *part, size_t n,
                            const char *a, const char *which, int64_t *first, int64_t *second,
                            int64_t *spatial, int n_spatial) {
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if (part[i] != '?' && part[i] == part[j])
        return tx_error_at(P, at, "expects unique %s dimension numbers, but sees %.*s", which,
                           (int)n, part);
  for (size_t i = 0; i < n; i++) {
    char c = part[i];
    if (c == '?') continue;
    if (c == a[0]) {
      *first = (int64_t)i;
    } else if (c == a[1]) {
      *second = (int64_t)i;
    } else if (c >= '0' && c < '0' + (int)n) {
      if (c - '0' >= n_spatial)
        return tx_error_at(P, at, "spatial dimension %c of the %s dimension numbers %.*s is not below its %d spatial dimensions",
                           c, which, (int)n, part, n_spatial);
      spatial[c - '0'] = (int64_t)i;
    } else {
      return tx_error_at(P, at, "expects [0-%d%s?] in %s dimension numbers", (int)n - 1, a, which);
    }
  }
  return true;
}

static int count_spatial(const char *part, size_t n, const char *a) {
  int k = 0;
  for (size_t i = 0; i < n; i++)
    if (part[i] != a[0] && part[i] != a[1] && part[i] != '?') k++;
  return k;
}

/* dim_labels=LHS_RHS->OUT as XLA's lexer and ParseConvolutionDimensionNumbers
 * read it; dimensions a part does not name stay 0 (the proto's default). */
static bool parse_dim_labels(tx_parser *P, tx_pending *pi) {
  tx_skip(P);
  const char *at = P->p, *e = P->end;
  const char *part[3];
  size_t plen[3];
  static const char *const sets[3] = {"0123456789bf?", "0123456789io?", "0123456789bf?"};
  const char *q = at;
  bool ok = true;
  for (int k = 0; k < 3 && ok; k++) {
    part[k] = q;
    plen[k] = span_of(q, e, sets[k]);
    q += plen[k];
    if (plen[k] < 2) ok = false;
    else if (k == 0) ok = q < e && *q == '_' && ++q;
    else if (k == 1) ok = e - q >= 2 && q[0] == '-' && q[1] == '>' && (q += 2);
  }
  if (!ok) return tx_error_at(P, at, "expects dim labels pattern, e.g., 'bf0_0io->0bf'");
  static const char *const letters[3] = {"bf", "io", "bf"};
  int n_sp[3];
  for (int k = 0; k < 3; k++) n_sp[k] = count_spatial(part[k], plen[k], letters[k]);
  static const char *const which[3] = {"lhs", "rhs", "output"};
  hk_conv_dnums *d = hk_alloc(P->m, sizeof *d);
  int n = n_sp[0] > n_sp[1] ? n_sp[0] : n_sp[1];
  if (n_sp[2] > n) n = n_sp[2];
  int64_t *sp = hk_alloc(P->m, sizeof(int64_t) * (size_t)(3 * (n ? n : 1)));
  int64_t *spatial[3] = {sp, sp + n, sp + 2 * n};
  int64_t *lo[3] = {&d->input_batch, &d->kernel_input_feature, &d->output_batch};
  int64_t *hi[3] = {&d->input_feature, &d->kernel_output_feature, &d->output_feature};
  for (int k = 0; k < 3; k++)
    if (!dim_labels_part(P, at, part[k], plen[k], letters[k], which[k], lo[k], hi[k], spatial[k],
                         n_sp[k]))
      return false;
  if (n_sp[0] != n_sp[2] || n_sp[0] != n_sp[1])
    return tx_error_at(P, at,
                       "input, kernel, and output must have same number of spatial dimensions, "
                       "but got %d, %d, %d, respectively.",
                       n_sp[0], n_sp[1], n_sp[2]);
  P->p = q;
  d->n_spatial = n;
  d->input_spatial = spatial[0];
  d->kernel_spatial = spatial[1];
  d->output_spatial = spatial[2];
  pi->a.conv = d;
  pi->has_attrs = true;
  pi->seen_dim_labels = true;
  return true;
}

static bool parse_padding(tx_parser *P, tx_pending *pi) {
  /* each dimension lo_hi or lo_hi_interior (XLA's lexer: they may mix) */
  int64_t v[HK_MAX_RANK * 3];
  int k = 0;
  tx_skip(P);
  for (;;) {
    int here = 0;
    for (;;) {
      int64_t x;
      if (!tx_int(P, &x)) return false;
      if (k >= HK_MAX_RANK * 3) return tx_error_at(P, P->p, "padding has too many dimensions");
      v[k++] = x, here++;
      if (P->p < P->end && *P->p == '_') {
        P->p++;
        continue;
      }
      break;
    }
    if (here < 2 || here > 3)
      return tx_error_at(P, P->p, "expects padding_low, padding_high and optional padding_interior separated by '_'");
    if (here == 3 && v[k - 1] < 0)
      return tx_error_at(P, P->p, "expects padding config, e.g., '0_0_0x3_3_1'");
    if (here == 2) {
      if (k >= HK_MAX_RANK * 3) return tx_error_at(P, P->p, "padding has too many dimensions");
      v[k++] = 0;
    }
    if (P->p < P->end && *P->p == 'x') {
      P->p++;
      continue;
    }
    break;
  }
  int n = k / 3;
  hk_pad_dim *d = hk_alloc(P->m, sizeof *d * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) {
    d[i].lo = v[i * 3];
    d[i].hi = v[i * 3 + 1];
    d[i].interior = v[i * 3 + 2];
  }
  pi->a.n_pad = n;
  pi->a.pad = d;
  pi->has_attrs = true;
  pi->seen_padding = true;
  return true;
}

static bool parse_slice(tx_parser *P, tx_pending *pi) {
  if (!tx_expect(P, '{', "at the start of slice")) return false;
  hk_slice_dim d[HK_MAX_RANK];
  int n = 0;
  if (!tx_accept(P, '}')) {
    do {
      int64_t x[3] = {0, 0, 1};
      int k = 0;
      if (!tx_expect(P, '[', "at the start of a slice range")) return false;
      do {
        if (k >= 3) return tx_error_at(P, P->p, "too many values in a slice range");
        tx_skip(P);
        if (!tx_int(P, &x[k++])) return false;
      } while (tx_accept(P, ':'));
      if (k < 2) return tx_error_at(P, P->p, "expects start:limit[:stride] in slice");
      if (!tx_expect(P, ']', "at the end of a slice range")) return false;
      if (n >= HK_MAX_RANK) return tx_error_at(P, P->p, "slice has too many dimensions");
      d[n].start = x[0], d[n].limit = x[1], d[n].stride = x[2];
      n++;
    } while (tx_accept(P, ','));
    if (!tx_expect(P, '}', "at the end of slice")) return false;
  }
  pi->a.n_slice = n;
  pi->a.slice = n ? hk_memdup(P->m, d, sizeof *d * (size_t)n) : hk_alloc(P->m, sizeof *d);
  pi->has_attrs = true;
  pi->seen_slice = true;
  return true;
}

/* ---- replica groups ----------------------------------------------------------- */

static bool parse_iota(tx_parser *P, hk_iota **out) {
  hk_i64s dims, rdims;
  if (!tx_int_list(P, '[', ']', &dims)) return false;
  tx_skip(P);
  if (P->end - P->p < 2 || P->p[0] != '<' || P->p[1] != '=')
    return tx_error_at(P, P->p, "expects '<=' in an iota list");
  P->p += 2;
  if (!tx_int_list(P, '[', ']', &rdims)) return false;
  int32_t *perm = hk_alloc(P->m, sizeof(int32_t) * (size_t)(rdims.n ? rdims.n : 1));
  for (int i = 0; i < rdims.n; i++) perm[i] = i;
  if (P->p < P->end && *P->p == 'T') {
    P->p++;
    hk_i64s pv;
    if (!tx_int_list(P, '(', ')', &pv)) return false;
    if (pv.n != rdims.n) return tx_error_at(P, P->p, "iota transpose has the wrong rank");
    for (int i = 0; i < pv.n; i++) perm[i] = (int32_t)pv.v[i];
  }
  hk_iota *io = hk_alloc(P->m, sizeof *io);
  io->n_dims = dims.n;
  io->dims = dims.v;
  io->n_reshape_dims = rdims.n;
  io->reshape_dims = rdims.v;
  io->perm = perm;
  *out = io;
  return true;
}

/* iota(prod) reshaped, transposed by perm, flattened. */
static void expand_iota(const hk_iota *io, int64_t *out, int64_t total) {
  int r = io->n_reshape_dims;
  int64_t tdims[HK_MAX_RANK], strides[HK_MAX_RANK], idx[HK_MAX_RANK];
  int64_t s = 1;
  int64_t orig_stride[HK_MAX_RANK];
  for (int i = r - 1; i >= 0; i--) orig_stride[i] = s, s *= io->reshape_dims[i];
  for (int i = 0; i < r; i++) {
    tdims[i] = io->reshape_dims[io->perm[i]];
    strides[i] = orig_stride[io->perm[i]];
    idx[i] = 0;
  }
  for (int64_t k = 0; k < total; k++) {
    int64_t v = 0;
    for (int i = 0; i < r; i++) v += idx[i] * strides[i];
    out[k] = v;
    for (int i = r - 1; i >= 0; i--) {
      if (++idx[i] < tdims[i]) break;
      idx[i] = 0;
    }
  }
}

static bool parse_replica_groups(tx_parser *P, const hk_replica_groups **out) {
  hk_replica_groups *g = hk_alloc(P->m, sizeof *g);
  if (tx_peek(P) == '[') {
    hk_iota *io = NULL;
    if (!parse_iota(P, &io)) return false;
    if (io->n_dims != 2) return tx_error_at(P, P->p, "iota replica groups must have 2 dimensions");
    int64_t total = io->dims[0] * io->dims[1], rt = 1;
    for (int i = 0; i < io->n_reshape_dims; i++) rt *= io->reshape_dims[i];
    if (rt != total || total < 0 || total > (1 << 24))
      return tx_error_at(P, P->p, "iota replica groups have inconsistent sizes");
    int64_t *ids = hk_alloc(P->m, sizeof(int64_t) * (size_t)(total ? total : 1));
    expand_iota(io, ids, total);
    int32_t *gs = hk_alloc(P->m, sizeof(int32_t) * (size_t)(io->dims[0] + 1));
    for (int64_t i = 0; i <= io->dims[0]; i++) gs[i] = (int32_t)(i * io->dims[1]);
    g->n_groups = (int32_t)io->dims[0];
    g->group_start = gs;
    g->ids = ids;
    g->iota = io;
    *out = g;
    return true;
  }
  if (tx_peek(P) == 'm') {   /* newer XLA: mesh['x'=2,...] {'x'} */
    const char *base = (tx_skip(P), P->p);
    size_t used = 0;
    hk_status *st = hk_mesh_replica_groups_parse(P->m, base, (size_t)(P->end - base), out, &used);
    if (st) return offset_error(P, base, st);
    P->p = base + used;
    return true;
  }
  if (!tx_expect(P, '{', "at the start of replica groups")) return false;
  tx_vec starts = {0};
  size_t n_ids = 0, cap = 0;
  int64_t *ids = NULL;
  bool ok = true;
  tx_vec_push(&starts, (void *)(intptr_t)0);
  if (!tx_accept(P, '}')) {
    do {
      hk_i64s one;
      if (!(ok = tx_int_list(P, '{', '}', &one))) break;
      if (n_ids + (size_t)one.n > cap) {
        cap = (n_ids + (size_t)one.n) * 2 + 16;
        ids = hk_check_alloc(realloc(ids, cap * sizeof *ids));
      }
      for (int i = 0; i < one.n; i++) ids[n_ids++] = one.v[i];
      tx_vec_push(&starts, (void *)(intptr_t)n_ids);
    } while (tx_accept(P, ','));
    if (ok) ok = tx_expect(P, '}', "at the end of replica groups");
  }
  if (ok) {
    g->n_groups = (int32_t)starts.n - 1;
    int32_t *gs = hk_alloc(P->m, sizeof(int32_t) * starts.n);
    for (size_t i = 0; i < starts.n; i++) gs[i] = (int32_t)(intptr_t)starts.v[i];
    g->group_start = gs;
    g->ids = n_ids ? hk_memdup(P->m, ids, n_ids * sizeof *ids) : NULL;
    *out = g;
  }
  free(starts.v);
  free(ids);
  return ok;
}

static bool parse_pairs(tx_parser *P, tx_pending *pi) {
  if (!tx_expect(P, '{', "at the start of source_target_pairs")) return false;
  size_t n = 0, cap = 0;
  hk_pair *v = NULL;
  bool ok = true;
  if (!tx_accept(P, '}')) {
    do {
      hk_i64s one;
      if (!(ok = tx_int_list(P, '{', '}', &one))) break;
      if (one.n != 2) {
        ok = tx_error_at(P, P->p, "expects source-target pairs of two ids");
        break;
      }
      if (n == cap) cap = cap ? 2 * cap : 8, v = hk_check_alloc(realloc(v, cap * sizeof *v));
      v[n].a = one.v[0], v[n].b = one.v[1];
      n++;
    } while (tx_accept(P, ','));
    if (ok) ok = tx_expect(P, '}', "at the end of source_target_pairs");
  }
  if (ok) {
    pi->a.n_source_target_pairs = (int32_t)n;
    pi->a.source_target_pairs = n ? hk_memdup(P->m, v, n * sizeof *v) : hk_alloc(P->m, sizeof *v);
    pi->has_attrs = true;
  }
  free(v);
  return ok;
}

/* ---- small helpers ------------------------------------------------------------ */

static hk_dot_dnums *dot_of(tx_parser *P, tx_pending *pi) {
  if (!pi->a.dot) pi->a.dot = hk_alloc(P->m, sizeof(hk_dot_dnums));
  pi->has_attrs = true;
  pi->seen_dnums_dot = true;
  return (hk_dot_dnums *)pi->a.dot;
}
static hk_gather_dnums *gather_of(tx_parser *P, tx_pending *pi) {
  if (!pi->a.gather) pi->a.gather = hk_alloc(P->m, sizeof(hk_gather_dnums));
  pi->has_attrs = true;
  return (hk_gather_dnums *)pi->a.gather;
}
static hk_scatter_dnums *scatter_of(tx_parser *P, tx_pending *pi) {
  if (!pi->a.scatter) pi->a.scatter = hk_alloc(P->m, sizeof(hk_scatter_dnums));
  pi->has_attrs = true;
  return (hk_scatter_dnums *)pi->a.scatter;
}

static bool parse_comp_list(tx_parser *P, tx_pending *pi, bool branches) {
  if (!tx_expect(P, '{', "at the start of a computation list")) return false;
  tx_vec v = {0};
  bool ok = true;
  if (!tx_accept(P, '}')) {
    do {
      hk_computation *c;
      if (!(ok = tx_computation_ref(P, &c))) break;
      tx_vec_push(&v, c);
    } while (tx_accept(P, ','));
    if (ok) ok = tx_expect(P, '}', "at the end of a computation list");
  }
  if (ok) {
    pi->n_list = (int)v.n;
    pi->list = hk_alloc(P->m, sizeof(hk_computation *) * (v.n ? v.n : 1));
    for (size_t i = 0; i < v.n; i++) pi->list[i] = v.v[i];
    pi->list_is_branches = branches;
  }
  free(v.v);
  return ok;
}

static bool parse_word_value(tx_parser *P, const char **s, size_t *len) {
  if (!tx_ident(P, s, len)) return tx_error_at(P, P->p, "expects a name");
  return true;
}

/* A word that must be one of the comma-separated `allowed` (any case when
 * fold, as XLA's StringTo* do); *out gets the allowed spelling (XLA prints
 * the canonical name). */
static bool parse_enum_word(tx_parser *P, tx_pending *pi, const char *allowed, bool fold,
                            const char *what, const char **out) {
  const char *s;
  size_t l;
  const char *at = (tx_skip(P), P->p);
  if (!tx_ident(P, &s, &l)) return tx_error_at(P, at, "expects %s", what);
  for (const char *a = allowed; *a;) {
    size_t n = strcspn(a, ",");
    if (n == l && (fold ? !strncasecmp(a, s, l) : !memcmp(a, s, l))) {
      *out = tx_intern(P, a, n);
      pi->has_attrs = true;
      return true;
    }
    a += n;
    if (*a) a++;
  }
  return tx_error_at(P, at, "expects %s but sees: %.*s", what, (int)l, s);
}

/* convolution_kind=fprop|dgrad|wgrad (unset, the default, prints nothing). */
static bool parse_conv_kind(tx_parser *P, tx_pending *pi) {
  const char *k;
  if (!parse_enum_word(P, pi, "fprop,wgrad,dgrad,unset", false, "convolution kind", &k))
    return false;
  if (strcmp(k, "unset")) add_raw(P, pi, "convolution_kind", 16, k, strlen(k));
  return true;
}

/* mode= of all-reduce, all-reduce-start and reduce-scatter: XLA reads it
 * and keeps nothing (a rolled back attribute), so nothing prints. */
static bool parse_group_mode(tx_parser *P, tx_pending *pi) {
  const char *m;
  return parse_enum_word(P, pi, "cross_replica,cross_partition,cross_replica_and_partition,flattened_id",
                         false, "collective op group mode", &m);
}

static bool parse_cmp_dir(tx_parser *P, tx_pending *pi) {
  const char *s;
  size_t l;
  const char *at = (tx_skip(P), P->p);
  if (!parse_word_value(P, &s, &l)) return false;
  static const char *names[] = {"", "EQ", "NE", "LT", "LE", "GT", "GE"};
  for (int i = 1; i < 7; i++)
    if (l == 2 && !memcmp(s, names[i], 2)) {
      pi->a.cmp_dir = (uint8_t)i;
      pi->has_attrs = pi->seen_direction = true;
      return true;
    }
  return tx_error_at(P, at, "expects comparison direction, but sees %.*s", (int)l, s);
}

static bool parse_cmp_type(tx_parser *P, tx_pending *pi) {
  const char *s;
  size_t l;
  const char *at = (tx_skip(P), P->p);
  if (!parse_word_value(P, &s, &l)) return false;
  static const char *names[] = {"", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
  for (int i = 1; i < 5; i++)
    if (l == strlen(names[i]) && !memcmp(s, names[i], l)) {
      pi->a.cmp_type = (uint8_t)i;
      pi->has_attrs = true;
      return true;
    }
  return tx_error_at(P, at, "expects comparison type, but sees %.*s", (int)l, s);
}

static bool parse_api_version(tx_parser *P, tx_pending *pi) {
  const char *s;
  size_t l;
  const char *at = (tx_skip(P), P->p);
  if (!parse_word_value(P, &s, &l)) return false;
  static const char *names[] = {"API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL",
                                "API_VERSION_STATUS_RETURNING",
                                "API_VERSION_STATUS_RETURNING_UNIFIED",
                                "API_VERSION_TYPED_FFI"};
  for (int i = 0; i < 5; i++)
    if (l == strlen(names[i]) && !memcmp(s, names[i], l)) {
      if (i == 0) return tx_error_at(P, at, "Invalid API version: %.*s", (int)l, s);
      pi->a.api_version = i;
      pi->has_attrs = true;
      return true;
    }
  return tx_error_at(P, at, "Unknown API version: %.*s", (int)l, s);
}

static bool parse_string_attr(tx_parser *P, tx_pending *pi, const char **dst) {
  const char *s;
  size_t l;
  if (!tx_string(P, &s, &l)) return false;
  *dst = s;
  pi->has_attrs = true;
  return true;
}

static bool parse_bool_attr(tx_parser *P, tx_pending *pi, bool *dst) {
  if (!tx_bool(P, dst)) return false;
  pi->has_attrs = true;
  return true;
}

/* collective-broadcast's has_dynamic_root (XLA since 2026, printed on every
 * one): false is the broadcast hlokit models; true (the root a run-time
 * operand) is refused, not read as something else. */
static bool parse_dynamic_root(tx_parser *P, tx_pending *pi) {
  tx_skip(P);
  const char *at = P->p;
  bool dynamic = false;
  if (!parse_bool_attr(P, pi, &dynamic)) return false;
  if (dynamic) return tx_error_at(P, at, "has_dynamic_root=true (a root chosen at run time) is not supported");
  return true;
}

static bool parse_int_attr(tx_parser *P, tx_pending *pi, int64_t *dst) {
  tx_skip(P);
  if (!tx_int(P, dst)) return false;
  pi->has_attrs = true;
  return true;
}

static bool parse_ctrl(tx_parser *P, tx_pending *pi) {
  if (!tx_expect(P, '{', "at the start of control-predecessors")) return false;
  if (tx_accept(P, '}')) return true;
  do {
    const char *s;
    size_t l;
    const char *at = (tx_skip(P), P->p);
    if (!tx_ident(P, &s, &l)) return tx_error_at(P, P->p, "expects an instruction name");
    hk_instr *i = tx_lookup(P, s, l);
    if (!i) return tx_error_at(P, at, "instruction '%.*s' is not defined", (int)l, s);
    if (pi->n_ctrl == pi->cap_ctrl) {
      pi->cap_ctrl = pi->cap_ctrl ? 2 * pi->cap_ctrl : 4;
      pi->ctrl = hk_check_alloc(realloc(pi->ctrl, (size_t)pi->cap_ctrl * sizeof *pi->ctrl));
    }
    pi->ctrl[pi->n_ctrl++] = i;
  } while (tx_accept(P, ','));
  return tx_expect(P, '}', "at the end of control-predecessors");
}

static bool parse_words_list(tx_parser *P, int32_t *n, const char *const **out) {
  if (!tx_expect(P, '{', "at the start of a list")) return false;
  tx_vec v = {0};
  bool ok = true;
  if (!tx_accept(P, '}')) {
    do {
      const char *s;
      size_t l;
      if (!(ok = parse_word_value(P, &s, &l))) break;
      tx_vec_push(&v, (void *)tx_intern(P, s, l));
    } while (tx_accept(P, ','));
    if (ok) ok = tx_expect(P, '}', "at the end of a list");
  }
  if (ok) {
    *n = (int32_t)v.n;
    const char **a = hk_alloc(P->m, sizeof(char *) * (v.n ? v.n : 1));
    for (size_t i = 0; i < v.n; i++) a[i] = v.v[i];
    *out = a;
  }
  free(v.v);
  return ok;
}

static bool parse_bool_list(tx_parser *P, int32_t *n, const bool **out) {
  if (!tx_expect(P, '{', "at the start of a list")) return false;
  bool tmp[1024];
  int k = 0;
  if (!tx_accept(P, '}')) {
    do {
      if (k >= 1024) return tx_error_at(P, P->p, "list is too long");
      if (!tx_bool(P, &tmp[k])) return false;
      k++;
    } while (tx_accept(P, ','));
    if (!tx_expect(P, '}', "at the end of a list")) return false;
  }
  *n = k;
  *out = hk_memdup(P->m, tmp, (size_t)(k ? k : 1) * sizeof(bool));
  return true;
}

bool tx_parse_bool_list(tx_parser *P, int32_t *n, const bool **out) {
  return parse_bool_list(P, n, out);
}

/* `name=` (XLA's attribute-name token) at the cursor: the name, cursor after '='. */
bool tx_attr_name(tx_parser *P, const char **s, size_t *l) {
  const char *save = P->p, *after;
  if (tx_peek_ident(P, s, l, &after) && *s == P->p) {
    const char *q = after;
    if (q < P->end && *q == '=') {
      P->p = q + 1;
      return true;
    }
  }
  P->p = save;
  return tx_error_at(P, (tx_skip(P), P->p), "expects attribute name");
}

/* A decimal or integer number, as XLA's ParseDouble reads one. */
static bool parse_double(tx_parser *P, double *out) {
  tx_skip(P);
  const char *q = P->p;
  char buf[64];
  size_t n = 0;
  while (q < P->end && n < sizeof buf - 1 &&
         (isdigit((unsigned char)*q) || strchr("+-.eE", *q)))
    buf[n++] = *q++;
  buf[n] = 0;
  char *ep;
  *out = n ? strtod(buf, &ep) : 0;
  if (!n || ep == buf) return tx_error_at(P, P->p, "expects decimal or integer");
  P->p += ep - buf;
  return true;
}

/* {atol=X, rtol=Y, ulps=Z} of result_accuracy's tolerance: each >= 0. */
static bool parse_tolerance(tx_parser *P) {
  if (!tx_expect(P, '{', "expected '{' to start result accuracy list")) return false;
  if (tx_accept(P, '}')) return true;
  do {
    const char *n;
    size_t nl;
    tx_skip(P);
    if (!tx_attr_name(P, &n, &nl)) return false;
    if (!((nl == 4 && (!memcmp(n, "ulps", 4) || !memcmp(n, "rtol", 4) || !memcmp(n, "atol", 4)))))
      return tx_error_at(P, (tx_skip(P), P->p), "invalid attribute name: %.*s", (int)nl, n);
    double v;
    const char *vat = (tx_skip(P), P->p);
    if (!parse_double(P, &v)) return false;
    if (v < 0) return tx_error_at(P, vat, "Invalid result accuracy: %.*s must not be negative", (int)nl, n);
  } while (tx_accept(P, ','));
  return tx_expect(P, '}', "expects '}' at the end of result precision");
}

/* result_accuracy={mode=default|highest} or {tolerance={...}} (XLA's
 * ParseResultAccuracy).  Kept raw as XLA prints it: nothing for the default
 * mode, the mode lower-cased. */
static bool parse_result_accuracy(tx_parser *P, tx_pending *pi) {
  tx_skip(P);
  const char *st = P->p;
  if (!tx_expect(P, '{', "expected '{' to start result precision list")) return false;
  const char *n;
  size_t nl;
  tx_skip(P);
  if (!tx_attr_name(P, &n, &nl)) return false;
  if (nl == 4 && !memcmp(n, "mode", 4)) {
    const char *m;
    size_t ml;
    const char *mat = (tx_skip(P), P->p);
    if (!tx_ident(P, &m, &ml)) return tx_error_at(P, mat, "expects ResultAccuracy type");
    bool highest = ml == 7 && !strncasecmp(m, "highest", 7);
    if (!highest && !(ml == 7 && !strncasecmp(m, "default", 7)))
      return tx_error_at(P, mat,
                         "expects ResultAccuracy type but sees: %.*s, error: Unknown accuracy mode",
                         (int)ml, m);
    if (!tx_expect(P, '}', "expected '}' to end result_accuracy")) return false;
    if (highest) add_raw(P, pi, "result_accuracy", 15, "{mode=highest}", 14);
    return true;
  }
  if (!(nl == 9 && !memcmp(n, "tolerance", 9)))
    return tx_error_at(P, (tx_skip(P), P->p), "invalid attribute name: %.*s", (int)nl, n);
  if (!parse_tolerance(P) || !tx_expect(P, '}', "expected '}' to end result_accuracy"))
    return false;
  add_raw(P, pi, "result_accuracy", 15, st, (size_t)(P->p - st));
  return true;
}

/* operand_layout_constraints={shape, ...}: one per operand, compatible with it. */
static bool check_operand_layouts(tx_parser *P, tx_pending *pi, const char *at) {
  tx_skip(P);
  const char *st = P->p;
  if (!tx_expect(P, '{', "at the start of operand_layout_constraints")) return false;
  int n = 0;
  if (!tx_accept(P, '}')) {
    do {
      const hk_shape *s;
      const char *sat = (tx_skip(P), P->p);
      if (!tx_parse_shape(P, &s)) return false;
      if (n < pi->n_operands) {
        hk_instr *op = P->opstack.v[pi->op_base + (size_t)n];
        if (!hk_shape_compatible(s, op->shape))
          return tx_error_at(P, sat, "custom call's operand %d is not compatible with operand shape", n);
      }
      n++;
    } while (tx_accept(P, ','));
    if (!tx_expect(P, '}', "at the end of operand_layout_constraints")) return false;
  }
  if (n != pi->n_operands)
    return tx_error_at(P, at, "Expected %d operand layout constraints, %d given",
                       pi->n_operands, n);
  add_raw(P, pi, "operand_layout_constraints", 26, st, (size_t)(P->p - st));
  return true;
}

bool tx_parse_attr(tx_parser *P, tx_pending *pi, const char *name, size_t len,
                   const char *at) {
  hk_attrs *a = &pi->a;
  hk_opcode op = pi->op;
  switch (name[0]) {
    case 'a':
      if (IS("api_version")) return parse_api_version(P, pi);
      if (IS("async_execution_thread")) return parse_string_attr(P, pi, &pi->async_thread);
      if (IS("algorithm") && op == HK_OP_RNG_BIT_GENERATOR)
        return parse_enum_word(P, pi, "rng_default,rng_three_fry,rng_philox", true,
                               "random algorithm", &a->rng_algorithm);
      break;
    case 'b':
      if (IS("backend_config")) {
        const char *v;
        size_t vl;
        tx_skip(P);
        if (tx_peek(P) == '"') {
          /* XLA keeps the string; it prints a braced one bare, others quoted and escaped */
          const char *u;
          size_t ul;
          if (!tx_string(P, &u, &ul)) return false;
          if (tx_lexes_as_dict(u)) {
            a->backend_config = u;
          } else {
            hk_buf q;
            hk_buf_init(&q);
            hk_buf_put(&q, "\"", 1);
            tx_print_escaped(&q, u);
            hk_buf_put(&q, "\"", 1);
            a->backend_config = tx_intern(P, q.data, q.len);
            hk_buf_free(&q);
          }
          pi->has_attrs = true;
          return true;
        } else if (!tx_raw_value(P, &v, &vl)) {
          return false;
        }
        a->backend_config = tx_intern(P, v, vl);
        pi->has_attrs = true;
        return true;
      }
      if (IS("body")) return tx_computation_ref(P, &pi->body);
      if (IS("block_scaling_config")) return parse_checked_raw(P, pi, name, len, check_block_scaling);
      if (IS("batch_group_count")) return parse_int_attr(P, pi, &a->batch_group_count);
      if (IS("branch_computations")) return parse_comp_list(P, pi, true);
      break;
    case 'c':
      if (IS("channel_id")) {
        if (!parse_int_attr(P, pi, &a->channel_id)) return false;
        /* present yet 0 (XLA's optional): see hk_instr_has_channel_id */
        if (!a->channel_id) add_raw(P, pi, name, len, "0", 1);
        return true;
      }
      if (IS("custom_call_target")) return parse_string_attr(P, pi, &a->custom_call_target);
      if (IS("custom_call_has_side_effect")) return parse_bool_attr(P, pi, &a->custom_call_has_side_effect);
      if (IS("calls")) {
        if (tx_peek(P) == '{' ) {
          /* calls={a, b} list, or an inline computation body */
          const char *q = P->p + 1;
          while (q < P->end && isspace((unsigned char)*q)) q++;
          const char *w = q;
          if (w < P->end && *w == '%') w++;
          while (w < P->end && (isalnum((unsigned char)*w) || *w == '_' || *w == '.' || *w == '-')) w++;
          const char *z = w;
          while (z < P->end && (*z == ' ' || *z == '\t')) z++;
          if (z < P->end && (*z == ',' || *z == '}')) return parse_comp_list(P, pi, false);
        }
        return tx_computation_ref(P, &pi->to_apply);
      }
      if (IS("condition")) return tx_computation_ref(P, &pi->condition);
      if (IS("called_computations")) return parse_comp_list(P, pi, false);
      if (IS("collapsed_slice_dims")) return tx_int_list(P, '{', '}', &gather_of(P, pi)->collapsed_slice_dims);
      if (IS("constrain_layout")) return parse_bool_attr(P, pi, &a->constrain_layout);
      if (IS("control-predecessors")) return parse_ctrl(P, pi);
      if (IS("convolution_kind")) return parse_conv_kind(P, pi);
      break;
    case 'd':
      if (IS("dimensions")) {
        pi->seen_dims = true;
        pi->has_dims = true;
        return tx_int_list(P, '{', '}', &pi->dims);
      }
      if (IS("direction")) return parse_cmp_dir(P, pi);
      if (IS("dim_labels")) return parse_dim_labels(P, pi);
      if (IS("dynamic_slice_sizes")) {
        pi->has_attrs = true;
        return tx_int_list(P, '{', '}', &a->dynamic_slice_sizes);
      }
      if (IS("distribution"))
        return parse_enum_word(P, pi, "rng_uniform,rng_normal", true, "random distribution",
                               &a->rng_distribution);
      if (IS("delta")) return parse_int_attr(P, pi, &a->rng_delta);
      break;
    case 'e':
      if (IS("exponent_bits")) return parse_int_attr(P, pi, &a->exponent_bits);
      break;
    case 'f':
      if (IS("frontend_attributes")) {
        pi->has_attrs = true;
        return tx_parse_kv_list(P, &a->n_frontend_attributes, &a->frontend_attributes);
      }
      if (IS("feature_group_count")) return parse_int_attr(P, pi, &a->feature_group_count);
      if (IS("false_computation")) return tx_computation_ref(P, &pi->false_c);
      if (IS("fft_type")) return parse_enum_word(P, pi, "FFT,IFFT,RFFT,IRFFT", false, "fft type", &a->fft_type);
      if (IS("fft_length")) {
        pi->has_attrs = true;
        return tx_int_list(P, '{', '}', &a->fft_length);
      }
      break;
    case 'h':
      if (IS("has_dynamic_root")) return parse_dynamic_root(P, pi);
      break;
    case 'i':
      if (IS("index")) {
        pi->seen_index = true;
        return parse_int_attr(P, pi, &a->tuple_index);
      }
      if (IS("iota_dimension")) {
        int64_t v;
        tx_skip(P);
        if (!tx_int(P, &v)) return false;
        pi->dims.n = 1;
        pi->dims.v = hk_memdup(P->m, &v, sizeof v);
        pi->has_dims = pi->seen_dims = true;
        return true;
      }
      if (IS("index_vector_dim")) {
        if (op == HK_OP_SCATTER) return parse_int_attr(P, pi, &scatter_of(P, pi)->index_vector_dim);
        return parse_int_attr(P, pi, &gather_of(P, pi)->index_vector_dim);
      }
      if (IS("indices_are_sorted")) return parse_bool_attr(P, pi, &a->indices_are_sorted);
      if (IS("inserted_window_dims")) return tx_int_list(P, '{', '}', &scatter_of(P, pi)->inserted_window_dims);
      if (IS("input_batching_dims")) return tx_int_list(P, '{', '}', &scatter_of(P, pi)->input_batching_dims);
      if (IS("is_stable")) return parse_bool_attr(P, pi, &a->is_stable);
      if (IS("is_host_transfer")) return parse_bool_attr(P, pi, &a->is_host_transfer);
      if (IS("is_composite")) return parse_bool_attr(P, pi, &a->is_composite);
      if (IS("infeed_config") || IS("outfeed_config")) return parse_string_attr(P, pi, &a->infeed_config);
      break;
    case 'k':
      if (IS("kind") && op == HK_OP_FUSION)
        return parse_enum_word(P, pi, "kLoop,kInput,kOutput,kCustom", false, "fusion kind",
                               &a->fusion_kind);
      if (IS("k") && op == HK_OP_TOPK) return parse_int_attr(P, pi, &a->k);
      break;
    case 'l':
      if (IS("lhs_batch_dims")) return tx_int_list(P, '{', '}', &dot_of(P, pi)->lhs_batch);
      if (IS("lhs_contracting_dims")) return tx_int_list(P, '{', '}', &dot_of(P, pi)->lhs_contracting);
      if (IS("largest") && op == HK_OP_TOPK) return parse_bool_attr(P, pi, &a->largest);
      break;
    case 'm':
      if (IS("metadata")) return parse_metadata(P, pi);
      if (IS("mantissa_bits")) return parse_int_attr(P, pi, &a->mantissa_bits);
      if (IS("mode")) return parse_group_mode(P, pi);
      break;
    case 'o':
      if (IS("offset_dims")) return tx_int_list(P, '{', '}', &gather_of(P, pi)->offset_dims);
      if (IS("operand_batching_dims")) return tx_int_list(P, '{', '}', &gather_of(P, pi)->operand_batching_dims);
      if (IS("operand_precision")) {
        pi->has_attrs = true;
        return parse_words_list(P, &a->n_operand_precision, &a->operand_precision);
      }
      if (IS("operand_layout_constraints")) return check_operand_layouts(P, pi, at);
      /* an original value names the instruction's leaves, so XLA reads it
       * against the shape written before the opcode (none is inferred yet) */
      if (IS("origin")) {
        if (!pi->shape) return tx_error_at(P, (tx_skip(P), P->p), "expects instruction shape");
        return parse_checked_raw(P, pi, name, len, tx_check_origin);
      }
      break;
    case 'p':
      if (IS("padding") && op == HK_OP_PAD) return parse_padding(P, pi);
      if (IS("parameter_replication")) {
        pi->has_attrs = true;
        return parse_bool_list(P, &a->n_parameter_replication, &a->parameter_replication);
      }
      break;
    case 'r':
      if (IS("replica_groups")) {
        pi->has_attrs = true;
        return parse_replica_groups(P, &a->replica_groups);
      }
      if (IS("rhs_batch_dims")) return tx_int_list(P, '{', '}', &dot_of(P, pi)->rhs_batch);
      if (IS("rhs_contracting_dims")) return tx_int_list(P, '{', '}', &dot_of(P, pi)->rhs_contracting);
      if (IS("result_accuracy")) return parse_result_accuracy(P, pi);
      break;
    case 's':
      if (IS("sharding")) return tx_parse_sharding_value(P, &pi->sharding);
      if (IS("slice")) return parse_slice(P, pi);
      if (IS("sparsity_config")) return parse_checked_raw(P, pi, name, len, check_sparsity);
      if (IS("slice_sizes") && op == HK_OP_GATHER) {
        pi->has_attrs = true;
        return tx_int_list(P, '{', '}', &a->gather_slice_sizes);
      }
      if (IS("start_index_map")) return tx_int_list(P, '{', '}', &gather_of(P, pi)->start_index_map);
      if (IS("start_indices_batching_dims")) return tx_int_list(P, '{', '}', &gather_of(P, pi)->start_indices_batching_dims);
      if (IS("scatter_dims_to_operand_dims")) return tx_int_list(P, '{', '}', &scatter_of(P, pi)->scatter_dims_to_operand_dims);
      if (IS("scatter_indices_batching_dims")) return tx_int_list(P, '{', '}', &scatter_of(P, pi)->scatter_indices_batching_dims);
      if (IS("source_target_pairs")) return parse_pairs(P, pi);
      if (IS("select")) return tx_computation_ref(P, &pi->select);
      if (IS("scatter")) return tx_computation_ref(P, &pi->scatter);
      break;
    case 't':
      if (IS("to_apply")) return tx_computation_ref(P, &pi->to_apply);
      if (IS("type") && op == HK_OP_COMPARE) return parse_cmp_type(P, pi);
      if (IS("true_computation")) return tx_computation_ref(P, &pi->true_c);
      break;
    case 'u':
      if (IS("use_global_device_ids")) return parse_bool_attr(P, pi, &a->use_global_device_ids);
      if (IS("unique_indices")) return parse_bool_attr(P, pi, &a->unique_indices);
      if (IS("update_window_dims")) return tx_int_list(P, '{', '}', &scatter_of(P, pi)->update_window_dims);
      break;
    case 'w':
      if (IS("window")) return parse_window(P, pi);
      break;
  }
  return parse_raw(P, pi, name, len);
}

/* ---- pieces parsed on their own -------------------------------------------------- */

typedef bool (*piece_fn)(tx_parser *P, tx_pending *pi);

static hk_status *parse_piece(hk_module *m, const char *text, size_t len, piece_fn fn,
                              tx_pending *pi) {
  tx_parser P;
  memset(&P, 0, sizeof P);
  P.src = P.p = text;
  P.end = text + len;
  P.m = m;
  memset(pi, 0, sizeof *pi);
  bool ok = fn(&P, pi);
  if (ok && tx_peek(&P) != 0) ok = tx_error_at(&P, P.p, "expects end of input");
  free(P.ints);
  free(pi->raw);
  free(pi->ctrl);
  if (ok && !P.err) return NULL;
  return P.err ? P.err : hk_error(HK_INVALID_ARGUMENT, "<input>:1:1: error: parse failed");
}

static bool window_piece(tx_parser *P, tx_pending *pi) {
  if (tx_peek(P) == '{') return parse_window(P, pi);
  /* without the braces: parse "{...}" over a copy */
  size_t n = (size_t)(P->end - P->p);
  char *tmp = hk_check_alloc(malloc(n + 2));
  tmp[0] = '{';
  memcpy(tmp + 1, P->p, n);
  tmp[n + 1] = '}';
  tx_parser Q = *P;
  Q.src = Q.p = tmp;
  Q.end = tmp + n + 2;
  bool ok = parse_window(&Q, pi);
  if (!ok) {
    P->err = Q.err;
    /* positions refer to the braced copy: shift by one */
  }
  P->ints = Q.ints, P->cap_ints = Q.cap_ints;
  P->p = ok ? P->end : P->p;
  free(tmp);
  return ok;
}

hk_status *hk_parse_window(hk_module *m, const char *text, size_t len, const hk_window **out) {
  tx_pending pi;
  hk_status *st = parse_piece(m, text, len, window_piece, &pi);
  if (!st) *out = pi.a.window;
  return st;
}

hk_status *hk_parse_conv_dnums(hk_module *m, const char *text, size_t len,
                               const hk_conv_dnums **out) {
  tx_pending pi;
  hk_status *st = parse_piece(m, text, len, parse_dim_labels, &pi);
  if (!st) *out = pi.a.conv;
  return st;
}

hk_status *hk_parse_padding_config(hk_module *m, const char *text, size_t len, int32_t *n,
                                   const hk_pad_dim **out) {
  tx_pending pi;
  hk_status *st = parse_piece(m, text, len, parse_padding, &pi);
  if (!st) {
    *n = pi.a.n_pad;
    *out = pi.a.pad;
  }
  return st;
}

static bool frontend_attributes_piece(tx_parser *P, tx_pending *pi) {
  return tx_parse_kv_list(P, &pi->a.n_frontend_attributes, &pi->a.frontend_attributes);
}

hk_status *hk_parse_frontend_attributes(hk_module *m, const char *text, size_t len, int32_t *n,
                                        const hk_kv **out) {
  tx_pending pi;
  hk_status *st = parse_piece(m, text, len, frontend_attributes_piece, &pi);
  *n = st ? 0 : pi.a.n_frontend_attributes; /* none on failure */
  *out = st ? NULL : pi.a.frontend_attributes;
  return st;
}

static bool replica_groups_piece(tx_parser *P, tx_pending *pi) {
  return parse_replica_groups(P, &pi->a.replica_groups);
}

hk_status *hk_parse_replica_groups(hk_module *m, const char *text, size_t len,
                                   const hk_replica_groups **out) {
  tx_pending pi;
  hk_status *st = parse_piece(m, text, len, replica_groups_piece, &pi);
  if (!st) *out = pi.a.replica_groups;
  return st;
}
