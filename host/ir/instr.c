/* instr.c - instructions: creation, operands and users, control edges, removal. */
#include <string.h>

#include "irpriv.h"

/* ---- small helpers -------------------------------------------------------------- */

static hk_instr **ptrs_alloc(hk_module *m, int32_t n) {
  return n ? hk_alloc_aligned(m, (size_t)n * sizeof(hk_instr *), 8) : NULL;
}

static hk_module *instr_module(const hk_instr *i) { return i->parent->module; }

/* A copy of n bytes of 8-byte items (8-byte alignment packs small arrays). */
static void *dup8(hk_module *m, const void *p, size_t n) {
  void *d = hk_alloc_aligned(m, n, 8);
  memcpy(d, p, n);
  return d;
}

static bool has_operand(const hk_instr *i, const hk_instr *op) {
  for (int32_t k = 0; k < i->n_operands; k++)
    if (i->operands[k] == op) return true;
  return false;
}

static void add_user(hk_instr *op, hk_instr *user) {
  if (op->n_users == op->cap_users) {
    int32_t cap = op->cap_users ? op->cap_users * 2 : 1;
    hk_instr **users = ptrs_alloc(instr_module(op), cap);
    if (op->n_users) memcpy(users, op->users, (size_t)op->n_users * sizeof *users);
    op->users = users;   /* the old array stays in the arena */
    op->cap_users = cap;
  }
  op->users[op->n_users++] = user;
}

/* Drops user from op->users the way XLA does: the last user moves into its
 * slot.  (Searches from the back: new users are usually the ones removed.) */
static void remove_user(hk_instr *op, const hk_instr *user) {
  for (int32_t k = op->n_users; k-- > 0;) {
    if (op->users[k] != user) continue;
    op->users[k] = op->users[--op->n_users];
    return;
  }
}

static void list_insert_before(hk_computation *c, hk_instr *i, hk_instr *before) {
  if (!before) {
    i->prev = c->last;
    i->next = NULL;
    if (c->last) c->last->next = i;
    else c->first = i;
    c->last = i;
  } else {
    i->next = before;
    i->prev = before->prev;
    if (before->prev) before->prev->next = i;
    else c->first = i;
    before->prev = i;
  }
  c->n_instrs++;
}

/* ---- creation ------------------------------------------------------------------ */

/* The instruction, linked to its operands and into c's list, without a name. */
static hk_instr *instr_link_new(hk_computation *c, hk_instr *before, hk_opcode op,
                                const hk_shape *shape, int n_operands,
                                hk_instr *const *operands) {
  hk_module *m = c->module;
  hk_instr *i = hk_arena_take(&m->impl->instr_arena, sizeof *i, 8);
  i->opcode = (uint16_t)op;
  i->shape = shape;
  i->parent = c;
  i->id = m->next_id++;
  hk_module_note_change(m);
  i->n_operands = i->cap_operands = n_operands;
  i->operands = ptrs_alloc(m, n_operands);
  for (int k = 0; k < n_operands; k++) {
    hk_instr *o = operands[k];
    i->operands[k] = o;
    /* A repeated operand already has i as its newest user. */
    if (o->n_users == 0 || o->users[o->n_users - 1] != i) add_user(o, i);
  }
  list_insert_before(c, i, before);
  return i;
}

static void pass_name(hk_namespace *ns, hk_instr *to, hk_instr *from);

hk_instr *hk_instr_create(hk_computation *c, hk_instr *before, hk_opcode op,
                          const hk_shape *shape, int n_operands, hk_instr *const *operands,
                          const char *name, hk_instr *name_from) {
  hk_module *m = c->module;
  hk_namespace *ns = &m->impl->instr_names;
  bool take = name_from && name_from->parent && name_from->parent->module == m;
  if (name_from && !take) name = name_from->name;
  hk_instr *i = instr_link_new(c, before, op, shape, n_operands, operands);
  if (take) {
    pass_name(ns, i, name_from);
    return i;
  }
  const char *want = name ? name : hk_opcode_name(op);
  i->name = hk_ns_unique(m, ns, want, strlen(want), i);
  return i;
}

hk_instr *hk_instr_new(hk_computation *c, hk_opcode op, const hk_shape *shape,
                       int n_operands, hk_instr *const *operands, const char *name) {
  return hk_instr_create(c, NULL, op, shape, n_operands, operands, name, NULL);
}

hk_instr *hk_instr_new_before(hk_instr *before, hk_opcode op, const hk_shape *shape,
                              int n_operands, hk_instr *const *operands,
                              const char *name) {
  return hk_instr_create(before->parent, before, op, shape, n_operands, operands, name, NULL);
}

hk_attrs *hk_instr_attrs(hk_instr *i) {
  hk_instr_note_change(i);   /* the caller writes to them */
  if (!i->attrs) i->attrs = hk_alloc(instr_module(i), sizeof *i->attrs);
  return i->attrs;
}

void hk_instr_set_dims(hk_instr *i, int n, const int64_t *dims) {
  hk_instr_note_change(i);
  i->n_dims = n;
  i->dims = n ? dup8(instr_module(i), dims, (size_t)n * sizeof *dims) : NULL;
}

void hk_instr_set_sharding(hk_instr *i, const hk_sharding *s) { i->sharding = s; }

void hk_instr_set_called(hk_instr *i, int n, hk_computation *const *called) {
  hk_instr_note_change(i);
  i->n_called = n;
  i->called = n ? dup8(instr_module(i), called, (size_t)n * sizeof *called) : NULL;
}

/* Gives up i's name.  Nothing is written to the name map: its entry keeps
 * the name taken for good (names are never handed out again, as XLA's
 * uniquer), and a lookup accepts an entry only while its instruction is
 * live and still holds that name (name_holder_of), so removing or renaming
 * costs no probe. */
static void drop_name(hk_instr *i) { i->flags &= (uint16_t)~HK_IFLAG_NAME_LENT; }
void hk_instr_set_name(hk_instr *i, const char *name) {
  hk_module *m = instr_module(i);
  if (name && i->name && strcmp(name, i->name) == 0) return;
  drop_name(i);
  const char *want = name ? name : hk_opcode_name((hk_opcode)i->opcode);
  i->name = hk_ns_unique(m, &m->impl->instr_names, want, strlen(want), i);
}

/* The instruction holding from's name: from itself unless it passed the
 * name on (then the map says, once settled); NULL when nobody does. */
static hk_instr *name_holder(hk_namespace *ns, hk_instr *from) {
  if (!(from->flags & HK_IFLAG_NAME_LENT)) return from;
  return hk_name_holder_of(ns, from->name);
}

/* `to` (holding no name) takes from's: the holder is marked as having
 * passed it on, and the map entry follows when the namespace settles. */
static void pass_name(hk_namespace *ns, hk_instr *to, hk_instr *from) {
  hk_instr *holder = name_holder(ns, from);
  if (holder && holder != to) holder->flags |= HK_IFLAG_NAME_LENT;
  to->name = from->name;
  to->flags &= (uint16_t)~HK_IFLAG_NAME_LENT;
  hk_ns_note_taken(ns, to);
}

void hk_instr_take_name(hk_instr *to, hk_instr *from) {
  if (to == from || to->name == from->name) return;
  hk_module *m = instr_module(to);
  if (!from->parent || from->parent->module != m) {   /* not a name of this module */
    hk_instr_set_name(to, from->name);
    return;
  }
  drop_name(to);
  pass_name(&m->impl->instr_names, to, from);
}

/* ---- operands and users -------------------------------------------------------------- */

void hk_instr_append_operand(hk_instr *i, hk_instr *op) {
  hk_instr_note_change(i);
  bool had = has_operand(i, op);
  if (i->n_operands == i->cap_operands) {
    int32_t cap = i->cap_operands ? i->cap_operands * 2 : 2;
    hk_instr **ops = ptrs_alloc(instr_module(i), cap);
    if (i->n_operands) memcpy(ops, i->operands, (size_t)i->n_operands * sizeof *ops);
    i->operands = ops;
    i->cap_operands = cap;
  }
  i->operands[i->n_operands++] = op;
  if (!had) add_user(op, i);
}

void hk_instr_set_operand(hk_instr *i, int idx, hk_instr *op) {
  hk_instr *old = i->operands[idx];
  if (old == op) return;
  hk_instr_note_change(i);
  bool had = has_operand(i, op);
  i->operands[idx] = op;
  if (!has_operand(i, old)) remove_user(old, i);
  if (!had) add_user(op, i);
}

void hk_instr_replace_all_uses(hk_instr *old, hk_instr *new_) {
  if (old == new_) return;
  hk_instr_note_change(old);
  int32_t kept = 0;
  for (int32_t u = 0; u < old->n_users; u++) {
    hk_instr *user = old->users[u];
    if (user == new_) {   /* new_ itself keeps using old: no self-loop */
      old->users[kept++] = user;
      continue;
    }
    bool had = has_operand(user, new_);
    for (int32_t k = 0; k < user->n_operands; k++)
      if (user->operands[k] == old) user->operands[k] = new_;
    if (!had) add_user(new_, user);
  }
  old->n_users = kept;
  hk_computation *c = old->parent;
  if (c && c->root == old && new_->parent == c) c->root = new_;
}

/* ---- control edges -------------------------------------------------------------------- */

static bool ptrs_contain(hk_instr *const *v, int32_t n, const hk_instr *x) {
  for (int32_t k = 0; k < n; k++)
    if (v[k] == x) return true;
  return false;
}

/* Appends x to an attribute list (copied: these lists are short). */
static void ptrs_append(hk_module *m, hk_instr ***v, int32_t *n, hk_instr *x) {
  hk_instr **nv = ptrs_alloc(m, *n + 1);
  if (*n) memcpy(nv, *v, (size_t)*n * sizeof *nv);
  nv[(*n)++] = x;
  *v = nv;
}

static void ptrs_remove(hk_instr **v, int32_t *n, const hk_instr *x) {
  int32_t kept = 0;
  for (int32_t k = 0; k < *n; k++)
    if (v[k] != x) v[kept++] = v[k];
  *n = kept;
}

void hk_instr_add_control_dep(hk_instr *pred, hk_instr *succ) {
  hk_attrs *pa = hk_instr_attrs(pred), *sa = hk_instr_attrs(succ);
  if (ptrs_contain(pa->control_succs, pa->n_control_succs, succ)) return;
  hk_module *m = instr_module(pred);
  ptrs_append(m, &pa->control_succs, &pa->n_control_succs, succ);
  ptrs_append(m, &sa->control_preds, &sa->n_control_preds, pred);
}

void hk_instr_remove_control_deps(hk_instr *i) {
  hk_attrs *a = i->attrs;
  if (!a) return;
  hk_instr_note_change(i);
  for (int32_t k = 0; k < a->n_control_preds; k++) {
    hk_attrs *pa = a->control_preds[k]->attrs;
    if (pa) ptrs_remove(pa->control_succs, &pa->n_control_succs, i);
  }
  for (int32_t k = 0; k < a->n_control_succs; k++) {
    hk_attrs *sa = a->control_succs[k]->attrs;
    if (sa) ptrs_remove(sa->control_preds, &sa->n_control_preds, i);
  }
  a->n_control_preds = a->n_control_succs = 0;
  a->control_preds = a->control_succs = NULL;
}

/* ---- removal -------------------------------------------------------------------------------- */

hk_status *hk_instr_remove(hk_instr *i) {
  hk_computation *c = i->parent;
  if (!c) return hk_error(HK_FAILED_PRECONDITION, "instruction %s is not in a computation", i->name);
  if (i->n_users)
    return hk_error(HK_FAILED_PRECONDITION, "cannot remove %s: it still has %d user(s)", i->name,
                    i->n_users);
  if (c->root == i)
    return hk_error(HK_FAILED_PRECONDITION, "cannot remove %s: it is the root of %s", i->name,
                    c->name);
  /* Each distinct operand drops i once; a mark bit finds repeats in O(n). */
  for (int32_t k = 0; k < i->n_operands; k++) {
    hk_instr *op = i->operands[k];
    if (op->flags & HK_IFLAG_MARK) continue;
    op->flags |= HK_IFLAG_MARK;
    remove_user(op, i);
  }
  for (int32_t k = 0; k < i->n_operands; k++) i->operands[k]->flags &= (uint16_t)~HK_IFLAG_MARK;
  hk_instr_detach(i);
  return NULL;
}

/* Parameters are few per computation; the table is scanned only when a
 * parameter is removed. */
static void forget_param(hk_computation *c, const hk_instr *i) {
  if (i->opcode != HK_OP_PARAMETER) return;
  for (int32_t p = 0; p < c->n_params; p++)
    if (c->params[p] == i) c->params[p] = NULL;
}

static void list_unlink(hk_computation *c, hk_instr *i) {
  if (i->prev) i->prev->next = i->next;
  else c->first = i->next;
  if (i->next) i->next->prev = i->prev;
  else c->last = i->prev;
  i->prev = i->next = NULL;
  c->n_instrs--;
}

void hk_instr_detach(hk_instr *i) {
  hk_computation *c = i->parent;
  hk_module_note_change(c->module);
  hk_instr_remove_control_deps(i);
  forget_param(c, i);
  list_unlink(c, i);
  drop_name(i);
  i->parent = NULL;
}

/* ---- queries ----------------------------------------------------------------------------------- */

static bool side_effect_depth(const hk_instr *i, int depth);

/* Whether any instruction of c (or of what it calls) has a side effect; the
 * depth bound only guards against (invalid) recursive call graphs. */
static bool computation_has_side_effect(const hk_computation *c, int depth) {
  if (depth > 64) return false;
  for (const hk_instr *i = c->first; i; i = i->next)
    if (side_effect_depth(i, depth)) return true;
  return false;
}

/* XLA's HloInstruction::HasSideEffectNoRecurse. */
static bool has_side_effect_no_recurse(const hk_instr *i) {
  const hk_attrs *a = i->attrs;
  switch ((hk_opcode)i->opcode) {
    case HK_OP_SEND: case HK_OP_SEND_DONE: case HK_OP_RECV: case HK_OP_RECV_DONE:
    case HK_OP_RNG: case HK_OP_RNG_GET_AND_UPDATE_STATE:
    case HK_OP_INFEED: case HK_OP_OUTFEED:
    case HK_OP_ALL_REDUCE_START: case HK_OP_ALL_REDUCE_DONE:
    case HK_OP_ALL_GATHER_START: case HK_OP_ALL_GATHER_DONE:
    case HK_OP_COLLECTIVE_BROADCAST:
    case HK_OP_COLLECTIVE_PERMUTE_START: case HK_OP_COLLECTIVE_PERMUTE_DONE:
      return true;
    case HK_OP_ALL_TO_ALL: case HK_OP_ALL_GATHER: case HK_OP_ALL_REDUCE:
    case HK_OP_REDUCE_SCATTER:
      if (a && a->constrain_layout) return true;
      /* fall through */
    case HK_OP_COLLECTIVE_PERMUTE: {
      bool spmd = i->parent && i->parent->module->config.use_spmd_partitioning;
      return a && hk_instr_has_channel_id(i) && !spmd;
    }
    case HK_OP_CUSTOM_CALL:
      return a && a->custom_call_has_side_effect;
    default:
      return false;
  }
}

static bool side_effect_depth(const hk_instr *i, int depth) {
  if (has_side_effect_no_recurse(i)) return true;
  for (int32_t k = 0; k < i->n_called; k++)
    if (i->called[k] && computation_has_side_effect(i->called[k], depth + 1)) return true;
  return false;
}

bool hk_instr_has_side_effect(const hk_instr *i) { return side_effect_depth(i, 0); }

int64_t hk_instr_channel_id(const hk_instr *i) { return i->attrs ? i->attrs->channel_id : 0; }

/* XLA's channel_id is optional, and channel_id=0 is present.  The IR's 0
 * means none (ABI), so the parser keeps a written 0 as the raw attribute
 * channel_id=0 beside it: the two together say "present, 0". */
bool hk_instr_has_channel_id(const hk_instr *i) {
  const hk_attrs *a = i->attrs;
  if (!a) return false;
  if (a->channel_id) return true;
  for (int32_t k = 0; k < a->n_raw; k++)
    if (!strcmp(a->raw[k].name, "channel_id")) return true;
  return false;
}

int64_t hk_instr_parameter_number(const hk_instr *i) {
  return i->attrs ? i->attrs->parameter_number : 0;
}

int64_t hk_instr_tuple_index(const hk_instr *i) { return i->attrs ? i->attrs->tuple_index : 0; }

const hk_metadata *hk_instr_metadata(const hk_instr *i) {
  static const hk_metadata empty;
  return i->attrs && i->attrs->metadata ? i->attrs->metadata : &empty;
}

bool hk_instr_is_root(const hk_instr *i) { return i->parent && i->parent->root == i; }
