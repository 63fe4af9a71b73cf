/* print.c - the HLO text printer: modules, computations and instructions exactly as XLA's ToString prints them (long and short forms).
 *
 * A computation's lines print through print_lines.c; with a sink
 * (hk_print_module_stream) the text is handed on a megabyte at a time as
 * it is printed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/arena.h"
#include "ir/irpriv.h"
#include "sharding/metadata.h"
#include "text/print_internal.h"

void tx_printer_init(printer *pr, hk_print_form form) {
  memset(pr, 0, sizeof *pr);
  pr->lng = form == HK_PRINT_LONG;
  hk_buf_init(&pr->text);
  hk_buf_init(&pr->scratch);
}

void tx_printer_free(printer *pr) {
  free(pr->slots);
  hk_buf_free(&pr->text);
  hk_buf_free(&pr->scratch);
  free(pr->pieces);
}

static size_t hash_ptr(uintptr_t k) {
  uint64_t x = (uint64_t)k;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x;
}

static cache_slot *cache_find(printer *pr, uintptr_t key, bool *found) {
  if ((pr->n + 1) * 2 > pr->cap) {
    size_t ncap = pr->cap ? pr->cap * 2 : 256;
    cache_slot *ns = hk_check_alloc(calloc(ncap, sizeof *ns));
    for (size_t i = 0; i < pr->cap; i++) {
      if (!pr->slots[i].key) continue;
      size_t j = hash_ptr(pr->slots[i].key) & (ncap - 1);
      while (ns[j].key) j = (j + 1) & (ncap - 1);
      ns[j] = pr->slots[i];
    }
    free(pr->slots);
    pr->slots = ns;
    pr->cap = ncap;
  }
  size_t j = hash_ptr(key) & (pr->cap - 1);
  while (pr->slots[j].key && pr->slots[j].key != key) j = (j + 1) & (pr->cap - 1);
  *found = pr->slots[j].key == key;
  return &pr->slots[j];
}

/* Appends the text for a cached object (shape with/without layout, sharding). */
static void put_cached(printer *pr, hk_buf *dst, const void *obj, int kind) {
  uintptr_t key = (uintptr_t)obj + (uintptr_t)kind;
  cache_slot *last = &pr->last[kind];
  if (last->key == key && key) {
    tx_put(dst, pr->text.data + last->off, last->len);
    return;
  }
  bool found;
  cache_slot *s = cache_find(pr, key, &found);
  if (!found) {
    size_t off = pr->text.len;
    if (kind == 2) hk_sharding_print_buf((const hk_sharding *)obj, &pr->text);
    else tx_print_shape((const hk_shape *)obj, kind == 0, &pr->text);
    s->key = key;
    s->off = (uint32_t)off;
    s->len = (uint32_t)(pr->text.len - off);
    pr->n++;
  }
  *last = *s;
  tx_put(dst, pr->text.data + s->off, s->len);
}

static void put_shape(printer *pr, hk_buf *dst, const hk_shape *s) { put_cached(pr, dst, s, 0); }
static void put_shape_nolayout(printer *pr, hk_buf *dst, const hk_shape *s) {
  put_cached(pr, dst, s, 1);
}

/* ---- small helpers ------------------------------------------------------------ */

void tx_print_escaped(hk_buf *b, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '\n': tx_put(b, "\\n", 2); break;
      case '\r': tx_put(b, "\\r", 2); break;
      case '\t': tx_put(b, "\\t", 2); break;
      case '\\': tx_put(b, "\\\\", 2); break;
      case '"': tx_put(b, "\\\"", 2); break;
      case '\'': tx_put(b, "\\'", 2); break;
      default:
        if (*p < 0x20 || *p >= 0x7f) hk_buf_printf(b, "\\%03o", *p);
        else tx_put(b, (const char *)p, 1);
    }
  }
}

static void put_quoted(hk_buf *b, const char *s) {
  tx_put(b, "\"", 1);
  tx_print_escaped(b, s);
  tx_put(b, "\"", 1);
}

static void put_name(printer *pr, hk_buf *b, const char *name) {
  if (pr->lng) tx_put(b, "%", 1);
  tx_puts(b, name);
}

/* An instruction's name: a header string (ir/irpriv.h) whose length is
 * stored, so it is not counted again for every line and operand. */
static void put_instr_name(printer *pr, hk_buf *b, const hk_instr *i) {
  if (pr->lng) tx_put(b, "%", 1);
  tx_put(b, i->name, hk_str_hdr(i->name)->len);
}

static void put_list(hk_buf *b, hk_i64s l) {
  tx_put(b, "{", 1);
  tx_print_i64s(b, l.v, l.n);
  tx_put(b, "}", 1);
}

/* A value that lexes as a braced dict prints raw, anything else quoted. */
bool tx_lexes_as_dict(const char *v) {
  size_t n = strlen(v);
  if (n < 2 || v[0] != '{' || v[n - 1] != '}') return false;
  int d = 0;
  bool in_str = false;
  for (size_t i = 0; i < n; i++) {
    char c = v[i];
    if (in_str) {
      if (c == '\\') i++;
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    else if (c == '{') d++;
    else if (c == '}' && --d == 0 && i != n - 1) return false;
  }
  return d == 0 && !in_str;
}

static int kv_cmp(const void *a, const void *b) {
  return strcmp(((const hk_kv *)a)->key, ((const hk_kv *)b)->key);
}

static void put_kv_list(hk_buf *b, int n, const hk_kv *kv) {
  hk_kv stack[16];
  hk_kv *s = n <= 16 ? stack : hk_check_alloc(malloc(sizeof *s * (size_t)n));
  memcpy(s, kv, sizeof *s * (size_t)n);
  qsort(s, (size_t)n, sizeof *s, kv_cmp);
  tx_put(b, "{", 1);
  for (int i = 0; i < n; i++) {
    if (i) tx_put(b, ",", 1);
    tx_puts(b, s[i].key);
    tx_put(b, "=", 1);
    if (tx_lexes_as_dict(s[i].value)) tx_puts(b, s[i].value);
    else put_quoted(b, s[i].value);
  }
  tx_put(b, "}", 1);
  if (s != stack) free(s);
}

/* ---- attribute pieces ---------------------------------------------------------------- */

/* A piece is written with the ", " before it, so pieces already in print
 * order go out as the one run of scratch they fill. */
static hk_buf *piece_begin(printer *pr) {
  tx_put(&pr->scratch, ", ", 2);
  return &pr->scratch;
}

static void piece_end(printer *pr, int rank, size_t start) {
  if (pr->n_pieces == pr->cap_pieces) {
    pr->cap_pieces = pr->cap_pieces ? 2 * pr->cap_pieces : 32;
    pr->pieces = hk_check_alloc(realloc(pr->pieces, sizeof *pr->pieces * (size_t)pr->cap_pieces));
  }
  pr->pieces[pr->n_pieces++] = (piece){rank, (uint32_t)start, (uint32_t)(pr->scratch.len - start)};
}

#define PIECE(rank, ...)                  \
  do {                                    \
    size_t st_ = pr->scratch.len;         \
    hk_buf *b = piece_begin(pr);          \
    __VA_ARGS__;                          \
    piece_end(pr, (rank), st_);           \
  } while (0)

static int raw_rank(const char *name, hk_opcode op) {
  static const struct { const char *n; int r; } t[] = {
      {"slice_sizes", 9},      {"epsilon", 46},          {"feature_index", 47},
      {"algorithm", 30},       {"padding_type", 31},     {"sparsity", 32},
      {"outfeed_shape", 61},   {"left_side", 64},        {"lower", 64},
      {"unit_diagonal", 64},   {"transpose_a", 64},      {"literal", 72},
      {"operand_layout_constraints", 73},                {"output_to_operand_aliasing", 74},
      {"schedule", 75},        {"statistics", 730},      {"origin", 735},
      {"channel_id", 5},       {"convolution_kind", 25}, {"sparsity_config", 32},
      {"block_scaling_config", 33},
  };
  (void)op;
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (!strcmp(t[i].n, name)) return t[i].r;
  return 500;
}

static const char *cmp_dir_name(int d) {
  static const char *n[] = {"", "EQ", "NE", "LT", "LE", "GT", "GE"};
  return d >= 1 && d <= 6 ? n[d] : "EQ";
}
static const char *cmp_type_name(int t) {
  static const char *n[] = {"", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
  return t >= 1 && t <= 4 ? n[t] : "";
}
static int default_cmp_type(hk_prim p) {
  if (hk_prim_is_float(p) || hk_prim_is_complex(p)) return 1;
  if (hk_prim_is_signed_int(p)) return 3;
  return 4;
}

static void put_window(hk_buf *b, const hk_window *w) {
  bool stride = false, pad = false, lhs = false, rhs = false, rev = false;
  for (int i = 0; i < w->n_dims; i++) {
    const hk_window_dim *d = &w->dims[i];
    stride |= d->stride != 1;
    pad |= d->pad_lo != 0 || d->pad_hi != 0;
    lhs |= d->base_dilation != 1;
    rhs |= d->window_dilation != 1;
    rev |= d->reversal;
  }
  tx_puts(b, "window={");
  bool first = true;
#define FIELD(cond, name, fmtexpr)                                   \
  if (cond) {                                                        \
    if (!first) tx_put(b, " ", 1);                               \
    first = false;                                                   \
    tx_puts(b, name "=");                                        \
    for (int i = 0; i < w->n_dims; i++) {                            \
      const hk_window_dim *d = &w->dims[i];                          \
      if (i) tx_put(b, "x", 1);                                  \
      fmtexpr;                                                       \
    }                                                                \
  }
  FIELD(w->n_dims > 0, "size", hk_buf_printf(b, "%lld", (long long)d->size))
  FIELD(stride, "stride", hk_buf_printf(b, "%lld", (long long)d->stride))
  FIELD(pad, "pad", hk_buf_printf(b, "%lld_%lld", (long long)d->pad_lo, (long long)d->pad_hi))
  FIELD(lhs, "lhs_dilate", hk_buf_printf(b, "%lld", (long long)d->base_dilation))
  FIELD(rhs, "rhs_dilate", hk_buf_printf(b, "%lld", (long long)d->window_dilation))
  FIELD(rev, "rhs_reversal", tx_puts(b, d->reversal ? "1" : "0"))
#undef FIELD
  tx_put(b, "}", 1);
}

/* One part of dim_labels as XLA prints it: as long as its largest
 * position + 1, '?' where nothing is, then the two letters, then the
 * spatial digits (a later one overwrites an earlier at the same place). */
static void put_dim_labels_part(hk_buf *b, int64_t first, int64_t second, const char *letters,
                                const int64_t *spatial, int n) {
  int64_t len = (first > second ? first : second) + 1;
  for (int i = 0; i < n; i++)
    if (spatial[i] + 1 > len) len = spatial[i] + 1;
  char s[HK_MAX_RANK + 8];
  if (len > (int64_t)sizeof s - 1) len = (int64_t)sizeof s - 1;
  memset(s, '?', (size_t)len);
  s[len] = 0;
  if (first >= 0 && first < len) s[first] = letters[0];
  if (second >= 0 && second < len) s[second] = letters[1];
  for (int i = 0; i < n && i < 10; i++)
    if (spatial[i] >= 0 && spatial[i] < len) s[spatial[i]] = (char)('0' + i);
  tx_puts(b, s);
}

static void put_dim_labels(hk_buf *b, const hk_conv_dnums *d) {
  tx_puts(b, "dim_labels=");
  put_dim_labels_part(b, d->input_batch, d->input_feature, "bf", d->input_spatial, d->n_spatial);
  tx_put(b, "_", 1);
  put_dim_labels_part(b, d->kernel_input_feature, d->kernel_output_feature, "io", d->kernel_spatial,
                      d->n_spatial);
  tx_put(b, "->", 2);
  put_dim_labels_part(b, d->output_batch, d->output_feature, "bf", d->output_spatial, d->n_spatial);
}

static void put_replica_groups(hk_buf *b, const hk_replica_groups *g) {
  tx_puts(b, "replica_groups=");
  if (g->iota) {
    const hk_iota *io = g->iota;
    tx_put(b, "[", 1);
    tx_print_i64s(b, io->dims, io->n_dims);
    tx_puts(b, "]<=[");
    tx_print_i64s(b, io->reshape_dims, io->n_reshape_dims);
    tx_put(b, "]", 1);
    bool ident = true;
    for (int i = 0; i < io->n_reshape_dims; i++) ident &= io->perm[i] == i;
    if (!ident) {
      tx_puts(b, "T(");
      for (int i = 0; i < io->n_reshape_dims; i++) hk_buf_printf(b, "%s%d", i ? "," : "", io->perm[i]);
      tx_put(b, ")", 1);
    }
    return;
  }
  tx_put(b, "{", 1);
  for (int i = 0; i < g->n_groups; i++) {
    if (i) tx_put(b, ",", 1);
    tx_put(b, "{", 1);
    tx_print_i64s(b, g->ids + g->group_start[i], g->group_start[i + 1] - g->group_start[i]);
    tx_put(b, "}", 1);
  }
  tx_put(b, "}", 1);
}

static bool is_collective_with_groups(hk_opcode op) {
  switch (op) {
    case HK_OP_ALL_REDUCE: case HK_OP_ALL_REDUCE_START: case HK_OP_ALL_GATHER:
    case HK_OP_ALL_GATHER_START: case HK_OP_ALL_TO_ALL: case HK_OP_REDUCE_SCATTER:
    case HK_OP_COLLECTIVE_BROADCAST: case HK_OP_RAGGED_ALL_TO_ALL:
      return true;
    default:
      return false;
  }
}

static bool is_to_apply_op(hk_opcode op) {
  switch (op) {
    case HK_OP_CALL: case HK_OP_MAP: case HK_OP_REDUCE_WINDOW: case HK_OP_REDUCE:
    case HK_OP_ALL_REDUCE: case HK_OP_REDUCE_SCATTER: case HK_OP_ALL_REDUCE_START:
    case HK_OP_SCATTER: case HK_OP_TOPK: case HK_OP_SORT:
      return true;
    default:
      return false;
  }
}

static void put_comp_ref(printer *pr, hk_buf *b, const hk_computation *c) {
  put_name(pr, b, c->name);
}

/* Extra attributes of the opcode (everything before the called computations). */
static void extra_pieces(printer *pr, const hk_instr *i) {
  hk_opcode op = (hk_opcode)i->opcode;
  const hk_attrs *a = i->attrs;
  if (a && a->channel_id) PIECE(5, hk_buf_printf(b, "channel_id=%lld", (long long)a->channel_id));
  if (op == HK_OP_COLLECTIVE_PERMUTE || op == HK_OP_COLLECTIVE_PERMUTE_START) {
    if (a && (a->n_source_target_pairs || a->source_target_pairs))
      PIECE(8, {
        tx_puts(b, "source_target_pairs={");
        for (int k = 0; k < a->n_source_target_pairs; k++)
          hk_buf_printf(b, "%s{%lld,%lld}", k ? "," : "", (long long)a->source_target_pairs[k].a,
                        (long long)a->source_target_pairs[k].b);
        tx_put(b, "}", 1);
      });
  } else if (a && a->n_source_target_pairs) {
    PIECE(8, {
      tx_puts(b, "source_target_pairs={");
      for (int k = 0; k < a->n_source_target_pairs; k++)
        hk_buf_printf(b, "%s{%lld,%lld}", k ? "," : "", (long long)a->source_target_pairs[k].a,
                      (long long)a->source_target_pairs[k].b);
      tx_put(b, "}", 1);
    });
  }
  if (is_collective_with_groups(op)) {
    if (a && a->replica_groups) PIECE(10, put_replica_groups(b, a->replica_groups));
    else PIECE(10, tx_puts(b, "replica_groups={}"));
  } else if (a && a->replica_groups) {
    PIECE(10, put_replica_groups(b, a->replica_groups));
  }
  if (a && a->constrain_layout) PIECE(11, tx_puts(b, "constrain_layout=true"));
  if (a && a->use_global_device_ids) PIECE(13, tx_puts(b, "use_global_device_ids=true"));
  if (op == HK_OP_IOTA) {
    if (i->n_dims) PIECE(12, hk_buf_printf(b, "iota_dimension=%lld", (long long)i->dims[0]));
  } else if (i->n_dims || op == HK_OP_BROADCAST || op == HK_OP_REDUCE || op == HK_OP_TRANSPOSE ||
             op == HK_OP_REVERSE || op == HK_OP_CONCATENATE || op == HK_OP_MAP ||
             op == HK_OP_SORT || op == HK_OP_ALL_GATHER || op == HK_OP_ALL_GATHER_START ||
             op == HK_OP_REDUCE_SCATTER) {
    PIECE(op == HK_OP_REDUCE_SCATTER ? 14 : 12, {
      tx_puts(b, "dimensions={");
      tx_print_i64s(b, i->dims, i->n_dims);
      tx_put(b, "}", 1);
    });
  }
  if (op == HK_OP_GET_TUPLE_ELEMENT)
    PIECE(15, tx_puts(b, "index="); tx_put_i64(b, a ? a->tuple_index : 0));
  if (!a) return;
  if (op == HK_OP_PARAMETER && a->n_parameter_replication)
    PIECE(15, {
      tx_puts(b, "parameter_replication={");
      for (int k = 0; k < a->n_parameter_replication; k++)
        hk_buf_printf(b, "%s%s", k ? "," : "", a->parameter_replication[k] ? "true" : "false");
      tx_put(b, "}", 1);
    });
  if (op == HK_OP_COMPARE) {
    PIECE(16, hk_buf_printf(b, "direction=%s", cmp_dir_name(a->cmp_dir)));
    hk_prim p = i->n_operands ? (hk_prim)i->operands[0]->shape->elem : HK_F32;
    if (a->cmp_type && a->cmp_type != default_cmp_type(p))
      PIECE(17, hk_buf_printf(b, "type=%s", cmp_type_name(a->cmp_type)));
  }
  if (a->slice || a->n_slice) {
    bool unit = true;
    for (int k = 0; k < a->n_slice; k++) unit &= a->slice[k].stride == 1;
    PIECE(18, {
      tx_puts(b, "slice={");
      for (int k = 0; k < a->n_slice; k++) {
        const hk_slice_dim *d = &a->slice[k];
        hk_buf_printf(b, "%s[%lld:%lld", k ? ", " : "", (long long)d->start, (long long)d->limit);
        if (!unit) hk_buf_printf(b, ":%lld", (long long)d->stride);
        tx_put(b, "]", 1);
      }
      tx_put(b, "}", 1);
    });
  }
  if (a->dynamic_slice_sizes.n || op == HK_OP_DYNAMIC_SLICE)
    PIECE(19, {
      tx_puts(b, "dynamic_slice_sizes=");
      put_list(b, a->dynamic_slice_sizes);
    });
  if (a->pad) {
    bool interior = false;
    for (int k = 0; k < a->n_pad; k++) interior |= a->pad[k].interior != 0;
    PIECE(20, {
      tx_puts(b, "padding=");
      for (int k = 0; k < a->n_pad; k++) {
        if (k) tx_put(b, "x", 1);
        hk_buf_printf(b, "%lld_%lld", (long long)a->pad[k].lo, (long long)a->pad[k].hi);
        if (interior) hk_buf_printf(b, "_%lld", (long long)a->pad[k].interior);
      }
    });
  }
  if (a->window && (a->window->n_dims > 0 || op == HK_OP_CUSTOM_CALL)) PIECE(21, put_window(b, a->window));
  if (a->conv) PIECE(22, put_dim_labels(b, a->conv));
  if (a->feature_group_count > 1)
    PIECE(23, hk_buf_printf(b, "feature_group_count=%lld", (long long)a->feature_group_count));
  if (a->batch_group_count > 1)
    PIECE(24, hk_buf_printf(b, "batch_group_count=%lld", (long long)a->batch_group_count));
  if (a->dot) {
    const hk_dot_dnums *d = a->dot;
    if (d->lhs_batch.n) PIECE(25, tx_puts(b, "lhs_batch_dims="); put_list(b, d->lhs_batch));
    PIECE(26, tx_puts(b, "lhs_contracting_dims="); put_list(b, d->lhs_contracting));
    if (d->rhs_batch.n) PIECE(27, tx_puts(b, "rhs_batch_dims="); put_list(b, d->rhs_batch));
    PIECE(28, tx_puts(b, "rhs_contracting_dims="); put_list(b, d->rhs_contracting));
  }
  if (a->n_operand_precision) {
    bool any = false;
    for (int k = 0; k < a->n_operand_precision; k++)
      any |= strcmp(a->operand_precision[k], "default") != 0;
    if (any)
      PIECE(29, {
        tx_puts(b, "operand_precision={");
        for (int k = 0; k < a->n_operand_precision; k++)
          hk_buf_printf(b, "%s%s", k ? "," : "", a->operand_precision[k]);
        tx_put(b, "}", 1);
      });
  }
  if (a->gather) {
    const hk_gather_dnums *g = a->gather;
    PIECE(33, tx_puts(b, "offset_dims="); put_list(b, g->offset_dims));
    PIECE(34, tx_puts(b, "collapsed_slice_dims="); put_list(b, g->collapsed_slice_dims));
    PIECE(35, tx_puts(b, "start_index_map="); put_list(b, g->start_index_map));
    if (g->operand_batching_dims.n)
      PIECE(36, tx_puts(b, "operand_batching_dims="); put_list(b, g->operand_batching_dims));
    if (g->start_indices_batching_dims.n)
      PIECE(37, tx_puts(b, "start_indices_batching_dims="); put_list(b, g->start_indices_batching_dims));
    PIECE(38, hk_buf_printf(b, "index_vector_dim=%lld", (long long)g->index_vector_dim));
  }
  if (op == HK_OP_GATHER)
    PIECE(39, tx_puts(b, "slice_sizes="); put_list(b, a->gather_slice_sizes));
  if (a->scatter) {
    const hk_scatter_dnums *s = a->scatter;
    PIECE(33, tx_puts(b, "update_window_dims="); put_list(b, s->update_window_dims));
    PIECE(34, tx_puts(b, "inserted_window_dims="); put_list(b, s->inserted_window_dims));
    PIECE(35, tx_puts(b, "scatter_dims_to_operand_dims="); put_list(b, s->scatter_dims_to_operand_dims));
    if (s->input_batching_dims.n)
      PIECE(36, tx_puts(b, "input_batching_dims="); put_list(b, s->input_batching_dims));
    if (s->scatter_indices_batching_dims.n)
      PIECE(37, tx_puts(b, "scatter_indices_batching_dims="); put_list(b, s->scatter_indices_batching_dims));
    PIECE(38, hk_buf_printf(b, "index_vector_dim=%lld", (long long)s->index_vector_dim));
  }
  if (a->indices_are_sorted) PIECE(40, tx_puts(b, "indices_are_sorted=true"));
  if (a->unique_indices) PIECE(41, tx_puts(b, "unique_indices=true"));
  if (a->fft_type) PIECE(48, hk_buf_printf(b, "fft_type=%s", a->fft_type));
  if (a->fft_length.n || a->fft_type) PIECE(49, tx_puts(b, "fft_length="); put_list(b, a->fft_length));
  if (op == HK_OP_REDUCE_PRECISION) {
    PIECE(50, hk_buf_printf(b, "exponent_bits=%lld", (long long)a->exponent_bits));
    PIECE(51, hk_buf_printf(b, "mantissa_bits=%lld", (long long)a->mantissa_bits));
  }
  if (a->rng_distribution) PIECE(52, hk_buf_printf(b, "distribution=%s", a->rng_distribution));
  if (a->rng_algorithm) PIECE(53, hk_buf_printf(b, "algorithm=%s", a->rng_algorithm));
  if (op == HK_OP_RNG_GET_AND_UPDATE_STATE) PIECE(54, hk_buf_printf(b, "delta=%lld", (long long)a->rng_delta));
  if (a->is_stable && op != HK_OP_TOPK) PIECE(55, tx_puts(b, "is_stable=true"));
  if (op == HK_OP_TOPK) {
    PIECE(56, hk_buf_printf(b, "k=%lld", (long long)a->k));
    PIECE(57, hk_buf_printf(b, "largest=%s", a->largest ? "true" : "false"));
    /* XLA's HloTopKInstruction prints it after largest */
    if (a->is_stable) PIECE(57, tx_puts(b, "is_stable=true"));
  }
  if (a->fusion_kind) PIECE(58, hk_buf_printf(b, "kind=%s", a->fusion_kind));
  if (a->infeed_config && a->infeed_config[0])
    PIECE(op == HK_OP_OUTFEED ? 62 : 60, {
      tx_puts(b, op == HK_OP_OUTFEED ? "outfeed_config=" : "infeed_config=");
      put_quoted(b, a->infeed_config);
    });
  if (a->is_host_transfer) PIECE(63, tx_puts(b, "is_host_transfer=true"));
  if (op == HK_OP_CUSTOM_CALL) {
    PIECE(70, tx_puts(b, "custom_call_target="); put_quoted(b, a->custom_call_target ? a->custom_call_target : ""));
    if (a->custom_call_has_side_effect) PIECE(71, tx_puts(b, "custom_call_has_side_effect=true"));
  }
  if (a->api_version > 1) {
    static const char *names[] = {"API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL",
                                  "API_VERSION_STATUS_RETURNING",
                                  "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI"};
    PIECE(76, hk_buf_printf(b, "api_version=%s", a->api_version < 5 ? names[a->api_version] : "API_VERSION_ORIGINAL"));
  }
  for (int k = 0; k < a->n_raw; k++) {
    int r = raw_rank(a->raw[k].name, op);
    if (r >= 700) continue;
    if (r == 5 && a->channel_id) continue; /* a 0 since replaced by a real id */
    PIECE(r, hk_buf_printf(b, "%s=%s", a->raw[k].name, a->raw[k].value));
  }
}

/* Can the async computation print as `<op>-start` sugar? */
static bool can_expand(const hk_computation *c) {
  if (!c || !c->root || c->root->opcode == HK_OP_PARAMETER) return false;
  for (const hk_instr *i = c->first; i; i = i->next)
    if (i != c->root && i->opcode != HK_OP_PARAMETER) return false;
  return true;
}

static bool is_async_op(hk_opcode op) {
  return op == HK_OP_ASYNC_START || op == HK_OP_ASYNC_UPDATE || op == HK_OP_ASYNC_DONE;
}

static void called_pieces(printer *pr, const hk_instr *i) {
  hk_opcode op = (hk_opcode)i->opcode;
  if (!i->n_called) {
    if (op == HK_OP_CALL && i->attrs && i->attrs->is_composite)
      PIECE(601, tx_puts(b, "is_composite=true"));
    return;
  }
  if (op == HK_OP_WHILE && i->n_called >= 2) {
    PIECE(600, tx_puts(b, "condition="); put_comp_ref(pr, b, i->called[0]));
    PIECE(600, tx_puts(b, "body="); put_comp_ref(pr, b, i->called[1]));
  } else if (op == HK_OP_SELECT_AND_SCATTER && i->n_called >= 2) {
    PIECE(600, tx_puts(b, "select="); put_comp_ref(pr, b, i->called[0]));
    PIECE(600, tx_puts(b, "scatter="); put_comp_ref(pr, b, i->called[1]));
  } else if (op == HK_OP_CONDITIONAL) {
    const hk_shape *s0 = i->n_operands ? i->operands[0]->shape : NULL;
    if (s0 && s0->elem == HK_PRED && i->n_called == 2) {
      PIECE(600, tx_puts(b, "true_computation="); put_comp_ref(pr, b, i->called[0]));
      PIECE(600, tx_puts(b, "false_computation="); put_comp_ref(pr, b, i->called[1]));
    } else {
      PIECE(600, {
        tx_puts(b, "branch_computations={");
        for (int k = 0; k < i->n_called; k++) {
          if (k) tx_put(b, ", ", 2);
          put_comp_ref(pr, b, i->called[k]);
        }
        tx_put(b, "}", 1);
      });
    }
  } else if (is_to_apply_op(op)) {
    PIECE(600, tx_puts(b, "to_apply="); put_comp_ref(pr, b, i->called[0]));
    if (op == HK_OP_CALL && i->attrs && i->attrs->is_composite)
      PIECE(601, tx_puts(b, "is_composite=true"));
  } else if (op == HK_OP_CUSTOM_CALL) {
    PIECE(600, {
      tx_puts(b, "called_computations={");
      for (int k = 0; k < i->n_called; k++) {
        if (k) tx_put(b, ", ", 2);
        put_comp_ref(pr, b, i->called[k]);
      }
      tx_put(b, "}", 1);
    });
  } else if (is_async_op(op)) {
    if (op == HK_OP_ASYNC_START && !can_expand(i->called[0]))
      PIECE(600, tx_puts(b, "calls="); put_comp_ref(pr, b, i->called[0]));
  } else {
    PIECE(600, {
      tx_puts(b, "calls=");
      for (int k = 0; k < i->n_called; k++) {
        if (k) tx_put(b, ", ", 2);
        put_comp_ref(pr, b, i->called[k]);
      }
    });
  }
}

static void generic_pieces(printer *pr, const hk_instr *i) {
  const hk_attrs *a = i->attrs;
  if (i->sharding) PIECE(700, tx_puts(b, "sharding="); put_cached(pr, b, i->sharding, 2));
  if (!a) return;
  if (a->n_frontend_attributes)
    PIECE(710, tx_puts(b, "frontend_attributes="); put_kv_list(b, a->n_frontend_attributes, a->frontend_attributes));
  if (a->n_control_preds)
    PIECE(720, {
      tx_puts(b, "control-predecessors={");
      for (int k = 0; k < a->n_control_preds; k++) {
        if (k) tx_put(b, ", ", 2);
        put_name(pr, b, a->control_preds[k]->name);
      }
      tx_put(b, "}", 1);
    });
  for (int k = 0; k < a->n_raw; k++) {
    int r = raw_rank(a->raw[k].name, (hk_opcode)i->opcode);
    if (r < 700) continue;
    PIECE(r, hk_buf_printf(b, "%s=%s", a->raw[k].name, a->raw[k].value));
  }
  if (a->metadata && !hk_metadata_is_empty(a->metadata))
    PIECE(740, tx_puts(b, "metadata="); hk_metadata_print(a->metadata, b));
  if (a->backend_config && a->backend_config[0])
    PIECE(750, tx_puts(b, "backend_config="); tx_puts(b, a->backend_config));
}

static int piece_cmp(const void *x, const void *y) {
  const piece *a = x, *b = y;
  if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
  return a->off < b->off ? -1 : a->off > b->off;
}

static void flush_pieces(printer *pr, hk_buf *out) {
  /* few pieces, nearly sorted: insertion sort (stable by construction) */
  bool moved = false;
  for (int i = 1; i < pr->n_pieces; i++) {
    piece x = pr->pieces[i];
    int j = i;
    while (j > 0 && piece_cmp(&pr->pieces[j - 1], &x) > 0) pr->pieces[j] = pr->pieces[j - 1], j--;
    moved |= j != i;
    pr->pieces[j] = x;
  }
  if (!moved) {
    /* in the order written: scratch holds them back to back */
    if (pr->n_pieces) tx_put(out, pr->scratch.data, pr->scratch.len);
  } else {
    for (int k = 0; k < pr->n_pieces; k++)
      tx_put(out, pr->scratch.data + pr->pieces[k].off, pr->pieces[k].len);
  }
  pr->n_pieces = 0;
  pr->scratch.len = 0;
}

/* ---- instructions ------------------------------------------------------------------- */

static void print_operands(printer *pr, const hk_instr *i, hk_buf *out) {
  const hk_attrs *a = i->attrs;
  if (i->opcode == HK_OP_CONSTANT) {
    if (a && a->literal) {
      tx_print_literal(a->literal, out);
    } else {
      tx_puts(out, "{...}");
    }
    return;
  }
  if (i->opcode == HK_OP_PARAMETER) {
    tx_put_i64(out, a ? a->parameter_number : 0);
    return;
  }
  for (int k = 0; k < i->n_operands; k++) {
    if (k) tx_put(out, ", ", 2);
    const hk_instr *o = i->operands[k];
    if (pr->lng) {
      if (k && k % 5 == 0) hk_buf_printf(out, "/*index=%d*/", k);
      put_shape(pr, out, o->shape);
      tx_put(out, " %", 2);
    }
    tx_put(out, o->name, hk_str_hdr(o->name)->len);
  }
}

static void print_instr_line(printer *pr, const hk_instr *i, hk_buf *out) {
  hk_opcode op = (hk_opcode)i->opcode;
  put_instr_name(pr, out, i);
  tx_put(out, " = ", 3);
  put_shape(pr, out, i->shape);
  tx_put(out, " ", 1);
  const hk_instr *wrapped = NULL;
  if (is_async_op(op) && i->n_called && can_expand(i->called[0])) {
    wrapped = i->called[0]->root;
    tx_puts(out, hk_opcode_name((hk_opcode)wrapped->opcode));
    tx_puts(out, op == HK_OP_ASYNC_START ? "-start" : op == HK_OP_ASYNC_UPDATE ? "-update" : "-done");
  } else {
    tx_puts(out, hk_opcode_name(op));
  }
  tx_put(out, "(", 1);
  print_operands(pr, i, out);
  tx_put(out, ")", 1);
  if (is_async_op(op)) {
    /* the async op's own output_to_operand_aliasing, before the wrapped op's attributes */
    for (int k = 0; i->attrs && k < i->attrs->n_raw; k++)
      if (!strcmp(i->attrs->raw[k].name, "output_to_operand_aliasing"))
        PIECE(1, hk_buf_printf(b, "output_to_operand_aliasing=%s", i->attrs->raw[k].value));
    if (op == HK_OP_ASYNC_START) {
      const char *t = i->attrs ? i->attrs->async_execution_thread : NULL;
      if (t && strcmp(t, "main") != 0)
        PIECE(0, tx_puts(b, "async_execution_thread="); put_quoted(b, t));
      flush_pieces(pr, out);
      if (wrapped) {
        extra_pieces(pr, wrapped);
        called_pieces(pr, wrapped);
        flush_pieces(pr, out);
        /* the wrapped op's raw generic ones (statistics, origin) are the
         * start's own in XLA: they print in rank among the start's */
        generic_pieces(pr, wrapped);
      } else {
        called_pieces(pr, i);
      }
    }
    generic_pieces(pr, i);
    flush_pieces(pr, out);
    return;
  }
  extra_pieces(pr, i);
  called_pieces(pr, i);
  generic_pieces(pr, i);
  flush_pieces(pr, out);
}

void hk_print_instr(const hk_instr *i, hk_print_form form, hk_buf *out) {
  printer pr;
  tx_printer_init(&pr, form);
  print_instr_line(&pr, i, out);
  tx_printer_free(&pr);
}

char *hk_instr_to_string(const hk_instr *i, hk_print_form form) {
  hk_buf b;
  hk_buf_init(&b);
  hk_print_instr(i, form, &b);
  return b.data ? b.data : hk_check_alloc(strdup(""));
}

/* ---- computations -------------------------------------------------------------------- */

void tx_emit(printer *pr, const hk_instr *i, hk_buf *out) {
  tx_put(out, "  ", 2);
  if (i->parent && i->parent->root == i) tx_put(out, "ROOT ", 5);
  print_instr_line(pr, i, out);
  tx_put(out, "\n", 1);
}

void tx_flush(printer *pr, hk_buf *out) {
  if (!pr->sink || !out->len) return;
  if (!pr->sink_err) pr->sink_err = pr->sink(pr->sink_ctx, out->data, out->len);
  out->len = 0;
  out->data[0] = 0;
}

/* Prints c's instructions in XLA's MakeInstructionPostOrder (the IR's
 * post order, host/ir/post_order.c: over list positions in a big
 * computation, no DFS at all when the list is the order). */
static void print_post_order(printer *pr, const hk_computation *c, hk_buf *out) {
  int64_t n;
  hk_instr **order = hk_computation_post_order(c, &n);
  tx_print_lines(pr, order, (size_t)n, out);
  free(order);
}

static void print_computation(printer *pr, const hk_computation *c, hk_buf *out) {
  if (c->is_entry || (c->module && c->module->entry == c)) tx_puts(out, "ENTRY ");
  put_name(pr, out, c->name);
  if (pr->lng) {
    tx_puts(out, " (");
    for (int k = 0; k < c->n_params; k++) {
      if (k) tx_put(out, ", ", 2);
      if (!c->params[k]) continue;
      tx_puts(out, c->params[k]->name);
      tx_put(out, ": ", 2);
      put_shape_nolayout(pr, out, c->params[k]->shape);
    }
    tx_puts(out, ") -> ");
    if (c->root) put_shape_nolayout(pr, out, c->root->shape);
  }
  tx_puts(out, " {\n");
  if (pr->scheduled) {
    for (hk_instr *i = c->first; i; i = i->next) {
      tx_emit(pr, i, out);
      if (out->len >= TX_FLUSH_BYTES) tx_flush(pr, out);
    }
  } else {
    print_post_order(pr, c, out);
  }
  tx_put(out, "}", 1);
  if (c->execution_thread && strcmp(c->execution_thread, "main") != 0) {
    tx_puts(out, ", execution_thread=");
    put_quoted(out, c->execution_thread);
  }
  tx_puts(out, "\n\n");
}

/* ---- module ------------------------------------------------------------------------------ */

static void put_bools(hk_buf *b, const char *name, int n, const bool *v) {
  hk_buf_printf(b, ", %s={", name);
  for (int k = 0; k < n; k++) hk_buf_printf(b, "%s%s", k ? "," : "", v[k] ? "true" : "false");
  tx_put(b, "}", 1);
}

static const char *raw_value(const hk_module_config *cf, const char *name) {
  for (int k = 0; k < cf->n_raw; k++)
    if (!strcmp(cf->raw[k].name, name)) return cf->raw[k].value;
  return NULL;
}

static void print_entry_layout(printer *pr, const hk_module *m, hk_buf *out) {
  const hk_module_config *cf = &m->config;
  tx_puts(out, ", entry_computation_layout={(");
  if (cf->has_entry_layout) {
    for (int k = 0; k < cf->entry_layout.n_params; k++) {
      if (k) tx_put(out, ", ", 2);
      if (k && k % 5 == 0) hk_buf_printf(out, "/*index=%d*/", k);
      put_shape(pr, out, cf->entry_layout.params[k]);
    }
    tx_puts(out, ")->");
    if (cf->entry_layout.result) put_shape(pr, out, cf->entry_layout.result);
  } else {
    const hk_computation *e = m->entry;
    for (int k = 0; k < e->n_params; k++) {
      if (k) tx_put(out, ", ", 2);
      if (k && k % 5 == 0) hk_buf_printf(out, "/*index=%d*/", k);
      if (e->params[k]) put_shape(pr, out, e->params[k]->shape);
    }
    tx_puts(out, ")->");
    if (e->root) put_shape(pr, out, e->root->shape);
  }
  tx_put(out, "}", 1);
}

static void print_header(printer *pr, const hk_module *m, hk_buf *out) {
  const hk_module_config *cf = &m->config;
  tx_puts(out, "HloModule ");
  tx_puts(out, m->name ? m->name : "module");
  if (cf->is_scheduled) tx_puts(out, ", is_scheduled=true");
  static const char *early[] = {"input_output_alias", "buffer_donor", "alias_passthrough_params"};
  for (int k = 0; k < 3; k++) {
    const char *v = raw_value(cf, early[k]);
    if (v) hk_buf_printf(out, ", %s=%s", early[k], v);
  }
  if (m->entry) print_entry_layout(pr, m, out);
  if (cf->n_allow_prop_to_params > 1 ||
      (cf->n_allow_prop_to_params == 1 && cf->allow_prop_to_params[0]))
    put_bools(out, "allow_spmd_sharding_propagation_to_parameters", cf->n_allow_prop_to_params,
              cf->allow_prop_to_params);
  if (cf->n_allow_prop_to_output > 1 ||
      (cf->n_allow_prop_to_output == 1 && cf->allow_prop_to_output[0]))
    put_bools(out, "allow_spmd_sharding_propagation_to_output", cf->n_allow_prop_to_output,
              cf->allow_prop_to_output);
  if (cf->n_frontend_attributes) {
    tx_puts(out, ", frontend_attributes=");
    put_kv_list(out, cf->n_frontend_attributes, cf->frontend_attributes);
  }
  if (cf->replica_count > 1) hk_buf_printf(out, ", replica_count=%lld", (long long)cf->replica_count);
  if (cf->num_partitions > 1) hk_buf_printf(out, ", num_partitions=%lld", (long long)cf->num_partitions);
  if (cf->spmd_output_sharding) {
    tx_puts(out, ", spmd_output_sharding=");
    hk_sharding_print_buf(cf->spmd_output_sharding, out);
  }
  if (cf->n_spmd_parameters_shardings) {
    tx_puts(out, ", spmd_parameters_shardings={");
    for (int k = 0; k < cf->n_spmd_parameters_shardings; k++) {
      if (k) tx_put(out, ",", 1);
      hk_sharding_print_buf(cf->spmd_parameters_shardings[k], out);
    }
    tx_put(out, "}", 1);
  }
  for (int k = 0; k < cf->n_raw; k++) {
    const char *n = cf->raw[k].name;
    if (!strcmp(n, early[0]) || !strcmp(n, early[1]) || !strcmp(n, early[2]) ||
        !strcmp(n, TX_STACK_FRAMES_RAW))
      continue;
    hk_buf_printf(out, ", %s=%s", n, cf->raw[k].value);
  }
  tx_puts(out, "\n\n");
  tx_print_stack_frames(m, out);
}

/* Callees of every computation in instruction order. */
typedef struct callgraph {
  int n;
  int *start;                   /* n + 1 offsets into callee */
  const hk_computation **callee;
  size_t len, cap;
  uint8_t *nonroot, *sugar, *seen;
} callgraph;

static void callgraph_init(callgraph *g, int n) {
  g->n = n;
  g->start = hk_check_alloc(calloc((size_t)n + 1, sizeof *g->start));
  g->nonroot = hk_check_alloc(calloc((size_t)n + 1, 1));
  g->sugar = hk_check_alloc(calloc((size_t)n + 1, 1));
  g->seen = hk_check_alloc(calloc((size_t)n + 1, 1));
  g->len = 0;
  g->cap = 16;
  g->callee = hk_check_alloc(malloc(g->cap * sizeof *g->callee));
}

/* Appends the computations instruction i calls (callees of the computation
 * being added). */
static void callgraph_add_calls(callgraph *g, const hk_module *m, const hk_instr *i) {
  /* XLA's while keeps its body before its condition (the IR: condition
   * first), and its post order visits them in that order */
  bool body_first = i->opcode == HK_OP_WHILE && i->n_called == 2;
  for (int j = 0; j < i->n_called; j++) {
    const hk_computation *c = i->called[body_first ? 1 - j : j];
    if (!c || c->index < 0 || c->index >= g->n || m->computations[c->index] != c) continue;
    if (g->len == g->cap) g->callee = hk_check_alloc(realloc(g->callee, (g->cap *= 2) * sizeof *g->callee));
    g->callee[g->len++] = c;
    g->nonroot[c->index] = 1;
    if (i->opcode == HK_OP_ASYNC_START && j == 0 && can_expand(c)) g->sugar[c->index] = 1;
  }
}

static void callgraph_free(callgraph *g) {
  free(g->start);
  free(g->callee);
  free(g->nonroot);
  free(g->sugar);
  free(g->seen);
}

/* Every computation's callees, from one walk over the instructions
 * (before any is printed: the print order depends on them all). */
static void callgraph_collect(callgraph *g, const hk_module *m) {
  callgraph_init(g, m->n_computations);
  for (int k = 0; k < g->n; k++) {
    g->start[k] = (int)g->len;
    for (const hk_instr *i = m->computations[k]->first; i; i = i->next)
      if (i->n_called) callgraph_add_calls(g, m, i);
  }
  g->start[g->n] = (int)g->len;
}

/* Callees first (XLA's MakeEmbeddedComputationsList), then c itself;
 * async computations that print as sugar are skipped. */
static void visit_computation(printer *pr, callgraph *g, const hk_computation *c, hk_buf *out) {
  if (g->seen[c->index]) return;
  g->seen[c->index] = 1;
  for (int k = g->start[c->index]; k < g->start[c->index + 1]; k++)
    visit_computation(pr, g, g->callee[k], out);
  if (!g->sugar[c->index]) print_computation(pr, c, out);
}

/* XLA's MakeComputationPostOrder: computations nobody calls, in module
 * order, each preceded by what it calls. */
static void visit_all(printer *pr, callgraph *g, const hk_module *m, hk_buf *out) {
  for (int k = 0; k < g->n; k++)
    if (!g->nonroot[k]) visit_computation(pr, g, m->computations[k], out);
  for (int k = 0; k < g->n; k++) /* only called from a cycle */
    if (!g->seen[k]) visit_computation(pr, g, m->computations[k], out);
}

/* The module into out, or through pr's sink (out then its buffer). */
static void print_module(printer *pr, const hk_module *m, hk_buf *out) {
  pr->scheduled = m->config.is_scheduled;
  print_header(pr, m, out);
  callgraph g;
  callgraph_collect(&g, m);
  visit_all(pr, &g, m, out);
  callgraph_free(&g);
  tx_flush(pr, out);
}

void hk_print_module(const hk_module *m, hk_print_form form, hk_buf *out) {
  printer pr;
  tx_printer_init(&pr, form);
  print_module(&pr, m, out);
  tx_printer_free(&pr);
}

int hk_print_module_stream(const hk_module *m, hk_print_form form, hk_print_write_fn write,
                           void *ctx) {
  printer pr;
  tx_printer_init(&pr, form);
  pr.sink = write;
  pr.sink_ctx = ctx;
  hk_buf out;
  hk_buf_init(&out);
  print_module(&pr, m, &out);
  hk_buf_free(&out);
  tx_printer_free(&pr);
  return pr.sink_err;
}

char *hk_module_to_string(const hk_module *m, hk_print_form form) {
  hk_buf b;
  hk_buf_init(&b);
  hk_print_module(m, form, &b);
  return b.data ? b.data : hk_check_alloc(strdup(""));
}
