/* parse.c - parses sharding text in every spelling XLA's parser accepts ({replicated}, iota, lists, subgroups, tuples, metadata, shard groups). */
#include <stdlib.h>
#include <string.h>

#include "ir/intern.h"
#include "sharding/lex.h"
#include "sharding/named.h"
#include "sharding/sharding_impl.h"

/* Largest tile assignment we expand (devices). */
#define HK_MAX_TILE_DEVICES (1ll << 26)

/* Everything one `{...}` may contain, before it is turned into a sharding. */
typedef struct single {
  bool maximal, replicated, manual, unknown, unreduced, last_tile_dim_replicate, has_last_tile_dims;
  uint8_t group_kind;
  int64_t group_id;
  int n_tile_dims;
  int64_t tile_dims[HK_MAX_RANK];
  int n_reshape;                 /* > 0: iota form */
  int64_t reshape[HK_MAX_RANK];
  int32_t perm[HK_MAX_RANK];
  bool has_perm;
  int64_t n_devices, cap_devices;
  int64_t *devices;              /* malloc'ed */
  int n_subgroups;
  uint8_t subgroups[HK_MAX_RANK];
  int n_metadata, cap_metadata;
  hk_metadata *metadata;         /* malloc'ed */
} single;

static void single_free(single *s) {
  free(s->devices);
  free(s->metadata);
}

static hk_status *push_device(hk_cursor *c, single *s, int64_t d) {
  if (s->n_devices == s->cap_devices) {
    if (s->cap_devices >= HK_MAX_TILE_DEVICES) return hk_cur_error(c, "too many devices in sharding");
    int64_t nc = s->cap_devices ? s->cap_devices * 2 : 16;
    int64_t *nd = realloc(s->devices, sizeof(int64_t) * (size_t)nc);
    if (!nd) return hk_cur_error(c, "out of memory");
    s->devices = nd;
    s->cap_devices = nc;
  }
  s->devices[s->n_devices++] = d;
  return NULL;
}

/* '[' int (',' int)* ']' into dims (at most HK_MAX_RANK). */
static hk_status *parse_dim_list(hk_cursor *c, int64_t *dims, int *n, const char *what) {
  if (!hk_cur_eat(c, '[')) return hk_cur_error(c, "expected '[' to start %s", what);
  *n = 0;
  do {
    if (*n == HK_MAX_RANK - 1) return hk_cur_error(c, "too many dimensions in %s", what);
    HK_TRY(hk_cur_int(c, &dims[*n]));
    (*n)++;
  } while (hk_cur_eat(c, ','));
  if (!hk_cur_eat(c, ']')) return hk_cur_error(c, "expected ']' to end %s", what);
  return NULL;
}

/* T(p0,p1,...) after an iota's reshape dims. */
static hk_status *parse_iota_perm(hk_cursor *c, single *s) {
  size_t at = c->i;
  int n = 0;
  if (!hk_cur_eat(c, '(')) return hk_cur_error(c, "expected 'T(' to start sharding devices iota_transpose_perm");
  do {
    int64_t d;
    if (n == HK_MAX_RANK) return hk_cur_error(c, "too many dimensions in iota_transpose_perm");
    HK_TRY(hk_cur_int(c, &d));
    if (d < 0 || d >= s->n_reshape)
      return hk_cur_error_at(at, "Out of range iota minor_to_major value %lld, expecting value in range [0, %d)",
                             (long long)d, s->n_reshape);
    s->perm[n++] = (int32_t)d;
  } while (hk_cur_eat(c, ','));
  if (!hk_cur_eat(c, ')')) return hk_cur_error(c, "expected ')' to end sharding devices iota_transpose_perm");
  if (n != s->n_reshape)
    return hk_cur_error_at(at, "iota_transpose_perm should have the same rank as iota_reshape_dims : expected %d, saw %d.",
                           s->n_reshape, n);
  bool seen[HK_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    if (seen[s->perm[i]]) return hk_cur_error_at(at, "iota_transpose_perm is not a permutation");
    seen[s->perm[i]] = true;
  }
  s->has_perm = true;
  return NULL;
}

/* `<=[dims]` optionally followed by T(perm). */
static hk_status *parse_iota(hk_cursor *c, single *s) {
  HK_TRY(parse_dim_list(c, s->reshape, &s->n_reshape, "sharding iota_reshape_dims"));
  for (int i = 0; i < s->n_reshape; i++)
    if (s->reshape[i] <= 0) return hk_cur_error(c, "iota_reshape_dims must be positive");
  if (hk_cur_peek(c) == 'T' && c->i + 1 < c->n && (c->s[c->i + 1] == '(' || c->s[c->i + 1] == ' ')) {
    c->i++;
    return parse_iota_perm(c, s);
  }
  for (int i = 0; i < s->n_reshape; i++) s->perm[i] = i;
  return NULL;
}

/* devices=[dims] followed by an iota or a device list. */
static hk_status *parse_tile_assignment(hk_cursor *c, single *s) {
  HK_TRY(parse_dim_list(c, s->tile_dims, &s->n_tile_dims, "sharding devices shape"));
  for (int i = 0; i < s->n_tile_dims; i++)
    if (s->tile_dims[i] <= 0) return hk_cur_error(c, "tile assignment dimensions must be positive");
  if (hk_cur_peek(c) == '<' && c->i + 1 < c->n && c->s[c->i + 1] == '=') {
    c->i += 2;
    return parse_iota(c, s);
  }
  s->n_devices = 0;
  do {
    int64_t d;
    HK_TRY(hk_cur_int(c, &d));
    HK_TRY(push_device(c, s, d));
  } while (hk_cur_eat(c, ','));
  return NULL;
}

static hk_status *push_metadata(hk_cursor *c, hk_module *m, hk_metadata **arr, int *n, int *cap) {
  if (*n == *cap) {
    int nc = *cap ? *cap * 2 : 2;
    hk_metadata *nm = realloc(*arr, sizeof(hk_metadata) * (size_t)nc);
    if (!nm) return hk_cur_error(c, "out of memory");
    *arr = nm;
    *cap = nc;
  }
  HK_TRY(hk_metadata_parse_cursor(c, m, &(*arr)[*n]));
  (*n)++;
  return NULL;
}

hk_status *hk_metadata_list_parse(hk_cursor *c, hk_module *m, hk_metadata **arr, int *n, int *cap) {
  if (hk_cur_peek(c) != '{') return hk_cur_error(c, "expected '{' to start metadata");
  size_t save = c->i;
  c->i++;
  if (hk_cur_peek(c) != '{') {
    c->i = save;
    return push_metadata(c, m, arr, n, cap);
  }
  do {
    HK_TRY(push_metadata(c, m, arr, n, cap));
  } while (hk_cur_eat(c, ','));
  if (!hk_cur_eat(c, '}')) return hk_cur_error(c, "expected '}' to end metadata list");
  return NULL;
}

/* metadata={...} or metadata={{...}, {...}} */
static hk_status *parse_metadata_attr(hk_cursor *c, hk_module *m, single *s) {
  return hk_metadata_list_parse(c, m, &s->metadata, &s->n_metadata, &s->cap_metadata);
}

/* last_tile_dims={manual, replicated, ...} */
static hk_status *parse_subgroup_types(hk_cursor *c, single *s) {
  if (!hk_cur_eat(c, '{')) return hk_cur_error(c, "expected '{' to start sharding type list");
  s->n_subgroups = 0;
  s->has_last_tile_dims = true;
  if (hk_cur_eat(c, '}')) return NULL;
  do {
    uint8_t t;
    if (hk_cur_eat_word(c, "replicated")) t = HK_SUBGROUP_REPLICATED;
    else if (hk_cur_eat_word(c, "manual")) t = HK_SUBGROUP_MANUAL;
    else if (hk_cur_eat_word(c, "unreduced")) t = HK_SUBGROUP_UNREDUCED;
    else return hk_cur_error(c, "expected a sharding type (replicated, manual or unreduced)");
    if (s->n_subgroups == HK_MAX_RANK) return hk_cur_error(c, "too many last_tile_dims");
    s->subgroups[s->n_subgroups++] = t;
  } while (hk_cur_eat(c, ','));
  if (!hk_cur_eat(c, '}')) return hk_cur_error(c, "expected '}' to end sharding type list");
  return NULL;
}

static hk_status *parse_shard_group(hk_cursor *c, single *s, uint8_t kind) {
  s->group_kind = kind;
  return hk_cur_int(c, &s->group_id);
}

/* `name=` where name was just read (blanks allowed around '='). */
static bool eat_attr(hk_cursor *c, const char *name) {
  size_t save = c->i;
  if (hk_cur_eat_word(c, name) && hk_cur_eat(c, '=')) return true;
  c->i = save;
  return false;
}

/* One attribute or keyword inside a single sharding's braces. */
static hk_status *parse_single_item(hk_cursor *c, hk_module *m, single *s) {
  if (hk_cur_eat_word(c, "maximal")) return s->maximal = true, NULL;
  if (hk_cur_eat_word(c, "replicated")) return s->replicated = true, NULL;
  if (hk_cur_eat_word(c, "manual")) return s->manual = true, NULL;
  if (hk_cur_eat_word(c, "unknown")) return s->unknown = true, NULL;
  if (hk_cur_eat_word(c, "unreduced")) return s->unreduced = true, NULL;
  if (hk_cur_eat_word(c, "last_tile_dim_replicate")) return s->last_tile_dim_replicate = true, NULL;
  if (hk_cur_eat_word(c, "shard_as")) return parse_shard_group(c, s, HK_SHARD_GROUP_AS);
  if (hk_cur_eat_word(c, "shard_like")) return parse_shard_group(c, s, HK_SHARD_GROUP_LIKE);
  if (eat_attr(c, "device")) {
    int64_t d;
    hk_status *st = hk_cur_int(c, &d);
    if (st) {
      hk_status_free(st);
      return hk_cur_error(c, "device= attribute must be an integer");
    }
    s->n_devices = 0;
    return push_device(c, s, d);
  }
  if (eat_attr(c, "devices")) return parse_tile_assignment(c, s);
  if (eat_attr(c, "metadata")) return parse_metadata_attr(c, m, s);
  if (eat_attr(c, "last_tile_dims")) return parse_subgroup_types(c, s);
  if (hk_cur_peek(c) == 0) return hk_cur_error(c, "expected '}' to end sharding attribute");
  return hk_cur_error(c, "unexpected token in sharding: expected replicated, manual, maximal, unknown, "
                         "device=, devices=, last_tile_dim_replicate, last_tile_dims=, shard_as, "
                         "shard_like or metadata=");
}

/* Checks the tiled parts of a single sharding and fills the template. */
static hk_status *build_tiled(hk_cursor *c, size_t at, single *s, hk_sharding *t, hk_iota *iota) {
  if (s->n_tile_dims == 0)
    return hk_cur_error_at(at, "non-maximal shardings must have a tile assignment list including dimensions");
  if (s->last_tile_dim_replicate && s->has_last_tile_dims)
    return hk_cur_error_at(at, "last_tile_dim_replicate and last_tile_dims cannot both be given");
  int64_t prod = 1;
  for (int i = 0; i < s->n_tile_dims; i++) {
    if (prod > HK_MAX_TILE_DEVICES / s->tile_dims[i]) return hk_cur_error_at(at, "tile assignment too large");
    prod *= s->tile_dims[i];
  }
  int extra = s->n_subgroups + (s->last_tile_dim_replicate ? 1 : 0);
  if (extra > s->n_tile_dims)
    return hk_cur_error_at(at, "sharding has %d trailing subgroup dims but only %d tile assignment dimensions",
                           extra, s->n_tile_dims);
  if (s->n_reshape) {
    int64_t rprod = 1;
    for (int i = 0; i < s->n_reshape; i++) {
      if (rprod > HK_MAX_TILE_DEVICES / s->reshape[i]) return hk_cur_error_at(at, "tile assignment too large");
      rprod *= s->reshape[i];
    }
    if (rprod != prod)
      return hk_cur_error_at(at, "iota tile assignment size %lld does not match the tile assignment dimensions product %lld",
                             (long long)rprod, (long long)prod);
    *iota = (hk_iota){s->n_tile_dims, s->tile_dims, s->n_reshape, s->reshape, s->perm};
    t->iota = iota;
  } else {
    if (s->n_devices <= 1)
      return hk_cur_error_at(at, "non-maximal shardings must have more than one device assigned");
    if (s->n_devices != prod)
      return hk_cur_error_at(at, "sharding device count %lld does not match the tile assignment size %lld",
                             (long long)s->n_devices, (long long)prod);
    t->devices = s->devices;
  }
  (void)c;
  t->kind = HK_SHARDING_TILED;
  t->n_tile_dims = s->n_tile_dims;
  t->tile_dims = s->tile_dims;
  t->replicate_on_last_tile_dim = s->last_tile_dim_replicate;
  t->n_subgroups = s->n_subgroups;
  t->subgroups = s->subgroups;
  return NULL;
}

/* Turns the parsed items into a template (XLA's checks and messages). */
static hk_status *build_single(hk_cursor *c, size_t at, single *s, hk_sharding *t, hk_iota *iota) {
  memset(t, 0, sizeof *t);
  bool any_devices = s->n_devices > 0 || s->n_reshape > 0;
  const char *no_dev = NULL;
  if (s->replicated) {
    t->kind = HK_SHARDING_REPLICATED;
    no_dev = "replicated";
  } else if (s->maximal) {
    if (s->n_devices != 1 || s->n_reshape)
      return hk_cur_error_at(at, "maximal shardings should have exactly one device assigned");
    t->kind = HK_SHARDING_MAXIMAL;
    t->device = s->devices[0];
  } else if (s->manual) {
    t->kind = HK_SHARDING_MANUAL;
    no_dev = "manual";
  } else if (s->unknown) {
    t->kind = HK_SHARDING_UNKNOWN;
    no_dev = "unknown";
  } else if (s->unreduced) {
    t->kind = HK_SHARDING_UNREDUCED;
    no_dev = "unreduced";
  } else {
    HK_TRY(build_tiled(c, at, s, t, iota));
  }
  if (no_dev && any_devices)
    return hk_cur_error_at(at, "%s shardings should not have any devices assigned", no_dev);
  t->shard_group_kind = s->group_kind;
  t->shard_group_id = s->group_id;
  t->n_metadata = s->n_metadata;
  t->metadata = s->metadata;
  return NULL;
}

/* A single (non-tuple) sharding; the '{' is already consumed at `at`. */
static hk_status *parse_single_body(hk_cursor *c, hk_module *m, size_t at, const hk_sharding **out) {
  if (hk_named_sharding_next(c)) return hk_named_sharding_parse(c, m, at, out);
  single s;
  memset(&s, 0, sizeof s);
  hk_status *st = NULL;
  while (!st && !hk_cur_eat(c, '}')) st = parse_single_item(c, m, &s);
  hk_sharding t;
  hk_iota iota;
  if (!st) st = build_single(c, at, &s, &t, &iota);
  if (!st) *out = hk_sharding_intern(m, &t);
  single_free(&s);
  return st;
}

static hk_status *parse_single(hk_cursor *c, hk_module *m, const hk_sharding **out) {
  size_t at = (hk_cur_peek(c), c->i);
  if (!hk_cur_eat(c, '{')) return hk_cur_error(c, "expected '{' to start sharding attribute");
  return parse_single_body(c, m, at, out);
}

/* {{a}, {b}, ...}: the outer '{' consumed, the next token is '{'. */
static hk_status *parse_tuple_body(hk_cursor *c, hk_module *m, const hk_sharding **out) {
  int n = 0, cap = 8;
  const hk_sharding **elems = malloc(sizeof(*elems) * (size_t)cap);
  hk_status *st = NULL;
  do {
    if (n == cap) {
      cap *= 2;
      const hk_sharding **ne = realloc(elems, sizeof(*elems) * (size_t)cap);
      if (!ne) {
        st = hk_cur_error(c, "out of memory");
        break;
      }
      elems = ne;
    }
    st = parse_single(c, m, &elems[n]);
    if (!st) n++;
  } while (!st && hk_cur_eat(c, ','));
  if (!st && !hk_cur_eat(c, '}')) st = hk_cur_error(c, "expected '}' to end tuple sharding");
  if (!st) *out = hk_sharding_tuple(m, n, elems);
  free(elems);
  return st;
}

/* ---- the text cache ------------------------------------------------------
 * Large modules repeat a handful of sharding texts a million times, so the
 * module remembers text -> sharding.  Entries live in the HK_HC_SHARDING
 * table beside the shardings, told apart by their first byte (a kind no
 * sharding has). */
#define HK_TEXT_ENTRY_TAG 0xff

typedef struct text_entry {
  uint8_t tag;                   /* HK_TEXT_ENTRY_TAG, where hk_sharding has kind */
  size_t len;
  const char *text;
  const hk_sharding *sharding;   /* NULL until parsed (or if it failed) */
} text_entry;

static bool text_entry_eq(const void *stored, const void *key) {
  const text_entry *a = stored, *b = key;
  return a->tag == HK_TEXT_ENTRY_TAG && a->len == b->len && memcmp(a->text, b->text, b->len) == 0;
}

static const void *text_entry_copy(hk_module *m, const void *key) {
  const text_entry *k = key;
  text_entry *e = hk_alloc(m, sizeof *e);
  e->tag = HK_TEXT_ENTRY_TAG;
  e->len = k->len;
  e->text = hk_memdup(m, k->text, k->len);
  return e;
}

/* Length of the balanced {...} at text[0] (strings and comments skipped),
 * 0 if it is not balanced. */
static size_t sharding_extent(const char *t, size_t n) {
  int depth = 0;
  for (size_t i = 0; i < n; i++) {
    char ch = t[i];
    if (ch == '"' || ch == '\'') {   /* '...': a mesh axis name */
      for (i++; i < n && t[i] != ch; i++)
        if (t[i] == '\\') i++;
      if (i >= n) return 0;
    } else if (ch == '/' && i + 1 < n && t[i + 1] == '*') {
      for (i += 2; i + 1 < n && !(t[i] == '*' && t[i + 1] == '/'); i++) {
      }
      if (i + 1 >= n) return 0;
      i++;
    } else if (ch == '{') {
      depth++;
    } else if (ch == '}') {
      if (--depth == 0) return i + 1;
    }
  }
  return 0;
}

static hk_status *parse_uncached(hk_module *m, const char *text, size_t len, const hk_sharding **out,
                                 size_t *consumed);

hk_status *hk_sharding_parse(hk_module *m, const char *text, size_t len, const hk_sharding **out,
                             size_t *consumed) {
  size_t n = len && text[0] == '{' ? sharding_extent(text, len) : 0;
  if (n == 0) return parse_uncached(m, text, len, out, consumed);
  text_entry key = {HK_TEXT_ENTRY_TAG, n, text, NULL};
  uint64_t h = hk_hash_combine(hk_hash_bytes(text, n, 0x5eedu), HK_TEXT_ENTRY_TAG);
  text_entry *e = (text_entry *)hk_hashcons(m, HK_HC_SHARDING, h, &key, text_entry_eq, text_entry_copy);
  if (!e->sharding) {
    size_t used = 0;
    HK_TRY(parse_uncached(m, text, n, &e->sharding, &used));
  }
  *out = e->sharding;
  if (consumed) *consumed = n;
  return NULL;
}

static hk_status *parse_uncached(hk_module *m, const char *text, size_t len, const hk_sharding **out,
                                 size_t *consumed) {
  hk_cursor c = {text, len, 0};
  size_t at = (hk_cur_peek(&c), c.i);
  if (!hk_cur_eat(&c, '{')) return hk_cur_error(&c, "expected '{' to start sharding attribute");
  const hk_sharding *r = NULL;
  if (hk_cur_eat(&c, '}')) {
    r = hk_sharding_tuple(m, 0, NULL);
  } else if (hk_cur_peek(&c) == '{') {
    HK_TRY(parse_tuple_body(&c, m, &r));
  } else {
    HK_TRY(parse_single_body(&c, m, at, &r));
  }
  *out = r;
  if (consumed) *consumed = c.i;
  return NULL;
}
