/* names.c - unique names per module, following XLA's NameUniquer rules. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "irpriv.h"

static bool name_char_allowed(char c) {
  return isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_';
}

/* XLA's GetSanitizedName: bad characters become '_', a primitive type name
 * gets a trailing '_', a leading "__" (other than "__xla_") becomes "a_".
 * out must hold len + 2 bytes; returns the new length. */
static size_t sanitize(const char *s, size_t len, char *out) {
  if (len == 0) {
    memcpy(out, "name", 4);
    return 4;
  }
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    bool ok = i == 0 ? (isalpha((unsigned char)c) || c == '_') : name_char_allowed(c);
    out[i] = ok ? c : '_';
  }
  if (len <= 13) {   /* the longest type name, f8e4m3b11fnuz */
    hk_prim p = hk_prim_from_name(out, len);
    if (p != HK_PRIM_INVALID && p != HK_TUPLE) out[len++] = '_';
  }
  if (len >= 2 && out[0] == '_' && out[1] == '_' &&
      !(len >= 6 && memcmp(out, "__xla_", 6) == 0))
    out[0] = 'a';
  return len;
}

/* absl::SimpleAtoi for int64 over [s, s+len): optional sign, digits. */
static bool parse_i64(const char *s, size_t len, int64_t *out) {
  size_t i = 0;
  bool neg = false;
  if (i < len && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  if (i == len) return false;
  uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  for (; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    uint64_t d = (uint64_t)(s[i] - '0');
    if (v > (limit - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return true;
}

/* Splits name into root and numeric suffix ("add.3" -> "add", 3); the
 * separator counts only strictly inside the name. */
static bool split_suffix(const char *s, size_t len, size_t *root_len, int64_t *id) {
  const char *dot = NULL;
  for (size_t i = len; i-- > 0;)
    if (s[i] == '.') {
      dot = s + i;
      break;
    }
  *root_len = len;
  *id = 0;
  if (!dot || dot == s || (size_t)(dot - s) == len - 1) return false;
  int64_t v;
  if (!parse_i64(dot + 1, len - (size_t)(dot - s) - 1, &v)) return false;
  *root_len = (size_t)(dot - s);
  *id = v;
  return true;
}

static bool name_taken(const hk_namespace *ns, const char *s, size_t len) {
  return hk_strmap_find(&ns->names, s, len, hk_str_hash(s, len)) != NULL;
}

/* Writes v in decimal at out; returns the number of characters. */
static size_t put_i64(char *out, int64_t v) {
  char tmp[24];
  size_t n = 0;
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  size_t k = 0;
  if (v < 0) out[k++] = '-';
  while (n) out[k++] = tmp[--n];
  return k;
}

/* Writes root.id (or root / root.0 for id 0) into out; returns its length. */
static size_t format_name(char *out, const char *root, size_t root_len, bool suffix,
                          int64_t id) {
  if (out != root) memmove(out, root, root_len);
  if (id == 0 && !suffix) return root_len;
  out[root_len] = '.';
  return root_len + 1 + put_i64(out + root_len + 1, id);
}

/* For id 0 the name may be spelled two ways ("x" and "x.0"); this checks
 * the spelling other than the canonical one. */
static bool zero_alias_taken(const hk_namespace *ns, const char *root, size_t root_len,
                             bool suffix, char *scratch) {
  if (suffix) {
    size_t r;
    int64_t unused;
    return !split_suffix(root, root_len, &r, &unused) && name_taken(ns, root, root_len);
  }
  if (!ns->has_dot_zero) return false;
  size_t n = format_name(scratch, root, root_len, true, 0);
  return name_taken(ns, scratch, n);
}

/* Whether id is registered for root: XLA keeps a set of ids per root; every
 * name we hold is canonical, so the set is read off the name map. */
static bool id_used(const hk_namespace *ns, const char *root, size_t root_len, int64_t id,
                    char *scratch) {
  size_t n = format_name(scratch, root, root_len, id == 0, id);
  if (name_taken(ns, scratch, n)) return true;
  return id == 0 && zero_alias_taken(ns, root, root_len, true, scratch);
}

static hk_strmap_entry *counter_entry(hk_module *m, hk_namespace *ns, const char *root,
                                      size_t root_len) {
  uint32_t h = hk_str_hash(root, root_len);
  hk_strmap_entry *e = hk_strmap_slot(&ns->counters, root, root_len, h);
  if (!e->kt) hk_strmap_fill(&ns->counters, e, hk_str_new(&m->impl->arena, root, root_len, h),
                             (void *)(uintptr_t)0);
  return e;
}

static hk_root_ids *root_ids_find(const hk_namespace *ns, const char *root, size_t root_len) {
  hk_strmap_entry *e = hk_strmap_find(&ns->roots, root, root_len, hk_str_hash(root, root_len));
  return e ? hk_strmap_value(e) : NULL;
}

static hk_root_ids *root_ids_get(hk_module *m, hk_namespace *ns, const char *root,
                                 size_t root_len) {
  uint32_t h = hk_str_hash(root, root_len);
  hk_strmap_entry *e = hk_strmap_slot(&ns->roots, root, root_len, h);
  if (e->kt) return hk_strmap_value(e);
  hk_root_ids *r = hk_arena_alloc(&m->impl->arena, sizeof *r, _Alignof(hk_root_ids));
  *r = (hk_root_ids){.max = -1};
  hk_strmap_fill(&ns->roots, e, hk_str_new(&m->impl->arena, root, root_len, h), r);
  return r;
}

/* Whether the digits after the root spell id exactly as format_name does. */
static bool exact_suffix(const char *digits, size_t n, int64_t id) {
  if (id < 0 || n == 0 || digits[0] < '0' || digits[0] > '9') return false;
  return id == 0 ? n == 1 : digits[0] != '0';
}

/* Adds id to a root's summary; exact: the name spells it as format_name does. */
static void note_id_in(hk_root_ids *r, int64_t id, bool exact) {
  if (id > r->max) r->max = id;
  if (!exact) return;
  if (id == 0) r->zero = true;
  else r->n_exact++;
}

static void note_root_parts(hk_module *m, hk_namespace *ns, const char *root, size_t root_len,
                            int64_t id, bool exact) {
  note_id_in(root_ids_get(m, ns, root, root_len), id, exact);
}

/* Every id 0..max used. */
static bool ids_dense(const hk_root_ids *r) { return r->zero && r->n_exact == r->max; }

/* A name whose id is inside its root's dense run is taken: the name it will
 * get instead is known already, so its slot starts loading now, alongside
 * the taken name's own. */
static void prefetch_next_name(hk_namespace *ns, const hk_root_ids *r, const char *root,
                               size_t root_len, char *scratch) {
  hk_strmap_entry *c = hk_strmap_find(&ns->counters, root, root_len, hk_str_hash(root, root_len));
  int64_t next = c ? (int64_t)(uintptr_t)hk_strmap_value(c) : 0;
  if (next <= r->max) next = r->max + 1;
  size_t k = format_name(scratch, root, root_len, true, next);
  hk_strmap_prefetch(&ns->names, hk_str_hash(scratch, k));
}

/* Adds a newly registered name to its root's id summary ("x" is id 0 of x). */
static void note_root_id(hk_module *m, hk_namespace *ns, const char *name, size_t len) {
  size_t root_len;
  int64_t id;
  if (!split_suffix(name, len, &root_len, &id)) {
    note_root_parts(m, ns, name, len, 0, true);
    return;
  }
  note_root_parts(m, ns, name, root_len, id,
                  exact_suffix(name + root_len + 1, len - root_len - 1, id));
}

/* XLA's SequentialIdGenerator::RegisterId for an id already known taken:
 * the next free id from the root's counter.  Ids above every used one are
 * free; when ids 0..max are all used the counter jumps past them. */
static int64_t next_free_id(hk_module *m, hk_namespace *ns, const char *root, size_t root_len,
                            char *scratch) {
  hk_strmap_entry *e = counter_entry(m, ns, root, root_len);
  int64_t next = (int64_t)(uintptr_t)hk_strmap_value(e);
  const hk_root_ids *r = root_ids_find(ns, root, root_len);
  if (r && ids_dense(r) && next <= r->max) next = r->max + 1;
  while (r && next <= r->max && id_used(ns, root, root_len, next, scratch)) next++;
  hk_strmap_set_value(e, (void *)(uintptr_t)(next + 1));
  return next;
}

static void note_dot_zero(hk_namespace *ns, const char *name, size_t len) {
  if (len >= 2 && name[len - 2] == '.' && name[len - 1] == '0') ns->has_dot_zero = true;
}

static void note_name(hk_module *m, hk_namespace *ns, const char *name, size_t len) {
  note_dot_zero(ns, name, len);
  note_root_id(m, ns, name, len);
}

const char *hk_ns_claim(hk_module *m, hk_namespace *ns, const char *name, size_t len,
                        void *owner) {
  uint32_t h = hk_str_hash(name, len);
  hk_strmap_entry *e = hk_strmap_slot(&ns->names, name, len, h);
  if (e->kt) {
    hk_strmap_set_value(e, owner);
    return hk_strmap_key(e);
  }
  const char *key = hk_str_new(&m->impl->arena, name, len, h);
  hk_strmap_fill(&ns->names, e, key, owner);
  note_name(m, ns, name, len);
  return key;
}

/* When s is already what sanitize + split_suffix + format_name would make
 * of it (the usual case), its root length, suffix flag and id; false when
 * it needs rewriting (or is unusual enough to take the general path). */
static bool canonical_parts(const char *s, size_t len, size_t *root_len, bool *suffix,
                            int64_t *id) {
  if (len == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  if (len >= 2 && s[0] == '_' && s[1] == '_') return false;
  size_t dot = len;
  for (size_t i = 1; i < len; i++) {
    if (!name_char_allowed(s[i])) return false;
    if (s[i] == '.') dot = i;
  }
  if (len <= 13 && dot == len) {   /* type names have no '.' */
    hk_prim p = hk_prim_from_name(s, len);
    if (p != HK_PRIM_INVALID && p != HK_TUPLE) return false;
  }
  *root_len = len;
  *suffix = false;
  *id = 0;
  if (dot >= len - 1) return true;            /* no '.' inside */
  const char *d = s + dot + 1;
  size_t n = len - dot - 1;
  if (d[0] == '-' || d[0] == '+') return false;
  int64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (d[i] < '0' || d[i] > '9') return true; /* not a number: no suffix */
    v = v * 10 + (d[i] - '0');
    if (i >= 17) return false;                 /* long: let parse_i64 decide */
  }
  if (d[0] == '0' && n > 1) return false;      /* leading zeros are dropped */
  *root_len = dot;
  *suffix = true;
  *id = v;
  return true;
}

/* The name announced by hk_module_prefetch_instr_name, with its hash: the
 * parser announces a name before it parses the right-hand side, then hands
 * hk_instr_new a fresh copy; the hash is taken from the announcement (read
 * from the text, long since written) instead of from that copy.  A private
 * copy of the characters (ns->hint) checks it is the same name. */
static void hint_set(hk_namespace *ns, const char *s, size_t len, uint32_t hash) {
  ns->hinted = len <= sizeof ns->hint;
  if (!ns->hinted) return;
  ns->hint_len = (uint32_t)len;
  ns->hint_hash = hash;
  memcpy(ns->hint, s, len);
}

/* Whether want is the announced name (its slot is loading already); *h
 * gets its hash. */
static bool hinted_hash(hk_namespace *ns, const char *want, size_t len, uint32_t *h) {
  if (ns->hinted && ns->hint_len == len && memcmp(ns->hint, want, len) == 0) {
    ns->hinted = false;
    *h = ns->hint_hash;
    return true;
  }
  *h = hk_str_hash(want, len);
  return false;
}

/* XLA's NameUniquer::GetUniqueName for want, whose hk_str_hash is h (its
 * slot prefetched already or not).  The common case (want is canonical and
 * free) costs one probe of the name map and no copy of want. */
static const char *ns_unique_hashed(hk_module *m, hk_namespace *ns, const char *want,
                                    size_t len, uint32_t h, bool prefetched, void *owner) {
  char stack[256];
  size_t need = 2 * (len + 40);
  char *buf = need <= sizeof stack ? stack : malloc(need);
  if (!buf) hk_out_of_memory();
  char *scratch = buf + len + 40;
  /* Usually the name is already canonical: start loading its slot while the
   * canonical spelling is worked out. */
  if (!prefetched) hk_strmap_prefetch(&ns->names, h);
  size_t n, root_len;
  int64_t id;
  bool suffix;
  const char *s = want;   /* the canonical spelling: want itself, or buf */
  if (canonical_parts(want, len, &root_len, &suffix, &id)) {
    n = len;
  } else {
    n = sanitize(want, len, buf);
    suffix = split_suffix(buf, n, &root_len, &id);
    n = format_name(buf, buf, root_len, suffix, id);
    if (n != len || memcmp(buf, want, len) != 0) h = hk_str_hash(buf, n);
    s = buf;
  }
  hk_root_ids *r = suffix ? root_ids_find(ns, s, root_len) : NULL;
  if (r && id >= 1 && id <= r->max && ids_dense(r))
    prefetch_next_name(ns, r, s, root_len, scratch);
  hk_strmap_entry *e = hk_strmap_slot(&ns->names, s, n, h);
  const char *name;
  if (e->kt && hk_strmap_value(e) == HK_NAME_RESERVED && owner != HK_NAME_RESERVED) {
    /* handed out by hk_module_unique_name: its first owner takes it */
    hk_strmap_set_value(e, owner);
    name = hk_strmap_key(e);
  } else if (!e->kt && !(id == 0 && zero_alias_taken(ns, s, root_len, suffix, scratch))) {
    name = hk_str_new(&m->impl->arena, s, n, h);
    hk_strmap_fill(&ns->names, e, name, owner);
    /* s is format_name(root, suffix, id): its parts are known */
    note_dot_zero(ns, s, n);
    if (r) note_id_in(r, id, id >= 0);
    else note_root_parts(m, ns, s, root_len, suffix ? id : 0, id >= 0);
  } else {
    id = next_free_id(m, ns, s, root_len, scratch);
    n = format_name(buf, s, root_len, suffix, id);
    name = hk_ns_claim(m, ns, buf, n, owner);
  }
  if (buf != stack) free(buf);
  return name;
}

const char *hk_ns_unique(hk_module *m, hk_namespace *ns, const char *want, size_t len,
                         void *owner) {
  uint32_t h;
  bool prefetched = hinted_hash(ns, want, len, &h);
  return ns_unique_hashed(m, ns, want, len, h, prefetched, owner);
}

void hk_module_reserve_instr_names(hk_module *m, size_t n) {
  hk_strmap_reserve(&m->impl->instr_names.names, n);
}

void hk_module_prefetch_instr_name_hashed(hk_module *m, const char *name, size_t len,
                                          uint32_t hash) {
  hk_strmap_prefetch(&m->impl->instr_names.names, hash);
  hint_set(&m->impl->instr_names, name, len, hash);
}

void hk_module_prefetch_instr_name(hk_module *m, const char *name, size_t len) {
  hk_module_prefetch_instr_name_hashed(m, name, len, hk_str_hash(name, len));
}

uint32_t hk_module_prefetch_instr_slot(hk_module *m, const char *name, size_t len) {
  uint32_t h = hk_str_hash(name, len);
  hk_strmap_prefetch_slot(&m->impl->instr_names.names, h);
  return h;
}

void *hk_ns_lookup(hk_namespace *ns, const char *name) {
  hk_ns_settle_taken(ns);
  size_t len = strlen(name);
  hk_strmap_entry *e = hk_strmap_find(&ns->names, name, len, hk_str_hash(name, len));
  void *v = e ? hk_strmap_value(e) : NULL;
  return v == HK_NAME_RESERVED || v == HK_NAME_RETIRED ? NULL : v;
}

void hk_ns_retire(hk_namespace *ns, const char *name) {
  size_t len = strlen(name);
  hk_strmap_entry *e = hk_strmap_find(&ns->names, name, len, hk_str_hash(name, len));
  if (e) hk_strmap_set_value(e, HK_NAME_RETIRED);
}

hk_instr *hk_name_holder_of(hk_namespace *ns, const char *name) {
  hk_instr *i = hk_ns_lookup(ns, name);
  if (!i) return NULL;
  /* still in the module, still holding the name (not lent on or renamed) */
  bool live = i->parent && i->parent->index >= 0;
  return live && !(i->flags & HK_IFLAG_NAME_LENT) && strcmp(i->name, name) == 0 ? i : NULL;
}
hk_strmap_entry *hk_ns_entry(const hk_namespace *ns, const char *name) {
  const hk_strhdr *h = hk_str_hdr(name);
  return hk_strmap_find(&ns->names, name, h->len, h->hash);
}

void hk_ns_note_taken(hk_namespace *ns, hk_instr *to) {
  if (ns->n_taken == ns->cap_taken) {
    size_t cap = ns->cap_taken ? 2 * ns->cap_taken : 256;
    hk_instr **v = realloc(ns->taken, cap * sizeof *v);
    if (!v) hk_out_of_memory();
    hk_populate(v + ns->n_taken, v + cap);   /* filled in order: on the helper */
    ns->taken = v;
    ns->cap_taken = cap;
  }
  ns->taken[ns->n_taken++] = to;
}

/* How far ahead the settling loop loads: the struct of instruction
 * k + 3 * AHEAD, the name header of k + 2 * AHEAD, then the map slot of
 * k + AHEAD, so the probe of instruction k finds its slot in cache. */
#define SETTLE_AHEAD 8

void hk_ns_settle_taken(hk_namespace *ns) {
  size_t n = ns->n_taken;
  if (!n) return;
  hk_instr *const *v = ns->taken;
  for (size_t k = 0; k < n; k++) {
    if (k + 3 * SETTLE_AHEAD < n) __builtin_prefetch(&v[k + 3 * SETTLE_AHEAD]->name);
    if (k + 2 * SETTLE_AHEAD < n)
      __builtin_prefetch(hk_str_hdr(v[k + 2 * SETTLE_AHEAD]->name));
    if (k + SETTLE_AHEAD < n) hk_ns_prefetch_entry(ns, v[k + SETTLE_AHEAD]->name);
    hk_instr *to = v[k];
    /* passed on since, or removed (alone or with its computation) */
    if (!to->parent || to->parent->index < 0 || (to->flags & HK_IFLAG_NAME_LENT)) continue;
    hk_strmap_entry *e = hk_ns_entry(ns, to->name);
    if (e) hk_strmap_set_value(e, to);
  }
  free(ns->taken);
  ns->taken = NULL;
  ns->n_taken = ns->cap_taken = 0;
}

void hk_ns_free(hk_namespace *ns) {
  free(ns->taken);
  ns->taken = NULL;
  ns->n_taken = ns->cap_taken = 0;
  hk_strmap_free(&ns->names);
  hk_strmap_free(&ns->counters);
  hk_strmap_free(&ns->roots);
}

/* XLA's HloInstruction::AddSuffixToInstructionName. */
const char *hk_name_with_suffix(hk_module *m, const char *name, const char *suffix) {
  size_t nl = strlen(name), sl = strlen(suffix);
  char *buf = malloc(nl + sl + 32);
  if (!buf) hk_out_of_memory();
  size_t n = 0;
  const char *at = NULL;   /* last ".suffix" in name */
  for (const char *p = name; (p = strstr(p, ".")) != NULL; p++)
    if (strncmp(p + 1, suffix, sl) == 0) at = p;
  memcpy(buf, name, nl);
  if (!at) {
    n = nl;
    buf[n++] = '.';
    memcpy(buf + n, suffix, sl);
    n += sl;
  } else {
    const char *after = at + 1 + sl;
    size_t al = strlen(after);
    int64_t num;
    if (al == 0) {
      n = nl;
      buf[n++] = '2';
    } else if (parse_i64(after, al, &num)) {
      n = (size_t)(after - name);
      n += put_i64(buf + n, num + 1);
    } else {
      n = nl;
      buf[n++] = '.';
      memcpy(buf + n, suffix, sl);
      n += sl;
    }
  }
  const char *r = hk_intern(m, buf, n);
  free(buf);
  return r;
}
