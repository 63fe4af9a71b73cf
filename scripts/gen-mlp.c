/* gen-mlp.c - prints a stack of sharded Megatron-style MLP layers as HLO text (benchmark input).
 *
 * Usage: hk-gen-mlp [--layers=N | --instructions=N] [--width=W] [--batch=B]
 *                   [--devices=D] [--annotate=all|params] [--form=long|short]
 *                   [--weights=shared|per-layer]
 *
 * Every layer has exactly LAYER_INSTRS instructions: dot with the column-
 * sharded first weight, bias add, relu (maximum with a broadcast zero), dot
 * with the row-sharded second weight, residual add and a layer norm (two
 * reduces, broadcasts and elementwise ops).  The weights are parameters
 * shared by all layers, so the entry signature stays small and the module's
 * size is set by --layers alone: PREAMBLE_INSTRS + layers * LAYER_INSTRS
 * entry instructions (plus 3 in the reduction computation).  With
 * --weights=per-layer every layer has its own three weight parameters
 * (w1.L, b1.L, w2.L: LAYER_INSTRS + 3 instructions a layer), the
 * many-parameter module: an entry signature of 3 * layers + 1 parameters.
 *
 * --annotate=all gives every entry instruction a sharding (what the
 * partitioner consumes); --annotate=params shards only the parameters and
 * the root (what sharding propagation starts from). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAYER_INSTRS 20
#define PREAMBLE_INSTRS 7

typedef struct gen {
  long layers;
  long width, ffn, batch, devices;
  int annotate_all;
  int long_form;
  int per_layer;   /* each layer its own weight parameters */
  /* shape strings, e.g. "f32[8,256]{1,0}" */
  char s_bw[64], s_bf[64], s_wf[64], s_fw[64], s_f[64], s_b[64], s_scalar[16];
  char col[64], row[64], vec[64];  /* sharding texts */
} gen;

static const char *REP = "{replicated}";

static void shape_2d(char *out, size_t cap, long a, long b, int layout) {
  snprintf(out, cap, "f32[%ld,%ld]%s", a, b, layout ? "{1,0}" : "");
}

static void shape_1d(char *out, size_t cap, long a, int layout) {
  snprintf(out, cap, "f32[%ld]%s", a, layout ? "{0}" : "");
}

static void setup(gen *g) {
  shape_2d(g->s_bw, sizeof g->s_bw, g->batch, g->width, 1);
  shape_2d(g->s_bf, sizeof g->s_bf, g->batch, g->ffn, 1);
  shape_2d(g->s_wf, sizeof g->s_wf, g->width, g->ffn, 1);
  shape_2d(g->s_fw, sizeof g->s_fw, g->ffn, g->width, 1);
  shape_1d(g->s_f, sizeof g->s_f, g->ffn, 1);
  shape_1d(g->s_b, sizeof g->s_b, g->batch, 1);
  snprintf(g->s_scalar, sizeof g->s_scalar, "f32[]");
  snprintf(g->col, sizeof g->col, "{devices=[1,%ld]<=[%ld]}", g->devices, g->devices);
  snprintf(g->row, sizeof g->row, "{devices=[%ld,1]<=[%ld]}", g->devices, g->devices);
  snprintf(g->vec, sizeof g->vec, "{devices=[%ld]<=[%ld]}", g->devices, g->devices);
}

/* An operand reference: "f32[8,256]{1,0} %name.L" (long) or "name.L" (short). */
typedef struct ref {
  const char *shape;
  const char *name;
  long layer;  /* -1: no ".L" suffix */
} ref;

static void put_ref(const gen *g, ref r) {
  if (g->long_form) printf("%s %%", r.shape);
  if (r.layer >= 0) printf("%s.%ld", r.name, r.layer);
  else fputs(r.name, stdout);
}

/* Prints one instruction line.  sharding NULL: never sharded; is_param /
 * is_root decide whether --annotate=params keeps it. */
static void emit(const gen *g, ref self, const char *op, int n, const ref *ops,
                 const char *attrs, const char *sharding, int keep_sharding, int root) {
  fputs(root ? "  ROOT " : "  ", stdout);
  if (g->long_form) putchar('%');
  if (self.layer >= 0) printf("%s.%ld", self.name, self.layer);
  else fputs(self.name, stdout);
  printf(" = %s %s(", self.shape, op);
  for (int i = 0; i < n; i++) {
    if (i) fputs(", ", stdout);
    put_ref(g, ops[i]);
  }
  putchar(')');
  if (attrs) fputs(attrs, stdout);
  if (sharding && (g->annotate_all || keep_sharding)) printf(", sharding=%s", sharding);
  putchar('\n');
}

static void emit_leaf(const gen *g, const char *name, const char *shape, const char *body,
                      const char *sharding, int keep) {
  printf("  %s%s = %s %s", g->long_form ? "%" : "", name, shape, body);
  if (g->annotate_all || keep) printf(", sharding=%s", sharding);
  putchar('\n');
}

/* The weights' parameter list after x: "SEP w1 SEP b1 SEP w2" once, or
 * per layer; with names ("w1.3: f32[..]") or shapes only. */
static void put_weights(const gen *g, int named) {
  long n = g->per_layer ? g->layers : 1;
  for (long l = 0; l < n; l++) {
    const char *names[3] = {"w1", "b1", "w2"};
    const char *shapes[3] = {g->s_wf, g->s_f, g->s_fw};
    for (int k = 0; k < 3; k++) {
      fputs(", ", stdout);
      long index = 1 + 3 * l + k;   /* x is 0; XLA's layout marks every fifth */
      if (!named && index % 5 == 0) printf("/*index=%ld*/", index);
      if (named && g->per_layer) printf("%s.%ld: ", names[k], l);
      else if (named) printf("%s: ", names[k]);
      if (named) {   /* the signature's shapes carry no layout */
        char dims[64];
        snprintf(dims, sizeof dims, "%s", shapes[k]);
        char *brace = strchr(dims, '{');
        if (brace) *brace = 0;
        fputs(dims, stdout);
      } else {
        fputs(shapes[k], stdout);
      }
    }
  }
}

static void emit_header(const gen *g) {
  printf("HloModule mlp_stack_%ld, entry_computation_layout={(%s", g->layers, g->s_bw);
  put_weights(g, 0);
  printf(")->%s}, num_partitions=%ld\n\n", g->s_bw, g->devices);
  if (g->long_form) {
    printf("%%add_f32 (lhs: f32[], rhs: f32[]) -> f32[] {\n"
           "  %%lhs = f32[] parameter(0)\n"
           "  %%rhs = f32[] parameter(1)\n"
           "  ROOT %%add = f32[] add(f32[] %%lhs, f32[] %%rhs)\n"
           "}\n\n");
    printf("ENTRY %%main (x: f32[%ld,%ld]", g->batch, g->width);
    put_weights(g, 1);
    printf(") -> f32[%ld,%ld] {\n", g->batch, g->width);
  } else {
    printf("add_f32 {\n"
           "  lhs = f32[] parameter(0)\n"
           "  rhs = f32[] parameter(1)\n"
           "  ROOT add = f32[] add(lhs, rhs)\n"
           "}\n\n"
           "ENTRY main {\n");
  }
}

/* Weight k (0 w1, 1 b1, 2 w2) of layer l: "w1" shared, "w1.L" per layer. */
static void emit_weight(const gen *g, int k, long l) {
  static const char *names[3] = {"w1", "b1", "w2"};
  const char *shapes[3] = {g->s_wf, g->s_f, g->s_fw};
  const char *shardings[3] = {g->col, g->vec, g->row};
  char name[48], body[48];
  if (g->per_layer) snprintf(name, sizeof name, "%s.%ld", names[k], l);
  else snprintf(name, sizeof name, "%s", names[k]);
  snprintf(body, sizeof body, "parameter(%ld)", 1 + k + (g->per_layer ? 3 * l : 0));
  emit_leaf(g, name, shapes[k], body, shardings[k], 1);
}

/* The parameters and constants every layer shares, by name. */
static void emit_shared(const gen *g, const char *name) {
  if (strcmp(name, "x") == 0) emit_leaf(g, "x", g->s_bw, "parameter(0)", REP, 1);
  else if (strcmp(name, "w1") == 0) emit_weight(g, 0, 0);
  else if (strcmp(name, "b1") == 0) emit_weight(g, 1, 0);
  else if (strcmp(name, "w2") == 0) emit_weight(g, 2, 0);
  else if (strcmp(name, "zero") == 0) emit_leaf(g, "zero", g->s_scalar, "constant(0)", REP, 0);
  else if (strcmp(name, "eps") == 0) emit_leaf(g, "eps", g->s_scalar, "constant(1e-05)", REP, 0);
  else if (strcmp(name, "inv_n") == 0) {
    char inv[64];
    snprintf(inv, sizeof inv, "constant(%.9g)", 1.0 / (double)g->width);
    emit_leaf(g, "inv_n", g->s_scalar, inv, REP, 0);
  }
}

/* One layer: h (the previous layer's output) -> norm.L.  Layers come in
 * the order XLA prints (its post order from the root), so the shared
 * parameters and constants are printed in layer 0, just before their first
 * use: the text is a fixed point of parse and print, like an XLA dump. */
static void emit_layer(const gen *g, long l, ref h, int last) {
#define FIRST_USE(name)                                                  \
  if (l == 0) emit_shared(g, name);                                      \
  else if (g->per_layer && name[0] == 'w') emit_weight(g, name[1] == '1' ? 0 : 2, l); \
  else if (g->per_layer && name[0] == 'b') emit_weight(g, 1, l)
  const char *to_apply = g->long_form ? ", dimensions={1}, to_apply=%add_f32"
                                      : ", dimensions={1}, to_apply=add_f32";
  long wl = g->per_layer ? l : -1;
  ref w1 = {g->s_wf, "w1", wl}, b1 = {g->s_f, "b1", wl}, w2 = {g->s_fw, "w2", wl};
  ref zero = {g->s_scalar, "zero", -1}, inv = {g->s_scalar, "inv_n", -1};
  ref eps = {g->s_scalar, "eps", -1};
  ref dot1 = {g->s_bf, "dot1", l}, bias = {g->s_bf, "bias", l}, pre = {g->s_bf, "pre", l};
  ref zeros = {g->s_bf, "zeros", l}, relu = {g->s_bf, "relu", l};
  ref dot2 = {g->s_bw, "dot2", l}, res = {g->s_bw, "residual", l};
  ref sum = {g->s_b, "sum", l}, invb = {g->s_b, "inv_n_b", l}, mean = {g->s_b, "mean", l};
  ref meanb = {g->s_bw, "mean_b", l}, cen = {g->s_bw, "centered", l};
  ref sq = {g->s_bw, "square", l}, vs = {g->s_b, "var_sum", l}, var = {g->s_b, "var", l};
  ref epsb = {g->s_b, "eps_b", l}, ve = {g->s_b, "var_eps", l}, rs = {g->s_b, "rstd", l};
  ref rsb = {g->s_bw, "rstd_b", l}, norm = {g->s_bw, "norm", l};
  const char *dnums = ", lhs_contracting_dims={1}, rhs_contracting_dims={0}";

  FIRST_USE("x");
  FIRST_USE("w1");
  emit(g, dot1, "dot", 2, (ref[]){h, w1}, dnums, g->col, 0, 0);
  FIRST_USE("b1");
  emit(g, bias, "broadcast", 1, (ref[]){b1}, ", dimensions={1}", g->col, 0, 0);
  emit(g, pre, "add", 2, (ref[]){dot1, bias}, NULL, g->col, 0, 0);
  FIRST_USE("zero");
  emit(g, zeros, "broadcast", 1, (ref[]){zero}, ", dimensions={}", g->col, 0, 0);
  emit(g, relu, "maximum", 2, (ref[]){pre, zeros}, NULL, g->col, 0, 0);
  FIRST_USE("w2");
  emit(g, dot2, "dot", 2, (ref[]){relu, w2}, dnums, REP, 0, 0);
  emit(g, res, "add", 2, (ref[]){dot2, h}, NULL, REP, 0, 0);
  emit(g, sum, "reduce", 2, (ref[]){res, zero}, to_apply, REP, 0, 0);
  FIRST_USE("inv_n");
  emit(g, invb, "broadcast", 1, (ref[]){inv}, ", dimensions={}", REP, 0, 0);
  emit(g, mean, "multiply", 2, (ref[]){sum, invb}, NULL, REP, 0, 0);
  emit(g, meanb, "broadcast", 1, (ref[]){mean}, ", dimensions={0}", REP, 0, 0);
  emit(g, cen, "subtract", 2, (ref[]){res, meanb}, NULL, REP, 0, 0);
  emit(g, sq, "multiply", 2, (ref[]){cen, cen}, NULL, REP, 0, 0);
  emit(g, vs, "reduce", 2, (ref[]){sq, zero}, to_apply, REP, 0, 0);
  emit(g, var, "multiply", 2, (ref[]){vs, invb}, NULL, REP, 0, 0);
  FIRST_USE("eps");
  emit(g, epsb, "broadcast", 1, (ref[]){eps}, ", dimensions={}", REP, 0, 0);
  emit(g, ve, "add", 2, (ref[]){var, epsb}, NULL, REP, 0, 0);
  emit(g, rs, "rsqrt", 1, (ref[]){ve}, NULL, REP, 0, 0);
  emit(g, rsb, "broadcast", 1, (ref[]){rs}, ", dimensions={0}", REP, 0, 0);
  emit(g, norm, "multiply", 2, (ref[]){cen, rsb}, NULL, REP, last, last);
#undef FIRST_USE
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: hk-gen-mlp [--layers=N | --instructions=N] [--width=W] [--batch=B]\n"
          "                  [--devices=D] [--annotate=all|params] [--form=long|short]\n"
          "                  [--weights=shared|per-layer]\n"
          "  %d instructions per layer (+3 with per-layer weights) + %d; defaults: --layers=2\n"
          "  --width=256 --batch=8 --devices=8 --annotate=all --form=long --weights=shared\n",
          LAYER_INSTRS, PREAMBLE_INSTRS);
}

static int parse_long(const char *arg, const char *name, long *out) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0 || arg[n] != '=') return 0;
  char *end;
  long v = strtol(arg + n + 1, &end, 10);
  if (*end || v <= 0) {
    fprintf(stderr, "hk-gen-mlp: %s needs a positive integer\n", name);
    exit(2);
  }
  *out = v;
  return 1;
}

int main(int argc, char **argv) {
  gen g = {.layers = 2, .width = 256, .batch = 8, .devices = 8, .annotate_all = 1, .long_form = 1};
  long instrs = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (parse_long(a, "--layers", &g.layers) || parse_long(a, "--width", &g.width) ||
        parse_long(a, "--batch", &g.batch) || parse_long(a, "--devices", &g.devices) ||
        parse_long(a, "--instructions", &instrs))
      continue;
    if (strcmp(a, "--annotate=all") == 0) g.annotate_all = 1;
    else if (strcmp(a, "--annotate=params") == 0) g.annotate_all = 0;
    else if (strcmp(a, "--form=long") == 0) g.long_form = 1;
    else if (strcmp(a, "--form=short") == 0) g.long_form = 0;
    else if (strcmp(a, "--weights=shared") == 0) g.per_layer = 0;
    else if (strcmp(a, "--weights=per-layer") == 0) g.per_layer = 1;
    else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "hk-gen-mlp: unknown argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  long per = LAYER_INSTRS + (g.per_layer ? 3 : 0);
  if (instrs) g.layers = instrs > PREAMBLE_INSTRS + per ? (instrs - PREAMBLE_INSTRS + per / 2) / per : 1;
  g.ffn = 4 * g.width;
  setup(&g);
  static char outbuf[1 << 20];
  setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
  emit_header(&g);
  ref h = {g.s_bw, "x", -1};
  for (long l = 0; l < g.layers; l++) {
    emit_layer(&g, l, h, l == g.layers - 1);
    h = (ref){g.s_bw, "norm", l};
  }
  fputs("}\n\n", stdout);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    perror("hk-gen-mlp: write");
    return 2;
  }
  return 0;
}
