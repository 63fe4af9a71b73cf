/* gen-transformer.c - prints one training step of a small decoder-only transformer as HLO text,
 * with Megatron-style tensor-parallel and data-parallel shardings on its parameters (the MPI
 * back end's realistic test input).
 *
 * Usage: hk-gen-transformer [--layers=L] [--layers-per-iteration=U] [--batch=B] [--seq=S]
 *                           [--model=D] [--heads=H] [--head-dim=K] [--ffn=F] [--vocab=V]
 *                           [--dp=P] [--tp=T]
 *
 * The step: one-hot embedding (a dot with the table), L pre-norm layers (layer norm, causal
 * multi-head attention with softmax, residual, layer norm, ReLU MLP, residual), final layer
 * norm, tied-free unembedding, softmax cross-entropy loss; then the backward pass with
 * hand-written gradients and an Adam update of every parameter.  The layers' weights are
 * stacked [L, ...]; a forward while loop runs U layers per iteration (L / U iterations) and
 * saves each iteration's input; a backward while loop runs the iterations in reverse,
 * recomputes their forward (rematerialisation) and writes each layer's gradients into stacked
 * gradient buffers (dynamic-update-slice).  The module is the global program: only the entry
 * parameters and the root carry shardings (what sharding propagation starts from), over a
 * P x T device mesh (device = p * T + t): activations split on the batch over P (data
 * parallel), attention heads, the MLP's hidden units and the vocabulary split over T (tensor
 * parallel), every weight replicated over P. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct val {
  char name[24];
  const char *ty;  /* "f32", "s32", "pred" */
  int rank;
  long d[6];
} val;

typedef struct cfg {
  long layers, per_iter, batch, seq, model, heads, head_dim, ffn, vocab, dp, tp;
} cfg;

static cfg C;
static FILE *out;        /* the computation being written */
static long counter;     /* names are unique in the module */

/* ---- shapes and instructions --------------------------------------------------------- */

static void put_shape(FILE *f, const val *v) {
  fprintf(f, "%s[", v->ty);
  for (int i = 0; i < v->rank; i++) fprintf(f, "%s%ld", i ? "," : "", v->d[i]);
  fputc(']', f);
}

static val shape_of(const char *ty, int rank, const long *d) {
  val v = {.ty = ty, .rank = rank};
  for (int i = 0; i < rank; i++) v.d[i] = d[i];
  return v;
}

/* Emits "  name = SHAPE BODY" and returns the value. */
static val emit(val shape, const char *fmt, ...) {
  val v = shape;
  snprintf(v.name, sizeof v.name, "v%ld", counter++);
  fprintf(out, "  %s = ", v.name);
  put_shape(out, &v);
  fputc(' ', out);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(out, fmt, ap);
  va_end(ap);
  fputc('\n', out);
  return v;
}

static val scalar(const char *ty, const char *text) {
  return emit(shape_of(ty, 0, NULL), "constant(%s)", text);
}

static val fconst(double c) {
  char t[40];
  snprintf(t, sizeof t, "%.9g", c);
  return scalar("f32", t);
}

static val iconst(long c) {
  char t[40];
  snprintf(t, sizeof t, "%ld", c);
  return scalar("s32", t);
}

static void dims_text(char *buf, size_t cap, int n, const int *dims) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < n && k < cap; i++) k += (size_t)snprintf(buf + k, cap - k, "%s%d", i ? "," : "", dims[i]);
}

/* broadcast of a into like's shape; dims: the result dims a's dims map to. */
static val bcast(val a, val like, int n, const int *dims) {
  char t[64];
  dims_text(t, sizeof t, n, dims);
  val s = like;
  s.ty = a.ty;
  return emit(s, "broadcast(%s), dimensions={%s}", a.name, t);
}

static val fill(double c, val like) {
  val k = fconst(c);
  return bcast(k, like, 0, NULL);
}

static val binary(const char *op, val a, val b) { return emit(a, "%s(%s, %s)", op, a.name, b.name); }
static val unary(const char *op, val a) { return emit(a, "%s(%s)", op, a.name); }
static val add(val a, val b) { return binary("add", a, b); }
static val sub(val a, val b) { return binary("subtract", a, b); }
static val mul(val a, val b) { return binary("multiply", a, b); }
static val divide(val a, val b) { return binary("divide", a, b); }

/* Multiplies by a scalar constant. */
static val scale(val a, double c) { return mul(a, fill(c, a)); }

static val compare(val a, val b, const char *dir) {
  val s = a;
  s.ty = "pred";
  return emit(s, "compare(%s, %s), direction=%s", a.name, b.name, dir);
}

static val select_(val p, val a, val b) { return emit(a, "select(%s, %s, %s)", p.name, a.name, b.name); }

/* reduce over dims with add or max (an f32 computation named "sum" / "max"). */
static val reduce(val a, int n, const int *dims, const char *how) {
  val s = {.ty = a.ty};
  for (int i = 0; i < a.rank; i++) {
    int gone = 0;
    for (int j = 0; j < n; j++) gone |= dims[j] == i;
    if (!gone) s.d[s.rank++] = a.d[i];
  }
  val init = fconst(strcmp(how, "max") == 0 ? -3.0e38 : 0.0);
  char t[64];
  dims_text(t, sizeof t, n, dims);
  return emit(s, "reduce(%s, %s), dimensions={%s}, to_apply=%s", a.name, init.name, t, how);
}

/* The last dim of a [.., X] reduced, broadcast back over it (softmax, layer norm statistics). */
static val reduce_last(val a, const char *how) { return reduce(a, 1, (int[]){a.rank - 1}, how); }

static val bcast_rows(val stat, val like) {
  int dims[6];
  for (int i = 0; i < stat.rank; i++) dims[i] = i;
  return bcast(stat, like, stat.rank, dims);
}

/* broadcast of a vector [X] along like's last dim. */
static val bcast_last(val vec, val like) { return bcast(vec, like, 1, (int[]){like.rank - 1}); }

typedef struct dnums {
  int nb, nc;
  int lb[3], rb[3], lc[3], rc[3];
} dnums;

static int in_list(int x, int n, const int *l) {
  for (int i = 0; i < n; i++)
    if (l[i] == x) return 1;
  return 0;
}

static val dot(val a, val b, dnums n) {
  val s = {.ty = "f32"};
  for (int i = 0; i < n.nb; i++) s.d[s.rank++] = a.d[n.lb[i]];
  for (int i = 0; i < a.rank; i++)
    if (!in_list(i, n.nb, n.lb) && !in_list(i, n.nc, n.lc)) s.d[s.rank++] = a.d[i];
  for (int i = 0; i < b.rank; i++)
    if (!in_list(i, n.nb, n.rb) && !in_list(i, n.nc, n.rc)) s.d[s.rank++] = b.d[i];
  char lb[32], rb[32], lc[32], rc[32], batch[160] = "";
  dims_text(lb, sizeof lb, n.nb, n.lb);
  dims_text(rb, sizeof rb, n.nb, n.rb);
  dims_text(lc, sizeof lc, n.nc, n.lc);
  dims_text(rc, sizeof rc, n.nc, n.rc);
  if (n.nb) snprintf(batch, sizeof batch, ", lhs_batch_dims={%s}, rhs_batch_dims={%s}", lb, rb);
  return emit(s, "dot(%s, %s)%s, lhs_contracting_dims={%s}, rhs_contracting_dims={%s}", a.name, b.name, batch,
              lc, rc);
}

/* Contracts a's last dim with b's first (x @ W). */
static val matmul(val a, val b) {
  return dot(a, b, (dnums){.nc = 1, .lc = {a.rank - 1}, .rc = {0}});
}

/* The weight gradient: a and b share their leading [B, S] dims, contracted. */
static val outer_grad(val a, val b) { return dot(a, b, (dnums){.nc = 2, .lc = {0, 1}, .rc = {0, 1}}); }

static val transpose(val a, const int *perm) {
  val s = a;
  for (int i = 0; i < a.rank; i++) s.d[i] = a.d[perm[i]];
  char t[64];
  dims_text(t, sizeof t, a.rank, perm);
  return emit(s, "transpose(%s), dimensions={%s}", a.name, t);
}

static val reshape(val a, int rank, const long *d) { return emit(shape_of(a.ty, rank, d), "reshape(%s)", a.name); }

/* [1, X...] -> [X...] and back. */
static val drop_lead(val a) { return reshape(a, a.rank - 1, a.d + 1); }

static val add_lead(val a) {
  long d[6] = {1};
  memcpy(d + 1, a.d, sizeof(long) * (size_t)a.rank);
  return reshape(a, a.rank + 1, d);
}

/* Row index (layer or iteration) of a stacked [N, X...] array. */
static val slice_row(val stack, val index, val zero) {
  val s = stack;
  s.d[0] = 1;
  char idx[128] = "", sizes[64];
  size_t k = 0;
  for (int i = 1; i < stack.rank; i++) k += (size_t)snprintf(idx + k, sizeof idx - k, ", %s", zero.name);
  long sz[6] = {1};
  memcpy(sz + 1, stack.d + 1, sizeof(long) * (size_t)(stack.rank - 1));
  k = 0;
  for (int i = 0; i < stack.rank; i++) k += (size_t)snprintf(sizes + k, sizeof sizes - k, "%s%ld", i ? "," : "", sz[i]);
  val row = emit(s, "dynamic-slice(%s, %s%s), dynamic_slice_sizes={%s}", stack.name, index.name, idx, sizes);
  return drop_lead(row);
}

static val update_row(val stack, val row, val index, val zero) {
  val up = add_lead(row);
  char idx[128] = "";
  size_t k = 0;
  for (int i = 1; i < stack.rank; i++) k += (size_t)snprintf(idx + k, sizeof idx - k, ", %s", zero.name);
  return emit(stack, "dynamic-update-slice(%s, %s, %s%s)", stack.name, up.name, index.name, idx);
}

/* ---- tuples --------------------------------------------------------------------------- */

static void put_tuple_shape(FILE *f, int n, const val *vs) {
  fputc('(', f);
  for (int i = 0; i < n; i++) {
    if (i) fputs(", ", f);
    put_shape(f, &vs[i]);
  }
  fputc(')', f);
}

static char *tuple_shape_text(int n, const val *vs) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  put_tuple_shape(f, n, vs);
  fclose(f);
  return buf;
}

static val tuple(int n, const val *vs) {
  val t = {.ty = "tuple"};
  snprintf(t.name, sizeof t.name, "v%ld", counter++);
  fprintf(out, "  %s = ", t.name);
  put_tuple_shape(out, n, vs);
  fputs(" tuple(", out);
  for (int i = 0; i < n; i++) fprintf(out, "%s%s", i ? ", " : "", vs[i].name);
  fputs(")\n", out);
  return t;
}

/* Unpacks a tuple value whose element shapes are those of shapes[0..n). */
static void untuple(val t, int n, const val *shapes, val *outv) {
  for (int i = 0; i < n; i++) outv[i] = emit(shapes[i], "get-tuple-element(%s), index=%d", t.name, i);
}

/* ---- the model ------------------------------------------------------------------------- */

enum { WQ, WK, WV, WO, W1, C1, W2, C2, G1, B1, G2, B2, NW };

/* The shape of one layer's weight k (without the stacked dim). */
static val weight_shape(int k) {
  long D = C.model, H = C.heads, K = C.head_dim, F = C.ffn;
  switch (k) {
    case WQ: case WK: case WV: return shape_of("f32", 3, (long[]){D, H, K});
    case WO: return shape_of("f32", 3, (long[]){H, K, D});
    case W1: return shape_of("f32", 2, (long[]){D, F});
    case C1: return shape_of("f32", 1, (long[]){F});
    case W2: return shape_of("f32", 2, (long[]){F, D});
    default: return shape_of("f32", 1, (long[]){D});
  }
}

static val stacked_shape(int k) {
  val w = weight_shape(k), s = w;
  s.rank = w.rank + 1;
  s.d[0] = C.layers;
  memcpy(s.d + 1, w.d, sizeof(long) * (size_t)w.rank);
  return s;
}

/* Which dim of layer weight k is split over the tensor-parallel axis (-1: replicated). */
static int weight_tp_dim(int k) {
  switch (k) {
    case WQ: case WK: case WV: return 1;   /* heads */
    case WO: return 0;                     /* heads (row parallel) */
    case W1: case C1: return k == W1 ? 1 : 0;   /* hidden units (column parallel) */
    case W2: return 0;                     /* hidden units (row parallel) */
    default: return -1;
  }
}

/* The sharding text of a rank-r array: dim tp_dim over T, dim dp_dim over P (-1: neither). */
static void sharding_text(char *buf, size_t cap, int rank, int tp_dim, int dp_dim) {
  if (tp_dim < 0 && dp_dim < 0) {
    snprintf(buf, cap, "{replicated}");
    return;
  }
  size_t k = (size_t)snprintf(buf, cap, "{devices=[");
  for (int i = 0; i < rank; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%s%ld", i ? "," : "", i == tp_dim ? C.tp : i == dp_dim ? C.dp : 1);
  if (tp_dim >= 0 && dp_dim >= 0)   /* tile (p, t) is device p * T + t */
    snprintf(buf + k, cap - k, "]<=[%ld]}", C.dp * C.tp);
  else if (tp_dim >= 0)             /* tile t, copy p: device p * T + t */
    snprintf(buf + k, cap - k, ",%ld]<=[%ld,%ld]T(1,0) last_tile_dim_replicate}", C.dp, C.dp, C.tp);
  else                              /* tile p, copy t */
    snprintf(buf + k, cap - k, ",%ld]<=[%ld] last_tile_dim_replicate}", C.tp, C.dp * C.tp);
}

typedef struct consts {
  val zero_i, mask;   /* s32 0; the causal mask pred[B,H,S,S] */
} consts;

static consts make_consts(void) {
  consts c;
  c.zero_i = iconst(0);
  val ss = shape_of("s32", 2, (long[]){C.seq, C.seq});
  val rows = emit(ss, "iota(), iota_dimension=0");
  val cols = emit(ss, "iota(), iota_dimension=1");
  val causal = compare(rows, cols, "GE");
  c.mask = bcast(causal, shape_of("pred", 4, (long[]){C.batch, C.heads, C.seq, C.seq}), 2, (int[]){2, 3});
  return c;
}

/* Layer norm over the last dim: y, and what its gradient needs. */
typedef struct norm {
  val y, xhat, rstd, g;
} norm;

static norm layer_norm(val x, val g, val b) {
  double inv = 1.0 / (double)x.d[x.rank - 1];
  val mean = scale(reduce_last(x, "sum"), inv);
  val cen = sub(x, bcast_rows(mean, x));
  val var = scale(reduce_last(mul(cen, cen), "sum"), inv);
  val rstd = unary("rsqrt", add(var, fill(1e-5, var)));
  val xhat = mul(cen, bcast_rows(rstd, x));
  val y = add(mul(xhat, bcast_last(g, x)), bcast_last(b, x));
  return (norm){y, xhat, rstd, g};
}

/* dx of a layer norm given dy; dg, db out. */
static val layer_norm_grad(norm n, val dy, val *dg, val *db) {
  double inv = 1.0 / (double)dy.d[dy.rank - 1];
  *dg = reduce(mul(dy, n.xhat), 2, (int[]){0, 1}, "sum");
  *db = reduce(dy, 2, (int[]){0, 1}, "sum");
  val dxh = mul(dy, bcast_last(n.g, dy));
  val m1 = scale(reduce_last(dxh, "sum"), inv);
  val m2 = scale(reduce_last(mul(dxh, n.xhat), "sum"), inv);
  val inner = sub(sub(dxh, bcast_rows(m1, dy)), mul(n.xhat, bcast_rows(m2, dy)));
  return mul(bcast_rows(n.rstd, dy), inner);
}

/* What one layer's forward keeps for its backward. */
typedef struct layer_fwd {
  val w[NW];
  val x, x1, out;
  norm n1, n2;
  val q, k, v, p, ctx, u, a;
} layer_fwd;

static const int SWAP12[4] = {0, 2, 1, 3};   /* [B,S,H,K] <-> [B,H,S,K] */

static layer_fwd layer_forward(const consts *c, val x, const val *w) {
  layer_fwd f;
  memcpy(f.w, w, sizeof f.w);
  f.x = x;
  f.n1 = layer_norm(x, w[G1], w[B1]);
  f.q = matmul(f.n1.y, w[WQ]);
  f.k = matmul(f.n1.y, w[WK]);
  f.v = matmul(f.n1.y, w[WV]);
  val sc = dot(f.q, f.k, (dnums){.nb = 2, .lb = {0, 2}, .rb = {0, 2}, .nc = 1, .lc = {3}, .rc = {3}});
  val scs = scale(sc, 1.0 / sqrt((double)C.head_dim));
  val masked = select_(c->mask, scs, fill(-1e9, scs));
  val e = unary("exponential", sub(masked, bcast_rows(reduce_last(masked, "max"), masked)));
  f.p = divide(e, bcast_rows(reduce_last(e, "sum"), e));
  f.ctx = dot(f.p, f.v, (dnums){.nb = 2, .lb = {0, 1}, .rb = {0, 2}, .nc = 1, .lc = {3}, .rc = {1}});
  val attn = dot(f.ctx, w[WO], (dnums){.nc = 2, .lc = {1, 3}, .rc = {0, 1}});
  f.x1 = add(x, attn);
  f.n2 = layer_norm(f.x1, w[G2], w[B2]);
  val u0 = matmul(f.n2.y, w[W1]);
  f.u = add(u0, bcast_last(w[C1], u0));
  f.a = binary("maximum", f.u, fill(0, f.u));
  val y = add(matmul(f.a, w[W2]), bcast_last(w[C2], x));
  f.out = add(f.x1, y);
  return f;
}

/* The layer's backward: dx from dout; the weights' gradients into g[]. */
static val layer_backward(const consts *c, const layer_fwd *f, val dout, val *g) {
  const val *w = f->w;
  /* MLP */
  g[C2] = reduce(dout, 2, (int[]){0, 1}, "sum");
  g[W2] = outer_grad(f->a, dout);
  val da = dot(dout, w[W2], (dnums){.nc = 1, .lc = {2}, .rc = {1}});
  val du = select_(compare(f->u, fill(0, f->u), "GT"), da, fill(0, da));
  g[C1] = reduce(du, 2, (int[]){0, 1}, "sum");
  g[W1] = outer_grad(f->n2.y, du);
  val dh2 = dot(du, w[W1], (dnums){.nc = 1, .lc = {2}, .rc = {1}});
  val dx1 = add(dout, layer_norm_grad(f->n2, dh2, &g[G2], &g[B2]));
  /* attention */
  g[WO] = dot(f->ctx, dx1, (dnums){.nc = 2, .lc = {0, 2}, .rc = {0, 1}});
  val dctx = transpose(dot(dx1, w[WO], (dnums){.nc = 1, .lc = {2}, .rc = {2}}), SWAP12);
  val dp = dot(dctx, f->v, (dnums){.nb = 2, .lb = {0, 1}, .rb = {0, 2}, .nc = 1, .lc = {3}, .rc = {3}});
  val dv = transpose(dot(f->p, dctx, (dnums){.nb = 2, .lb = {0, 1}, .rb = {0, 1}, .nc = 1, .lc = {2}, .rc = {2}}),
                     SWAP12);
  val rowdot = reduce_last(mul(dp, f->p), "sum");
  val ds = mul(f->p, sub(dp, bcast_rows(rowdot, dp)));
  val dsc = scale(select_(c->mask, ds, fill(0, ds)), 1.0 / sqrt((double)C.head_dim));
  val dq = transpose(dot(dsc, f->k, (dnums){.nb = 2, .lb = {0, 1}, .rb = {0, 2}, .nc = 1, .lc = {3}, .rc = {1}}),
                     SWAP12);
  val dk = transpose(dot(dsc, f->q, (dnums){.nb = 2, .lb = {0, 1}, .rb = {0, 2}, .nc = 1, .lc = {2}, .rc = {1}}),
                     SWAP12);
  g[WQ] = outer_grad(f->n1.y, dq);
  g[WK] = outer_grad(f->n1.y, dk);
  g[WV] = outer_grad(f->n1.y, dv);
  dnums back = {.nc = 2, .lc = {2, 3}, .rc = {1, 2}};
  val dh = add(add(dot(dq, w[WQ], back), dot(dk, w[WK], back)), dot(dv, w[WV], back));
  return add(dx1, layer_norm_grad(f->n1, dh, &g[G1], &g[B1]));
}

static val act_shape(void) { return shape_of("f32", 3, (long[]){C.batch, C.seq, C.model}); }
static val saved_shape(void) {
  return shape_of("f32", 4, (long[]){C.layers / C.per_iter, C.batch, C.seq, C.model});
}
static val counter_shape(void) { return shape_of("s32", 0, NULL); }

/* Layer j of iteration i: i * U + j. */
static val layer_index(val i, int j) {
  return add(binary("multiply", i, iconst(C.per_iter)), iconst(j));
}

static void slice_weights(val i, int j, const val *stacks, val zero, val *w) {
  val l = layer_index(i, j);
  for (int k = 0; k < NW; k++) w[k] = slice_row(stacks[k], l, zero);
}

/* Writes a computation's text to stdout after its body was built in a memstream. */
typedef struct comp_buf {
  char *text;
  size_t len;
} comp_buf;

static FILE *begin(comp_buf *cb) {
  cb->text = NULL;
  return out = open_memstream(&cb->text, &cb->len);
}

static void end(comp_buf *cb, const char *header) {
  fclose(out);
  printf("%s {\n%s}\n\n", header, cb->text);
  free(cb->text);
}

/* The condition of a loop over iterations: i < n (counting up) or i >= 0 (down). */
static void emit_cond(const char *name, int n, const val *state, int up) {
  char *ts = tuple_shape_text(n, state);
  comp_buf cb;
  begin(&cb);
  fprintf(out, "  st = %s parameter(0)\n", ts);
  fprintf(out, "  i = s32[] get-tuple-element(st), index=0\n");
  fprintf(out, "  n = s32[] constant(%ld)\n", up ? C.layers / C.per_iter : 0L);
  fprintf(out, "  ROOT lt = pred[] compare(i, n), direction=%s\n", up ? "LT" : "GE");
  end(&cb, name);
  free(ts);
}

/* A loop body's start: its tuple parameter unpacked into s[0..n) and the
 * constants every layer uses; *ts is the state's shape text. */
static consts begin_body(comp_buf *cb, int n, const val *state, val *s, char **ts) {
  *ts = tuple_shape_text(n, state);
  begin(cb);
  fprintf(out, "  st = %s parameter(0)\n", *ts);
  val st = {.name = "st", .ty = "tuple"};
  untuple(st, n, state, s);
  return make_consts();
}

/* A loop body's end: the next state as its root. */
static void end_body(comp_buf *cb, char *ts, int n, const val *next, const char *name) {
  val t = tuple(n, next);
  fprintf(out, "  ROOT done = %s copy(%s)\n", ts, t.name);
  end(cb, name);
  free(ts);
}

/* forward body: (i, x, saved, W...) -> (i+1, x after U layers, saved with x at i, W...) */
static void emit_forward_body(const val *state, int n) {
  comp_buf cb;
  char *ts;
  val s[3 + NW];
  consts c = begin_body(&cb, n, state, s, &ts);
  val i = s[0], x = s[1], saved = update_row(s[2], s[1], s[0], c.zero_i);
  for (int j = 0; j < C.per_iter; j++) {
    val w[NW];
    slice_weights(i, j, s + 3, c.zero_i, w);
    x = layer_forward(&c, x, w).out;
  }
  val next[3 + NW];
  memcpy(next, s, sizeof next);
  next[0] = add(i, iconst(1));
  next[1] = x;
  next[2] = saved;
  end_body(&cb, ts, n, next, "forward_body");
}

/* backward body: (i, dx, saved, W..., G...) -> (i-1, dx before iteration i, saved, W..., G with the
 * gradients of layers i*U .. i*U+U-1) */
static void emit_backward_body(const val *state, int n) {
  comp_buf cb;
  char *ts;
  val s[3 + 2 * NW];
  consts c = begin_body(&cb, n, state, s, &ts);
  val i = s[0], dx = s[1], x = slice_row(s[2], i, c.zero_i);
  layer_fwd f[16];
  for (int j = 0; j < C.per_iter; j++) {   /* rematerialise the iteration's forward */
    val w[NW];
    slice_weights(i, j, s + 3, c.zero_i, w);
    f[j] = layer_forward(&c, x, w);
    x = f[j].out;
  }
  val next[3 + 2 * NW];
  memcpy(next, s, sizeof next);
  for (int j = C.per_iter - 1; j >= 0; j--) {
    val g[NW];
    dx = layer_backward(&c, &f[j], dx, g);
    val l = layer_index(i, j);
    for (int k = 0; k < NW; k++) next[3 + NW + k] = update_row(next[3 + NW + k], g[k], l, c.zero_i);
  }
  next[0] = sub(i, iconst(1));
  next[1] = dx;
  end_body(&cb, ts, n, next, "backward_body");
}

static void emit_reducers(void) {
  printf("sum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)\n}\n\n");
  printf("max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] maximum(a, b)\n}\n\n");
}

/* The trainable parameters: the NW layer stacks, then the embedding, unembedding and final norm. */
enum { P_EMBED = NW, P_UNEMBED, P_GF, P_BF, NP };

static val param_shape(int k) {
  switch (k) {
    case P_EMBED: return shape_of("f32", 2, (long[]){C.vocab, C.model});
    case P_UNEMBED: return shape_of("f32", 2, (long[]){C.model, C.vocab});
    case P_GF: case P_BF: return shape_of("f32", 1, (long[]){C.model});
    default: return stacked_shape(k);
  }
}

static void param_sharding(int k, char *buf, size_t cap) {
  int tp = k == P_EMBED ? 0 : k == P_UNEMBED ? 1 : k < NW && weight_tp_dim(k) >= 0 ? weight_tp_dim(k) + 1 : -1;
  sharding_text(buf, cap, param_shape(k).rank, tp, -1);
}

static val one_hot(val ids) {
  val like = shape_of("s32", 3, (long[]){C.batch, C.seq, C.vocab});
  val masked = binary("and", ids, bcast(iconst(C.vocab - 1), ids, 0, NULL));   /* ids into [0, V) */
  val eq = compare(bcast(masked, like, 2, (int[]){0, 1}), emit(like, "iota(), iota_dimension=2"), "EQ");
  return emit(shape_of("f32", 3, like.d), "convert(%s)", eq.name);
}

/* One Adam step of parameter p with gradient g and moments m, v (bias corrections c1, c2). */
static void adam(val p, val g, val m, val v, val c1, val c2, val *np, val *nm, val *nv) {
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  *nm = add(scale(m, b1), scale(g, 1 - b1));
  /* The inputs are random in [-1, 1): the second moment is read as |v| (the identity on every
   * state Adam produces), so that sqrt sees no negative number. */
  *nv = add(scale(unary("abs", v), b2), scale(mul(g, g), 1 - b2));
  val mhat = divide(*nm, bcast(c1, p, 0, NULL));
  val vhat = divide(*nv, bcast(c2, p, 0, NULL));
  val den = add(unary("sqrt", vhat), fill(eps, p));
  *np = sub(p, scale(divide(mhat, den), lr));
}

static void emit_entry(void) {
  comp_buf cb;
  begin(&cb);
  val p[NP], m[NP], v[NP];
  char sh[160];
  int idx = 0;
  for (int k = 0; k < NP; k++) {
    param_sharding(k, sh, sizeof sh);
    val s = param_shape(k);
    p[k] = emit(s, "parameter(%d), sharding=%s", idx++, sh);
  }
  for (int k = 0; k < NP; k++) {
    param_sharding(k, sh, sizeof sh);
    m[k] = emit(param_shape(k), "parameter(%d), sharding=%s", idx++, sh);
  }
  for (int k = 0; k < NP; k++) {
    param_sharding(k, sh, sizeof sh);
    v[k] = emit(param_shape(k), "parameter(%d), sharding=%s", idx++, sh);
  }
  char tok_sh[160];
  sharding_text(tok_sh, sizeof tok_sh, 2, -1, 0);
  val ids_shape = shape_of("s32", 2, (long[]){C.batch, C.seq});
  val tokens = emit(ids_shape, "parameter(%d), sharding=%s", idx++, tok_sh);
  val targets = emit(ids_shape, "parameter(%d), sharding=%s", idx++, tok_sh);
  val step = emit(shape_of("s32", 0, NULL), "parameter(%d), sharding={replicated}", idx++);

  /* forward */
  val zero_i = iconst(0);
  val onehot = one_hot(tokens);
  val x0 = matmul(onehot, p[P_EMBED]);
  val fstate[3 + NW];
  fstate[0] = zero_i;
  fstate[1] = x0;
  fstate[2] = fill(0, saved_shape());
  for (int k = 0; k < NW; k++) fstate[3 + k] = p[k];
  val ft = tuple(3 + NW, fstate);
  char *fts = tuple_shape_text(3 + NW, fstate);
  val fw = {.ty = "tuple"};
  snprintf(fw.name, sizeof fw.name, "v%ld", counter++);
  fprintf(out, "  %s = %s while(%s), condition=forward_cond, body=forward_body\n", fw.name, fts, ft.name);
  free(fts);
  val fo[3 + NW];
  untuple(fw, 3 + NW, fstate, fo);
  norm nf = layer_norm(fo[1], p[P_GF], p[P_BF]);
  val logits = matmul(nf.y, p[P_UNEMBED]);
  val shifted = sub(logits, bcast_rows(reduce_last(logits, "max"), logits));
  val ex = unary("exponential", shifted);
  val se = reduce_last(ex, "sum");
  val probs = divide(ex, bcast_rows(se, ex));
  val target = one_hot(targets);
  val nll = sub(unary("log", se), reduce_last(mul(shifted, target), "sum"));
  double inv_tokens = 1.0 / (double)(C.batch * C.seq);
  val loss = scale(reduce(nll, 2, (int[]){0, 1}, "sum"), inv_tokens);

  /* backward */
  val grad[NP];
  val dlogits = scale(sub(probs, target), inv_tokens);
  grad[P_UNEMBED] = outer_grad(nf.y, dlogits);
  val dhf = dot(dlogits, p[P_UNEMBED], (dnums){.nc = 1, .lc = {2}, .rc = {1}});
  val dxl = layer_norm_grad(nf, dhf, &grad[P_GF], &grad[P_BF]);
  val bstate[3 + 2 * NW];
  bstate[0] = iconst(C.layers / C.per_iter - 1);
  bstate[1] = dxl;
  bstate[2] = fo[2];
  for (int k = 0; k < NW; k++) {
    bstate[3 + k] = p[k];
    bstate[3 + NW + k] = fill(0, stacked_shape(k));
  }
  val bt = tuple(3 + 2 * NW, bstate);
  char *bts = tuple_shape_text(3 + 2 * NW, bstate);
  val bw = {.ty = "tuple"};
  snprintf(bw.name, sizeof bw.name, "v%ld", counter++);
  fprintf(out, "  %s = %s while(%s), condition=backward_cond, body=backward_body\n", bw.name, bts, bt.name);
  free(bts);
  val bo[3 + 2 * NW];
  untuple(bw, 3 + 2 * NW, bstate, bo);
  for (int k = 0; k < NW; k++) grad[k] = bo[3 + NW + k];
  grad[P_EMBED] = outer_grad(onehot, bo[1]);

  /* Adam: bias corrections 1 - beta^t with t = max(step, 0) + 1 */
  val t = emit(shape_of("f32", 0, NULL), "convert(%s)",
               add(binary("maximum", step, zero_i), iconst(1)).name);
  val c1 = sub(fconst(1), unary("exponential", mul(t, fconst(-0.105360516))));    /* ln 0.9 */
  val c2 = sub(fconst(1), unary("exponential", mul(t, fconst(-0.0010005003))));   /* ln 0.999 */
  val res[1 + 3 * NP];
  res[0] = loss;
  for (int k = 0; k < NP; k++) adam(p[k], grad[k], m[k], v[k], c1, c2, &res[1 + k], &res[1 + NP + k], &res[1 + 2 * NP + k]);
  char *rts = tuple_shape_text(1 + 3 * NP, res);
  fprintf(out, "  ROOT result = %s tuple(", rts);
  for (int k = 0; k < 1 + 3 * NP; k++) fprintf(out, "%s%s", k ? ", " : "", res[k].name);
  fputs("), sharding={{replicated}", out);
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < NP; k++) {
      param_sharding(k, sh, sizeof sh);
      fprintf(out, ", %s", sh);
    }
  fputs("}\n", out);
  free(rts);
  end(&cb, "ENTRY main");
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: hk-gen-transformer [--layers=L] [--layers-per-iteration=U] [--batch=B] [--seq=S]\n"
          "                          [--model=D] [--heads=H] [--head-dim=K] [--ffn=F] [--vocab=V]\n"
          "                          [--dp=P] [--tp=T]\n"
          "  defaults: --layers=8 --layers-per-iteration=4 --batch=4 --seq=8 --model=32 --heads=4\n"
          "  --head-dim=8 --ffn=64 --vocab=64 --dp=2 --tp=4 (8 devices); U divides L, U <= 16,\n"
          "  P divides B, T divides H, F and V, V a power of two\n");
}

static int parse_long(const char *arg, const char *name, long *v) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0 || arg[n] != '=') return 0;
  char *end;
  *v = strtol(arg + n + 1, &end, 10);
  if (*end || *v <= 0) {
    fprintf(stderr, "hk-gen-transformer: %s needs a positive integer\n", name);
    exit(2);
  }
  return 1;
}

int main(int argc, char **argv) {
  C = (cfg){.layers = 8, .per_iter = 4, .batch = 4, .seq = 8, .model = 32, .heads = 4, .head_dim = 8,
            .ffn = 64, .vocab = 64, .dp = 2, .tp = 4};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    }
    if (!(parse_long(a, "--layers", &C.layers) || parse_long(a, "--layers-per-iteration", &C.per_iter) ||
          parse_long(a, "--batch", &C.batch) || parse_long(a, "--seq", &C.seq) ||
          parse_long(a, "--model", &C.model) || parse_long(a, "--heads", &C.heads) ||
          parse_long(a, "--head-dim", &C.head_dim) || parse_long(a, "--ffn", &C.ffn) ||
          parse_long(a, "--vocab", &C.vocab) || parse_long(a, "--dp", &C.dp) || parse_long(a, "--tp", &C.tp))) {
      fprintf(stderr, "hk-gen-transformer: unknown argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (C.layers % C.per_iter || C.per_iter > 16 || C.batch % C.dp || C.heads % C.tp || C.ffn % C.tp ||
      C.vocab % C.tp || (C.vocab & (C.vocab - 1))) {
    fprintf(stderr, "hk-gen-transformer: the sizes do not fit together\n");
    usage(stderr);
    return 2;
  }
  static char outbuf[1 << 20];
  setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
  printf("HloModule transformer_train_step, num_partitions=%ld\n\n", C.dp * C.tp);
  emit_reducers();
  val fstate[3 + NW], bstate[3 + 2 * NW];
  fstate[0] = bstate[0] = counter_shape();
  fstate[1] = bstate[1] = act_shape();
  fstate[2] = bstate[2] = saved_shape();
  for (int k = 0; k < NW; k++) {
    fstate[3 + k] = bstate[3 + k] = stacked_shape(k);
    bstate[3 + NW + k] = stacked_shape(k);
  }
  emit_cond("forward_cond", 3 + NW, fstate, 1);
  emit_forward_body(fstate, 3 + NW);
  emit_cond("backward_cond", 3 + 2 * NW, bstate, 0);
  emit_backward_body(bstate, 3 + 2 * NW);
  emit_entry();
  if (fflush(stdout) != 0 || ferror(stdout)) {
    perror("hk-gen-transformer: write");
    return 2;
  }
  return 0;
}
