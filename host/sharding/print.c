/* print.c - prints shardings exactly as XLA's HloSharding::ToString does. */
#include <stdlib.h>
#include <string.h>

#include "sharding/metadata.h"
#include "sharding/sharding_impl.h"

/* Appends a decimal integer (hot: device lists). */
static void put_int(hk_buf *out, int64_t v) {
  char tmp[24];
  int k = sizeof tmp;
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[--k] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) tmp[--k] = '-';
  hk_buf_put(out, tmp + k, sizeof tmp - (size_t)k);
}

static void put_ints(hk_buf *out, int64_t n, const int64_t *v) {
  for (int64_t i = 0; i < n; i++) {
    if (i) hk_buf_put(out, ",", 1);
    put_int(out, v[i]);
  }
}

static bool perm_is_identity(const hk_iota *io) {
  for (int i = 0; i < io->n_reshape_dims; i++)
    if (io->perm[i] != i) return false;
  return true;
}

static void put_tile_assignment(hk_buf *out, const hk_sharding *s) {
  hk_buf_put(out, "devices=[", 9);
  put_ints(out, s->n_tile_dims, s->tile_dims);
  hk_buf_put(out, "]", 1);
  if (!s->iota) {
    put_ints(out, hk_shard_num_devices(s), s->devices);
    return;
  }
  hk_buf_put(out, "<=[", 3);
  put_ints(out, s->iota->n_reshape_dims, s->iota->reshape_dims);
  hk_buf_put(out, "]", 1);
  if (perm_is_identity(s->iota)) return;
  hk_buf_put(out, "T(", 2);
  for (int i = 0; i < s->iota->n_reshape_dims; i++) {
    if (i) hk_buf_put(out, ",", 1);
    put_int(out, s->iota->perm[i]);
  }
  hk_buf_put(out, ")", 1);
}

static const char *subgroup_name(uint8_t t) {
  switch (t) {
    case HK_SUBGROUP_MANUAL: return "manual";
    case HK_SUBGROUP_REPLICATED: return "replicated";
    case HK_SUBGROUP_UNREDUCED: return "unreduced";
    default: return "error_type.";
  }
}

static void put_subgroups(hk_buf *out, const hk_sharding *s) {
  if (!s->n_subgroups) return;
  hk_buf_puts(out, " last_tile_dims={");
  for (int i = 0; i < s->n_subgroups; i++) {
    if (i) hk_buf_put(out, ", ", 2);
    hk_buf_puts(out, subgroup_name(s->subgroups[i]));
  }
  hk_buf_put(out, "}", 1);
}

static void put_shard_group(hk_buf *out, const hk_sharding *s) {
  if (s->shard_group_kind == HK_SHARD_GROUP_AS) hk_buf_puts(out, " shard_as ");
  else if (s->shard_group_kind == HK_SHARD_GROUP_LIKE) hk_buf_puts(out, " shard_like ");
  else return;
  put_int(out, s->shard_group_id);
}

static void put_metadata(hk_buf *out, const hk_sharding *s) {
  if (!s->n_metadata) return;
  hk_buf_puts(out, " metadata={");
  if (s->n_metadata == 1) {
    hk_metadata_print_fields(&s->metadata[0], out);
  } else {
    for (int i = 0; i < s->n_metadata; i++) {
      if (i) hk_buf_put(out, ", ", 2);
      hk_metadata_print(&s->metadata[i], out);
    }
  }
  hk_buf_put(out, "}", 1);
}

static void put_tuple(hk_buf *out, const hk_sharding *s) {
  hk_buf_put(out, "{", 1);
  for (int i = 0; i < s->n_elems; i++) {
    if (i && i % 5 == 0) hk_buf_printf(out, ", /*index=%d*/", i);
    else if (i) hk_buf_put(out, ", ", 2);
    hk_sharding_print_buf(s->elems[i], out);
  }
  hk_buf_put(out, "}", 1);
}

static const char *simple_kind_name(uint8_t kind) {
  switch (kind) {
    case HK_SHARDING_REPLICATED: return "{replicated";
    case HK_SHARDING_MANUAL: return "{manual";
    case HK_SHARDING_UNKNOWN: return "{unknown";
    case HK_SHARDING_UNREDUCED: return "{unreduced";
    default: return NULL;
  }
}

void hk_sharding_format(const hk_sharding *s, hk_buf *out) {
  if (s->kind == HK_SHARDING_TUPLE) {
    put_tuple(out, s);
    return;
  }
  const char *simple = simple_kind_name(s->kind);
  if (simple) {
    hk_buf_puts(out, simple);
  } else if (s->kind == HK_SHARDING_MAXIMAL) {
    hk_buf_puts(out, "{maximal device=");
    put_int(out, s->device);
  } else {
    hk_buf_put(out, "{", 1);
    put_tile_assignment(out, s);
    if (s->replicate_on_last_tile_dim) hk_buf_puts(out, " last_tile_dim_replicate");
    put_subgroups(out, s);
  }
  put_shard_group(out, s);
  put_metadata(out, s);
  hk_buf_put(out, "}", 1);
}

void hk_sharding_print_buf(const hk_sharding *s, hk_buf *out) {
  const hk_sharding_impl *p = hk_shard_impl(s);
  if (p->text) hk_buf_put(out, p->text, p->text_len);
  else hk_sharding_format(s, out);
}

size_t hk_sharding_print(const hk_sharding *s, char *buf, size_t cap) {
  const hk_sharding_impl *p = hk_shard_impl(s);
  hk_buf b;
  hk_buf_init(&b);
  const char *text = p->text;
  size_t n = p->text_len;
  if (!text) {
    hk_sharding_format(s, &b);
    text = b.data;
    n = b.len;
  }
  if (cap > 0) {
    size_t k = n < cap - 1 ? n : cap - 1;
    memcpy(buf, text, k);
    buf[k] = 0;
  }
  hk_buf_free(&b);
  return n;
}

char *hk_sharding_to_string(const hk_sharding *s) {
  size_t n = hk_sharding_print(s, NULL, 0);
  char *r = malloc(n + 1);
  if (r) hk_sharding_print(s, r, n + 1);
  return r;
}
