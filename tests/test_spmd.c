/* test_spmd.c - Check tests of the spmd-partitioning plugin: the driver
 * contract (seed messages, RET_CHECKs, options, threshold gate, channel
 * ids, recorded shardings), the extension vtable, and rewrites (Megatron
 * MLP, reshards) checked against the evaluator-free structure. */
#include "hlokit/spmd.h"
#include "pipeline/pipeline.h"
#include "testutil.h"

static hk_registry *reg;

static void load_plugins(void) {
  char path[4096];
  reg = hk_registry_new();
  hk_test_plugin_path("stock", path, sizeof path);
  ck_assert_ok(hk_plugin_load(reg, path, HK_ORIGIN_EXPLICIT));
  hk_test_plugin_path("spmd", path, sizeof path);
  ck_assert_ok(hk_plugin_load(reg, path, HK_ORIGIN_EXPLICIT));
}

static void unload_plugins(void) { hk_registry_free(reg); }

static hk_pass *make_pass(const char *opts) {
  hk_status *err = NULL;
  hk_pass *p = hk_registry_create_pass(reg, "spmd-partitioning", opts, &err);
  ck_assert_ok(err);
  ck_assert_ptr_nonnull(p);
  return p;
}

/* Runs spmd-partitioning; returns the error (NULL on success). */
static hk_status *partition(hk_module *m, const char *opts) {
  hk_pass *p = make_pass(opts);
  bool changed = false;
  hk_status *st = hk_pass_run(p, m, NULL, &changed);
  hk_pass_destroy(p);
  if (!st) ck_assert(changed);
  return st;
}

/* text parsed and partitioned with the signature change allowed, as in
 * XLA's tests (the caller frees it). */
static hk_module *partitioned(const char *text) {
  hk_module *m = hk_test_parse(text);
  ck_assert_ok(partition(m, "allow_module_signature_change=true"));
  return m;
}

static void expect_error(const char *text, const char *opts, const char *msg) {
  hk_module *m = hk_test_parse(text);
  hk_status *st = partition(m, opts);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, msg), "message '%s' lacks '%s'", st->message, msg);
  hk_status_free(st);
  hk_module_free(m);
}

static char *read_fixture(const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "fixtures/%s", name);
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
  buf[n] = 0;
  fclose(f);
  return buf;
}

/* ---- options and the gate ------------------------------------------------ */

START_TEST(option_defaults) {
  hk_pass *p = make_pass(NULL);
  const hk_spmd_partitioner_vtable *vt = hk_pass_extension(p, HK_SPMD_PARTITIONER_IFACE);
  ck_assert_ptr_nonnull(vt);
  ck_assert_int_ge(vt->ext_size, sizeof(hk_spmd_partitioner_vtable));
  const hk_spmd_options *o = vt->options(p);
  ck_assert(o->conv_halo_exchange_always_on_lhs);
  ck_assert_int_eq(o->report_instruction_count, 5);
  ck_assert_int_eq(o->threshold_for_windowed_einsum_mib, 256);
  ck_assert(!o->unroll_windowed_einsum && !o->bidirectional_windowed_einsum);
  ck_assert(!o->allow_module_signature_change);
  ck_assert(o->cache_all_gather);
  ck_assert(!o->choose_faster_windowed_einsum_over_mem);
  ck_assert(!o->bidirectional_decomposed_all_gather && !o->skip_checking_windowed_einsum_users);
  ck_assert(o->enable_windowed_einsum_for_all_gather && o->enable_windowed_einsum_for_reduce_scatter);
  ck_assert(!o->disable_ag_rewrite_for_multiple_consumers);
  ck_assert_int_eq(o->gather_partition_method, HK_SPMD_GS_INDEX_PARALLEL);
  ck_assert_int_eq(o->scatter_partition_method, HK_SPMD_GS_INDEX_PARALLEL);
  ck_assert(!o->has_total_bytes_windowed_einsum_threshold);
  ck_assert_ptr_null(hk_pass_extension(p, "hlokit.other"));
  hk_pass_destroy(p);

  p = make_pass("threshold_for_windowed_einsum_mib=100000 allow_module_signature_change=true "
                "gather_partition_method=kTrivialSlicedOperand total_bytes_windowed_einsum_threshold=64");
  vt = hk_pass_extension(p, HK_SPMD_PARTITIONER_IFACE);
  o = vt->options(p);
  ck_assert_int_eq(o->threshold_for_windowed_einsum_mib, 100000);
  ck_assert(o->allow_module_signature_change);
  ck_assert_int_eq(o->gather_partition_method, HK_SPMD_GS_TRIVIAL_SLICED_OPERAND);
  ck_assert(o->has_total_bytes_windowed_einsum_threshold);
  ck_assert_int_eq(o->total_bytes_windowed_einsum_threshold, 64);
  hk_pass_destroy(p);

  hk_status *err = NULL;
  ck_assert_ptr_null(hk_registry_create_pass(reg, "spmd-partitioning", "no_such_option=1", &err));
  ck_assert_ptr_nonnull(err);
  hk_status_free(err);
}
END_TEST

START_TEST(windowed_einsum_threshold_gate) {
  hk_module *m = hk_test_parse(
      "HloModule m\n\nENTRY e {\n  a = f32[4,4] parameter(0)\n  b = f32[4,4] parameter(1)\n"
      "  ROOT d = f32[4,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
  hk_instr *a = m->entry->params[0], *b = m->entry->params[1];
  hk_pass *p = make_pass(NULL);
  const hk_spmd_partitioner_vtable *vt = hk_pass_extension(p, HK_SPMD_PARTITIONER_IFACE);
  hk_spmd_options o = *vt->options(p);
  ck_assert(!hk_spmd_should_enable_windowed_einsum_with_threshold(&o, a, b, 0)); /* unset */
  o.has_total_bytes_windowed_einsum_threshold = true;
  o.total_bytes_windowed_einsum_threshold = 128;          /* operands: 64 + 64 bytes */
  ck_assert(!hk_spmd_should_enable_windowed_einsum_with_threshold(&o, a, b, 0));
  o.total_bytes_windowed_einsum_threshold = 127;
  ck_assert(hk_spmd_should_enable_windowed_einsum_with_threshold(&o, a, b, 0));
  hk_pass_destroy(p);
  hk_module_free(m);
}
END_TEST

/* ---- the entry contract and side-effect messages ---------------------------- */

START_TEST(entry_parameter_sharding_message) {
  expect_error("HloModule m, num_partitions=2\n\nENTRY e {\n"
               "  p = f32[4] parameter(0), sharding={devices=[2]0,1}\n"
               "  ROOT r = f32[4] copy(p), sharding={replicated}\n}\n",
               NULL, "Unsupported entry parameter sharding:");
}
END_TEST

START_TEST(entry_root_sharding_message) {
  expect_error("HloModule m, num_partitions=2\n\nENTRY e {\n"
               "  p = f32[4] parameter(0), sharding={replicated}\n"
               "  ROOT r = f32[4] copy(p), sharding={devices=[2]0,1}\n}\n",
               NULL, "Unsupported entry root sharding: ");
}
END_TEST

START_TEST(side_effect_must_have_sharding) {
  expect_error("HloModule m, num_partitions=2\n\nENTRY e {\n"
               "  p = f32[4] parameter(0), sharding={replicated}\n"
               "  cc = f32[4] custom-call(p), custom_call_target=\"foo\", custom_call_has_side_effect=true\n"
               "  ROOT r = f32[4] copy(p), sharding={replicated}\n}\n",
               NULL, "Side-effect HLO must have sharding: ");
}
END_TEST

START_TEST(side_effect_cannot_be_replicated) {
  expect_error("HloModule m, num_partitions=2\n\nENTRY e {\n"
               "  p = f32[4] parameter(0), sharding={replicated}\n"
               "  cc = f32[4] custom-call(p), custom_call_target=\"foo\", custom_call_has_side_effect=true, sharding={replicated}\n"
               "  ROOT r = f32[4] copy(p), sharding={replicated}\n}\n",
               NULL, "side-effect HLO cannot have a replicated sharding: ");
}
END_TEST

START_TEST(signature_change_allows_tiled_entry) {
  hk_module *m = partitioned("HloModule m, num_partitions=2\n\nENTRY e {\n"
                             "  p = f32[4] parameter(0), sharding={devices=[2]0,1}\n"
                             "  ROOT r = f32[4] negate(p), sharding={devices=[2]0,1}\n}\n");
  ck_assert_int_eq(m->entry->params[0]->shape->dims[0], 2);
  ck_assert_int_eq(m->entry->root->shape->dims[0], 2);
  ck_assert(m->config.has_entry_layout);
  ck_assert_int_eq(m->config.entry_layout.params[0]->dims[0], 2);
  /* RecordInputsOutputsSharding */
  ck_assert_int_eq(m->config.n_spmd_parameters_shardings, 1);
  ck_assert(hk_sharding_is_tiled(m->config.spmd_parameters_shardings[0]));
  ck_assert(hk_sharding_is_tiled(m->config.spmd_output_sharding));
  /* shardings cleared */
  for (hk_instr *i = m->entry->first; i; i = i->next) ck_assert_ptr_null(i->sharding);
  hk_module_free(m);
}
END_TEST

/* ---- RET_CHECKs through a derived vtable -------------------------------------- */

static hk_spmd_partitioner_vtable derived_vt;
static const hk_spmd_partitioner_vtable *base_vt;
static int derived_mode;

/* Mode 1 tiles parameter 0 after the base preprocessing (bypassing the
 * entry contract), so its partitioned shape differs.  Mode 4 edits the
 * graph after the base walk took its notes: the first channel
 * instruction gets channel id 40. */
static uint64_t changes_before_walk, changes_after_walk;
static hk_status *derived_preprocess(hk_pass *self, hk_module *m, const hk_exec_threads *t) {
  changes_before_walk = hk_module_changes(m);
  HK_TRY(base_vt->preprocess_sharding(self, m, t));
  changes_after_walk = hk_module_changes(m);
  if (derived_mode == 1) {
    int64_t tile = 2;
    hk_instr_set_sharding(m->entry->params[0], hk_sharding_tiled_iota(m, 1, &tile, false));
  } else if (derived_mode == 4) {
    hk_instr *x = m->entry->first;
    while (x && !hk_instr_has_channel_id(x)) x = x->next;
    ck_assert_ptr_nonnull(x);
    hk_instr_attrs(x)->channel_id = 40;
  }
  return NULL;
}

/* Mode 2: an extra parameter; mode 3: a root of another shape. */
static hk_status *derived_handle(hk_pass *self, hk_spmd_partition_ctx *ctx, hk_instr *orig) {
  HK_TRY(base_vt->handle_instruction(self, ctx, orig));
  if (!hk_instr_is_root(orig)) return NULL;
  hk_computation *b = ctx->ops->builder(ctx);
  hk_module *m = ctx->ops->module(ctx);
  if (derived_mode == 2) {
    hk_instr *p = hk_instr_new(b, HK_OP_PARAMETER, hk_shape_scalar(m, HK_F32), 0, NULL, "extra");
    hk_instr_attrs(p)->parameter_number = b->n_params;
    hk_computation_register_param(b, p);
  } else if (derived_mode == 3) {
    hk_status *err = NULL;
    hk_instr *local = ctx->ops->operand(ctx, orig, NULL, &err);
    HK_TRY(err);
    int64_t two = 2;
    hk_instr *s = hk_instr_new(b, HK_OP_SLICE, hk_shape_array(m, HK_F32, 1, &two), 1, &local, NULL);
    hk_slice_dim *sd = hk_alloc(m, sizeof *sd);
    *sd = (hk_slice_dim){0, 2, 1};
    hk_instr_attrs(s)->n_slice = 1;
    hk_instr_attrs(s)->slice = sd;
    ctx->ops->set_partitioned(ctx, orig, s, hk_sharding_replicated(m));
  }
  return NULL;
}

/* Runs spmd-partitioning{opts} on m through the derived vtable in `mode`. */
static hk_status *run_derived(int mode, hk_module *m, const char *opts) {
  hk_pass *p = make_pass(opts);
  base_vt = hk_pass_extension(p, HK_SPMD_PARTITIONER_IFACE);
  derived_vt = *base_vt;
  derived_vt.preprocess_sharding = derived_preprocess;
  derived_vt.handle_instruction = derived_handle;
  base_vt->set_vtable(p, &derived_vt);
  ck_assert_ptr_eq(hk_pass_extension(p, HK_SPMD_PARTITIONER_IFACE), &derived_vt);
  derived_mode = mode;
  bool changed = false;
  hk_status *st = hk_pass_run(p, m, NULL, &changed);
  hk_pass_destroy(p);
  return st;
}

static void expect_ret_check(int mode, const char *msg) {
  hk_module *m = hk_test_parse("HloModule m, num_partitions=2\n\nENTRY e {\n"
                               "  p = f32[4] parameter(0), sharding={replicated}\n"
                               "  ROOT r = f32[4] negate(p), sharding={replicated}\n}\n");
  hk_status *st = run_derived(mode, m, NULL);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, msg), "'%s' lacks '%s'", st->message, msg);
  ck_assert(strstr(st->message, "RET_CHECK failure"));
  hk_status_free(st);
  hk_module_free(m);
}

START_TEST(ret_check_parameter_shape) {
  expect_ret_check(1, "Parameter shape changed for the entry computation");
}
END_TEST

START_TEST(ret_check_parameter_count) {
  expect_ret_check(2, "Parameter count changed for the entry computation");
}
END_TEST

START_TEST(ret_check_result_shape) {
  expect_ret_check(3, "Result shape changed for the entry computation");
}
END_TEST

/* ---- channel ids ------------------------------------------------------------ */

START_TEST(channel_ids_unique_and_increasing) {
  hk_module *m = partitioned(
      "HloModule m, num_partitions=4\n\n"
      "sum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n"
      "ENTRY e {\n"
      "  p = f32[8,8] parameter(0), sharding={devices=[4,1]<=[4]}\n"
      "  q = f32[8,8] parameter(1), sharding={devices=[1,4]<=[4]}\n"
      "  x = f32[8,8] all-reduce(p), channel_id=7, replica_groups={{0}}, to_apply=sum, sharding={devices=[4,1]<=[4]}\n"
      "  t = f32[8,8] add(x, q), sharding={devices=[2,2]<=[4]}\n"
      "  ROOT r = f32[8,8] negate(t), sharding={replicated}\n}\n");
  int64_t last = 7, n = 0;
  for (hk_instr *i = m->entry->first; i; i = i->next) {
    int64_t id = hk_instr_channel_id(i);
    if (!id || (i->opcode == HK_OP_ALL_REDUCE && id == 7)) continue;
    ck_assert_int_gt(id, last);  /* fresh ids after the module's own, increasing */
    last = id;
    n++;
  }
  ck_assert_int_ge(n, 3);
  hk_module_free(m);
}
END_TEST

/* ---- the sharding walk's notes are not used once the graph changed ------------- */

/* The walk noted channel id 7 as the largest; an edit after it makes 40
 * the largest, and the partitioner's fresh ids must come after 40. */
START_TEST(channel_ids_after_an_edit_past_the_walk) {
  hk_module *m = hk_test_parse(
      "HloModule m, num_partitions=4\n\n"
      "sum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n"
      "ENTRY e {\n"
      "  p = f32[8,8] parameter(0), sharding={devices=[4,1]<=[4]}\n"
      "  x = f32[8,8] all-reduce(p), channel_id=7, replica_groups={{0}}, to_apply=sum, sharding={devices=[4,1]<=[4]}\n"
      "  ROOT r = f32[8,8] negate(x), sharding={replicated}\n}\n");
  ck_assert_ok(run_derived(4, m, "allow_module_signature_change=true"));
  int64_t fresh = 0;
  for (hk_instr *i = m->entry->first; i; i = i->next) {
    int64_t id = hk_instr_channel_id(i);
    if (!id || i->opcode == HK_OP_ALL_REDUCE) continue;
    ck_assert_int_gt(id, 40);
    fresh++;
  }
  ck_assert_int_ge(fresh, 1);   /* the all-gather to the replicated root */
  hk_module_free(m);
}
END_TEST

/* The walk canonicalises and defaults shardings, which are no edit of the
 * graph: its notes (and the early order) survive it. */
START_TEST(sharding_walk_is_no_graph_edit) {
  hk_module *m = hk_test_parse(
      "HloModule m, num_partitions=4\n\n"
      "ENTRY e {\n"
      "  p = f32[8,8] parameter(0), sharding={devices=[4,1]<=[4]}\n"
      "  q = f32[8,8] parameter(1), sharding={devices=[4,1]0,1,2,3}\n"
      "  t = f32[8,8] add(p, q)\n"
      "  ROOT r = f32[8,8] negate(t), sharding={replicated}\n}\n");
  ck_assert_ok(run_derived(0, m, "allow_module_signature_change=true"));
  ck_assert(changes_after_walk == changes_before_walk);
  ck_assert(hk_module_changes(m) != changes_after_walk);   /* partitioning edits */
  hk_module_free(m);
}
END_TEST

/* The entry's post order is made on a second thread while the walk runs
 * (big entries, two worker threads); PreprocessHlos then rewrites the
 * entry (slice(pad) merged into one pad), and the partitioner must visit
 * the graph as it is, not by the order made before: stale, it would visit
 * the removed slice and miss the new pad. */
START_TEST(early_order_not_used_after_an_edit) {
  enum { N = 70000 };
  hk_buf b;
  hk_buf_init(&b);
  hk_buf_puts(&b, "HloModule m, num_partitions=4\n\nENTRY e {\n"
                  "  n0 = f32[8] parameter(0), sharding={devices=[4]<=[4]}\n");
  for (int k = 1; k < N; k++)
    hk_buf_printf(&b, "  n%d = f32[8] negate(n%d), sharding={devices=[4]<=[4]}\n", k, k - 1);
  hk_buf_printf(&b,
                "  z = f32[] constant(0)\n"
                "  pad = f32[10] pad(n%d, z), padding=2_0, sharding={devices=[4]<=[4]}\n"
                "  c = f32[10] copy(pad), sharding={devices=[4]<=[4]}\n"
                "  ROOT s = f32[8] slice(c), slice={[0:8]}, sharding={devices=[4]<=[4]}\n}\n",
                N - 1);
  hk_module *m = hk_test_parse(b.data);
  hk_buf_free(&b);
  int threads = hk_worker_threads();
  hk_set_worker_threads(2);
  ck_assert_ok(partition(m, "allow_module_signature_change=true"));
  hk_set_worker_threads(threads);
  hk_verify_options vo = hk_verify_defaults();
  ck_assert_ok(hk_verify_module(m, &vo));
  /* One pad 2_-2: one halo exchange, nothing gathered, every negate kept. */
  hk_test_expect_ops(m, {HK_OP_COLLECTIVE_PERMUTE, 1}, {HK_OP_ALL_GATHER, 0});
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_NEGATE), N - 1);
  ck_assert_int_eq(m->entry->root->shape->dims[0], 2);
  hk_module_free(m);
}
END_TEST

/* ---- rewrites ------------------------------------------------------------------ */

START_TEST(megatron_mlp_one_all_reduce_per_layer) {
  char *text = read_fixture("mlp.hlo");
  hk_module *m = hk_test_parse(text);
  free(text);
  ck_assert_ok(partition(m, "allow_module_signature_change=true"));
  hk_verify_options vo = hk_verify_defaults();
  ck_assert_ok(hk_verify_module(m, &vo));
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_REDUCE), 2); /* two layers */
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER), 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_TO_ALL), 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_COLLECTIVE_PERMUTE), 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_REDUCE_SCATTER), 0);
  /* Column-sharded weights are local shards: f32[64,32]. */
  ck_assert_int_eq(m->entry->params[1]->shape->dims[1], 32);
  ck_assert_int_eq(m->entry->params[2]->shape->dims[0], 32);
  hk_module_free(m);
}
END_TEST

/* Each instruction's partitioned form carries its name; the collectives
 * and slices the partitioner adds get fresh ones; the text re-parses. */
START_TEST(partitioned_instructions_keep_their_names) {
  hk_module *m = partitioned("HloModule m, num_partitions=4\n\nENTRY e {\n"
                             "  p = f32[8,6] parameter(0), sharding={devices=[4,1]<=[4]}\n"
                             "  neg.3 = f32[8,6] negate(p), sharding={devices=[4,1]<=[4]}\n"
                             "  ROOT r = f32[8,6] exponential(neg.3), sharding={replicated}\n}\n");
  hk_instr *p = hk_test_find(m, "p"), *neg = hk_test_find(m, "neg.3"), *r = hk_test_find(m, "r");
  ck_assert_int_eq(p->opcode, HK_OP_PARAMETER);
  ck_assert_int_eq(p->shape->dims[0], 2);
  ck_assert_int_eq(neg->opcode, HK_OP_NEGATE);
  ck_assert_ptr_eq(neg->operands[0], p);
  ck_assert_int_eq(r->opcode, HK_OP_EXP);
  ck_assert_int_eq(r->operands[0]->opcode, HK_OP_ALL_GATHER);
  ck_assert_str_eq(r->operands[0]->name, "all-gather");
  char *text = hk_module_to_string(m, HK_PRINT_LONG);
  hk_module *again = hk_test_parse(text);
  ck_assert_int_eq(again->entry->n_instrs, m->entry->n_instrs);
  hk_module_free(again);
  free(text);
  hk_module_free(m);
  /* A variadic reduce over a sharded dim is cloned twice (local reduce,
   * then the reduce of the gathered partials): one name each. */
  m = hk_test_parse(
      "HloModule m, num_partitions=2\n\nargmax {\n  a = f32[] parameter(0)\n"
      "  ai = s32[] parameter(1)\n  b = f32[] parameter(2)\n  bi = s32[] parameter(3)\n"
      "  ge = pred[] compare(a, b), direction=GE\n  v = f32[] select(ge, a, b)\n"
      "  i = s32[] select(ge, ai, bi)\n  ROOT t = (f32[], s32[]) tuple(v, i)\n}\n\nENTRY e {\n"
      "  p = f32[4,8] parameter(0), sharding={devices=[1,2]<=[2]}\n"
      "  q = s32[4,8] parameter(1), sharding={devices=[1,2]<=[2]}\n"
      "  z = f32[] constant(-inf)\n  zi = s32[] constant(0)\n"
      "  ROOT r = (f32[4], s32[4]) reduce(p, q, z, zi), dimensions={1}, to_apply=argmax,"
      " sharding={{replicated}, {replicated}}\n}\n");
  ck_assert_ok(partition(m, "allow_module_signature_change=true"));
  ck_assert_int_ge(hk_test_count_op(m, HK_OP_REDUCE), 2);
  hk_verify_options vo = hk_verify_defaults();
  ck_assert_ok(hk_verify_module(m, &vo));
  hk_module_free(m);
}
END_TEST

START_TEST(reshard_replicated_to_tiled_is_local_slice) {
  hk_module *m = partitioned("HloModule m, num_partitions=4\n\nENTRY e {\n"
                             "  p = f32[8,6] parameter(0), sharding={replicated}\n"
                             "  ROOT r = f32[8,6] negate(p), sharding={devices=[2,2]<=[4]}\n}\n");
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER) + hk_test_count_op(m, HK_OP_ALL_REDUCE), 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_DYNAMIC_SLICE) >= 1, 1);
  ck_assert_int_eq(m->entry->root->shape->dims[0], 4);
  ck_assert_int_eq(m->entry->root->shape->dims[1], 3);
  hk_module_free(m);
}
END_TEST

START_TEST(reshard_tiled_to_replicated_all_gathers) {
  hk_module *m = partitioned("HloModule m, num_partitions=4\n\nENTRY e {\n"
                             "  p = f32[7] parameter(0), sharding={devices=[4]<=[4]}\n"
                             "  ROOT r = f32[7] negate(p), sharding={replicated}\n}\n");
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER), 1);
  ck_assert_int_eq(m->entry->params[0]->shape->dims[0], 2); /* ceil(7/4) */
  ck_assert_int_eq(m->entry->root->shape->dims[0], 7);
  hk_module_free(m);
}
END_TEST

START_TEST(unsupported_op_falls_back_replicated) {
  hk_module *m = partitioned(
      "HloModule m, num_partitions=2\n\nENTRY e {\n"
      "  p = f32[4,6] parameter(0), sharding={devices=[2,1]0,1}\n"
      "  ROOT r = f32[6,4] reshape(p), sharding={devices=[2,1]0,1}\n}\n");
  ck_assert_int_eq(m->entry->root->shape->dims[0], 3);
  ck_assert_int_eq(m->entry->root->shape->dims[1], 4);
  hk_module_free(m);
}
END_TEST

/* ---- counters (interface "hlokit.counters") -------------------------------- */

typedef struct named_counts {
  int64_t remats, fallbacks, collectives;
  int n;
} named_counts;

static void note_counter(void *ctx, const char *name, int64_t value) {
  named_counts *c = ctx;
  c->n++;
  if (!strcmp(name, "full_rematerializations")) c->remats = value;
  if (!strcmp(name, "replicated_fallbacks")) c->fallbacks = value;
  if (!strcmp(name, "collectives_emitted")) c->collectives = value;
}

static named_counts partition_and_count(const char *text) {
  hk_module *m = hk_test_parse(text);
  hk_pass *p = make_pass("allow_module_signature_change=true");
  bool changed = false;
  ck_assert_ok(hk_pass_run(p, m, NULL, &changed));
  named_counts c = {0};
  ck_assert(hk_pass_report_counters(p, note_counter, &c));
  hk_pass_destroy(p);
  hk_module_free(m);
  return c;
}

START_TEST(counters_report_full_rematerialization) {
  /* An fft over its sharded dimension has no handler: the replicate
   * fallback all-gathers it, one full rematerialization. */
  named_counts c = partition_and_count(
      "HloModule m, num_partitions=2\n\nENTRY e {\n"
      "  p = c64[4,8] parameter(0), sharding={devices=[1,2]0,1}\n"
      "  ROOT r = c64[4,8] fft(p), fft_type=FFT, fft_length={8}, sharding={devices=[1,2]0,1}\n}\n");
  ck_assert_int_eq(c.n, 3);
  ck_assert_int_eq(c.remats, 1);
  ck_assert_int_eq(c.fallbacks, 1);
  ck_assert_int_ge(c.collectives, 1);
  /* An elementwise op on matching shardings needs neither. */
  c = partition_and_count("HloModule m, num_partitions=2\n\nENTRY e {\n"
                          "  p = f32[4,6] parameter(0), sharding={devices=[2,1]0,1}\n"
                          "  ROOT r = f32[4,6] negate(p), sharding={devices=[2,1]0,1}\n}\n");
  ck_assert_int_eq(c.remats, 0);
  ck_assert_int_eq(c.fallbacks, 0);
  ck_assert_int_eq(c.collectives, 0);
}
END_TEST

START_TEST(contracting_dot_into_sharded_output_reduce_scatters) {
  /* Partial sums over the contracting dim, output split across the same two
   * devices: one reduce-scatter, no all-reduce, local result f32[4,4]. */
  hk_module *m = partitioned(
      "HloModule m, num_partitions=2\n\nENTRY e {\n"
      "  a = f32[8,16] parameter(0), sharding={devices=[1,2]0,1}\n"
      "  b = f32[16,4] parameter(1), sharding={devices=[2,1]0,1}\n"
      "  ROOT d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
      " sharding={devices=[2,1]0,1}\n}\n");
  hk_test_expect_ops(m, {HK_OP_REDUCE_SCATTER, 1}, {HK_OP_ALL_REDUCE, 0}, {HK_OP_DYNAMIC_SLICE, 0});
  hk_instr *rs = m->entry->root;
  ck_assert_int_eq(rs->opcode, HK_OP_REDUCE_SCATTER);
  ck_assert_int_eq(rs->shape->dims[0], 4);
  ck_assert_int_eq(rs->shape->dims[1], 4);
  hk_module_free(m);
}
END_TEST

/* A batched dot whose rhs is sharded on its non-contracting dim while the
 * output follows the lhs. */
static const char windowed_dot_module[] =
    "HloModule m, num_partitions=4\n\nENTRY e {\n"
    "  lhs = f32[8,16,32] parameter(0), sharding={devices=[1,4,1]<=[4]}\n"
    "  rhs = f32[8,40,32] parameter(1), sharding={devices=[1,4,1]3,1,0,2}\n"
    "  ROOT dot = f32[8,16,40] dot(lhs, rhs), lhs_batch_dims={0}, rhs_batch_dims={0},"
    " lhs_contracting_dims={2}, rhs_contracting_dims={2}, sharding={devices=[1,4,1]<=[4]}\n}\n";

START_TEST(windowed_dot_rotates_the_big_operand) {
  /* Over the threshold: a loop of 4 steps passing rhs shards around, no
   * all-gather of rhs. */
  hk_module *m = hk_test_parse(windowed_dot_module);
  ck_assert_ok(partition(m, "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0"));
  hk_test_expect_ops(m, {HK_OP_WHILE, 1}, {HK_OP_ALL_GATHER, 0}, {HK_OP_COLLECTIVE_PERMUTE, 1});
  hk_instr *perm = hk_test_last_op(m, HK_OP_COLLECTIVE_PERMUTE);
  /* Tile t's holder receives tile t+1's: tiles 0..3 sit on devices 3,1,0,2. */
  const hk_pair want[4] = {{1, 3}, {0, 1}, {2, 0}, {3, 2}};
  ck_assert_int_eq(perm->attrs->n_source_target_pairs, 4);
  for (int k = 0; k < 4; k++) {
    bool found = false;
    for (int j = 0; j < 4; j++)
      found |= perm->attrs->source_target_pairs[j].a == want[k].a &&
               perm->attrs->source_target_pairs[j].b == want[k].b;
    ck_assert_msg(found, "pair {%lld,%lld} missing", (long long)want[k].a, (long long)want[k].b);
  }
  ck_assert_int_eq(m->entry->root->shape->dims[1], 4);
  ck_assert_int_eq(m->entry->root->shape->dims[2], 40);
  hk_module_free(m);
  /* rhs sharded on its contracting dim instead: the loop slices lhs's
   * contracting dim to match each rhs shard and accumulates. */
  char text[sizeof windowed_dot_module + 8];
  snprintf(text, sizeof text, "%s", windowed_dot_module);
  memcpy(strstr(text, "[1,4,1]3,1,0,2"), "[1,1,4]3,1,0,2", 14);
  m = hk_test_parse(text);
  ck_assert_ok(partition(m, "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0"));
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_WHILE), 1);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER) + hk_test_count_op(m, HK_OP_ALL_REDUCE), 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_DYNAMIC_UPDATE_SLICE), 0);
  hk_module_free(m);
  /* Both operands sharded on the contracting dim, the result on lhs's
   * non-contracting dim: partial sums travel the ring (no reduce-scatter). */
  m = hk_test_parse(
      "HloModule m, num_partitions=4\n\nENTRY e {\n"
      "  lhs = f32[8,16,32] parameter(0), sharding={devices=[1,1,4]2,0,1,3}\n"
      "  rhs = f32[8,40,32] parameter(1), sharding={devices=[1,1,4]2,0,1,3}\n"
      "  ROOT dot = f32[8,16,40] dot(lhs, rhs), lhs_batch_dims={0}, rhs_batch_dims={0},"
      " lhs_contracting_dims={2}, rhs_contracting_dims={2}, sharding={devices=[1,4,1]3,1,0,2}\n}\n");
  ck_assert_ok(partition(m, "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0"));
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_WHILE), 1);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_REDUCE_SCATTER) + hk_test_count_op(m, HK_OP_ALL_REDUCE), 0);
  ck_assert_int_eq(m->entry->root->shape->dims[1], 4);
  hk_module_free(m);
  /* Under the default 256 MiB threshold: no loop. */
  m = hk_test_parse(windowed_dot_module);
  ck_assert_ok(partition(m, "allow_module_signature_change=true"));
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_WHILE), 0);
  hk_module_free(m);
}
END_TEST

START_TEST(grouped_conv_partitions_whole_groups) {
  /* 8 feature groups over 2 devices: 4 whole groups each, no collective. */
  hk_module *m = partitioned(
      "HloModule m, num_partitions=2\n\nENTRY e {\n"
      "  lhs = f32[2,9,1,8] parameter(0), sharding={devices=[1,1,1,2]0,1}\n"
      "  rhs = f32[3,1,1,16] parameter(1), sharding={devices=[1,1,1,2]0,1}\n"
      "  ROOT conv = f32[2,9,1,16] convolution(lhs, rhs), dim_labels=b01f_01io->b01f,"
      " feature_group_count=8, window={size=3x1 pad=1_1x0_0}, sharding={devices=[1,1,1,2]0,1}\n}\n");
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER) + hk_test_count_op(m, HK_OP_ALL_REDUCE) +
                       hk_test_count_op(m, HK_OP_ALL_TO_ALL),
                   0);
  hk_instr *conv = hk_test_last_op(m, HK_OP_CONVOLUTION);
  ck_assert_ptr_nonnull(conv);
  ck_assert_int_eq(conv->attrs->feature_group_count, 4);
  ck_assert_int_eq(conv->shape->dims[3], 8);
  hk_module_free(m);
  /* Batch groups: the lhs batch is grouped; 4 groups over 2 devices. */
  m = hk_test_parse(
      "HloModule m, num_partitions=2\n\nENTRY e {\n"
      "  lhs = f32[6,9,1,4] parameter(0), sharding={devices=[1,1,1,2]0,1}\n"
      "  rhs = f32[6,9,1,4] parameter(1), sharding={devices=[1,1,1,2]0,1}\n"
      "  ROOT conv = f32[3,1,1,4] convolution(lhs, rhs), dim_labels=f01b_i01o->01bf,"
      " batch_group_count=4, window={size=9x1 pad=1_1x0_0}, sharding={devices=[1,1,1,2]0,1}\n}\n");
  ck_assert_ok(partition(m, "allow_module_signature_change=true"));
  conv = hk_test_last_op(m, HK_OP_CONVOLUTION);
  ck_assert_ptr_nonnull(conv);
  ck_assert_int_eq(conv->attrs->batch_group_count, 2);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER), 0);
  hk_module_free(m);
}
END_TEST

START_TEST(iota_is_made_locally) {
  /* Along a tiled dim: the local iota plus the tile offset; no collective. */
  hk_module *m = partitioned("HloModule m, num_partitions=4\n\nENTRY e {\n"
                             "  ROOT i = s32[8,6] iota(), iota_dimension=0, sharding={devices=[4,1]<=[4]}\n}\n");
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER) + hk_test_count_op(m, HK_OP_ALL_REDUCE), 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_IOTA), 1);
  ck_assert_int_eq(m->entry->root->opcode, HK_OP_ADD);
  ck_assert_int_eq(m->entry->root->shape->dims[0], 2);
  hk_module_free(m);
}
END_TEST

START_TEST(uneven_reduce_masks_padding_and_variadic_reduce_gathers) {
  /* f32[7] over 4 devices: tiles of 2, the last one half padding.  The
   * padding is masked with the init value before the local reduce, then
   * one all-reduce; nothing is replicated. */
  hk_module *m = partitioned(
      "HloModule m, num_partitions=4\n\nmax {\n  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n  ROOT r = f32[] maximum(a, b)\n}\n\nENTRY e {\n"
      "  p = f32[7] parameter(0), sharding={devices=[4]<=[4]}\n"
      "  z = f32[] constant(-inf)\n"
      "  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=max, sharding={replicated}\n}\n");
  hk_test_expect_ops(m, {HK_OP_SELECT, 1}, {HK_OP_ALL_REDUCE, 1}, {HK_OP_ALL_GATHER, 0});
  hk_module_free(m);
}
END_TEST

START_TEST(subgroup_manual_all_reduce_must_stay_in_its_subgroup) {
  static const char text[] =
      "HloModule m, num_partitions=4\n\nsum {\n  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n  ROOT r = f32[] add(a, b)\n}\n\nENTRY e {\n"
      "  p = f32[2,2] parameter(0), sharding={devices=[2,1,2]0,2,1,3 last_tile_dims={manual}}\n"
      "  ROOT ar = f32[2,2] all-reduce(p), to_apply=sum, replica_groups=%s,"
      " use_global_device_ids=true, channel_id=1,"
      " sharding={devices=[2,1,2]0,2,1,3 last_tile_dims={manual}}\n}\n";
  char buf[sizeof text + 32];
  /* Devices 0 and 2 hold one data tile, 1 and 3 the other. */
  snprintf(buf, sizeof buf, text, "{{2,0},{1,3}}");
  hk_module *m = partitioned(buf);
  /* Kept as one all-reduce over the local tile, nothing gathered. */
  hk_test_expect_ops(m, {HK_OP_ALL_REDUCE, 1}, {HK_OP_ALL_GATHER, 0});
  ck_assert_int_eq(m->entry->root->shape->dims[0], 1);
  hk_module_free(m);
  snprintf(buf, sizeof buf, text, "{{1,0},{2,3}}");
  expect_error(buf, "allow_module_signature_change=true", "of different manual subgroups");
}
END_TEST

START_TEST(sort_on_sharded_dim_moves_the_sharding) {
  /* The sort dim is sharded: the partitions move to the free dim (an
   * all-to-all), each device sorts whole rows; nothing is all-gathered. */
  hk_module *m = partitioned(
      "HloModule m, num_partitions=4\n\nlt {\n  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=LT\n}\n\n"
      "ENTRY e {\n  p = f32[8,12] parameter(0), sharding={devices=[1,4]<=[4]}\n"
      "  ROOT s = f32[8,12] sort(p), dimensions={1}, to_apply=lt, sharding={devices=[4,1]<=[4]}\n}\n");
  hk_test_expect_ops(m, {HK_OP_ALL_GATHER, 0}, {HK_OP_ALL_TO_ALL, 1});
  ck_assert_int_eq(m->entry->root->shape->dims[0], 2);
  ck_assert_int_eq(m->entry->root->shape->dims[1], 12);
  hk_module_free(m);
}
END_TEST

START_TEST(topk_on_split_dim_merges_candidates) {
  /* Each half yields its top 3 with global indices; the 2x3 candidates are
   * all-gathered and a stable sort keeps the best 3. */
  hk_module *m = partitioned(
      "HloModule m, num_partitions=2\n\nENTRY e {\n"
      "  p = f32[2,16] parameter(0), sharding={devices=[1,2]0,1}\n"
      "  ROOT t = (f32[2,3], s32[2,3]) custom-call(p), custom_call_target=\"TopK\","
      " sharding={{replicated},{replicated}}\n}\n");
  hk_test_expect_ops(m, {HK_OP_ALL_GATHER, 2}, {HK_OP_SORT, 1});
  hk_instr *topk = hk_test_last_op(m, HK_OP_CUSTOM_CALL);
  ck_assert_ptr_nonnull(topk);
  ck_assert_int_eq(topk->operands[0]->shape->dims[1], 8);
  ck_assert_int_eq(topk->shape->tuple[0]->dims[1], 3);
  ck_assert_ok(hk_verify_module(m, NULL));
  hk_module_free(m);
}
END_TEST

START_TEST(reshape_splitting_into_a_minor_sharded_dim_reshards_the_result) {
  /* The output's tiling (the minor half of a split dim) has no operand
   * counterpart: the operand is reshaped as tiled and the result moved by
   * an all-to-all, never replicated. */
  hk_module *m = partitioned(
      "HloModule m, num_partitions=2\n\nENTRY e {\n"
      "  p = f32[6,4,12] parameter(0), sharding={devices=[2,1,1]0,1}\n"
      "  ROOT r = f32[6,4,2,6] reshape(p), sharding={devices=[1,1,1,2]0,1}\n}\n");
  hk_test_expect_ops(m, {HK_OP_ALL_GATHER, 0}, {HK_OP_ALL_TO_ALL, 1});
  ck_assert_int_eq(m->entry->root->shape->dims[3], 3);
  hk_module_free(m);
}
END_TEST

START_TEST(uneven_dims_move_by_all_to_all) {
  /* f32[7,9] from rows over 4 devices to columns: pad the columns to 12,
   * one all-to-all, cut the gathered rows back to 7; nothing all-gathered. */
  hk_module *m = partitioned("HloModule m, num_partitions=4\n\nENTRY e {\n"
                             "  p = f32[7,9] parameter(0), sharding={devices=[4,1]<=[4]}\n"
                             "  ROOT r = f32[7,9] negate(p), sharding={devices=[1,4]<=[4]}\n}\n");
  hk_test_expect_ops(m, {HK_OP_ALL_TO_ALL, 1}, {HK_OP_ALL_GATHER, 0});
  ck_assert_int_eq(m->entry->root->shape->dims[0], 7);
  ck_assert_int_eq(m->entry->root->shape->dims[1], 3);
  hk_module_free(m);
}
END_TEST

START_TEST(reshard_through_the_whole_value_counts_a_rematerialization) {
  /* [2,1 r3] -> [1,3 r2] over 6 devices: no all-to-all or factor move
   * fits (2 and 3 share no factor), so the general path gathers dim 0,
   * the value is whole on every device, and dim 1 is sliced again: one
   * full rematerialization. */
  named_counts c = partition_and_count(
      "HloModule m, num_partitions=6\n\nENTRY e {\n"
      "  p = f32[6,6] parameter(0), sharding={devices=[2,1,3]<=[6] last_tile_dim_replicate}\n"
      "  ROOT c = f32[6,6] copy(p), sharding={devices=[1,3,2]<=[6] last_tile_dim_replicate}\n}\n");
  ck_assert_int_eq(c.remats, 1);
  /* Gathering one dim of two leaves the value split: none. */
  c = partition_and_count(
      "HloModule m, num_partitions=6\n\nENTRY e {\n"
      "  p = f32[6,6,6] parameter(0), sharding={devices=[2,1,3]<=[6]}\n"
      "  ROOT c = f32[6,6,6] copy(p), sharding={devices=[1,2,3]<=[6]}\n}\n");
  ck_assert_int_eq(c.remats, 0);
}
END_TEST

START_TEST(reshard_across_device_orders_permutes_not_rematerializes) {
  /* [4,2,1] to [2,2,2] with another device order: gather within groups of
   * the changed dim, one collective-permute to the owners `to` wants, local
   * slices; never the whole value on a device. */
  hk_module *m = hk_test_parse(
      "HloModule m, num_partitions=8\n\nENTRY e {\n"
      "  p = f32[6,32,4] parameter(0), sharding={devices=[4,2,1]0,2,1,3,4,6,5,7}\n"
      "  ROOT c = f32[6,32,4] copy(p), sharding={devices=[2,2,2]0,1,3,4,2,6,5,7}\n}\n");
  hk_pass *p = make_pass("allow_module_signature_change=true");
  bool changed = false;
  ck_assert_ok(hk_pass_run(p, m, NULL, &changed));
  named_counts c = {0};
  ck_assert(hk_pass_report_counters(p, note_counter, &c));
  ck_assert_int_eq(c.remats, 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_COLLECTIVE_PERMUTE), 1);
  hk_pass_destroy(p);
  hk_module_free(m);
}
END_TEST

START_TEST(reshard_moves_dims_by_all_to_all_and_permute) {
  hk_module *m = partitioned("HloModule m, num_partitions=4\n\nENTRY e {\n"
                             "  p = f32[8,12] parameter(0), sharding={devices=[4,1]<=[4]}\n"
                             "  a = f32[8,12] copy(p), sharding={devices=[1,4]<=[4]}\n"
                             "  ROOT b = f32[8,12] copy(a), sharding={devices=[1,4]3,2,1,0}\n}\n");
  hk_test_expect_ops(m, {HK_OP_ALL_TO_ALL, 1}, {HK_OP_COLLECTIVE_PERMUTE, 1}, {HK_OP_ALL_GATHER, 0});
  ck_assert_int_eq(m->entry->root->shape->dims[0], 8);
  ck_assert_int_eq(m->entry->root->shape->dims[1], 3);
  hk_module_free(m);
}
END_TEST

/* A device-order change under partial replication: each device takes its
 * tile from itself if it holds it, else from the lowest unused holder. */
START_TEST(reshard_permutes_replicated_tiles) {
  hk_module *m = partitioned(
      "HloModule m, num_partitions=4\n\nENTRY e {\n"
      "  p = f32[8,6] parameter(0), sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}\n"
      "  ROOT b = f32[8,6] copy(p), sharding={devices=[2,1,2]2,3,0,1 last_tile_dim_replicate}\n}\n");
  hk_test_expect_ops(m, {HK_OP_COLLECTIVE_PERMUTE, 1}, {HK_OP_ALL_GATHER, 0});
  hk_instr *perm = hk_test_last_op(m, HK_OP_COLLECTIVE_PERMUTE);
  const hk_pair want[4] = {{2, 0}, {3, 1}, {0, 2}, {1, 3}};
  ck_assert_int_eq(perm->attrs->n_source_target_pairs, 4);
  for (int k = 0; k < 4; k++) {
    ck_assert_int_eq(perm->attrs->source_target_pairs[k].a, want[k].a);
    ck_assert_int_eq(perm->attrs->source_target_pairs[k].b, want[k].b);
  }
  hk_module_free(m);
}
END_TEST

START_TEST(bad_sharding_for_partition_count_is_an_error) {
  expect_error("HloModule m, num_partitions=2\n\nENTRY e {\n"
               "  p = f32[8] parameter(0), sharding={devices=[4]<=[4]}\n"
               "  ROOT r = f32[8] negate(p), sharding={replicated}\n}\n",
               "allow_module_signature_change=true", "device 2 >= num_devices (2)");
}
END_TEST

static Suite *spmd_suite(void) {
  Suite *s = suite_create("spmd");
  TCase *t = tcase_create("driver");
  tcase_add_checked_fixture(t, load_plugins, unload_plugins);
  tcase_add_test(t, option_defaults);
  tcase_add_test(t, windowed_einsum_threshold_gate);
  tcase_add_test(t, entry_parameter_sharding_message);
  tcase_add_test(t, entry_root_sharding_message);
  tcase_add_test(t, side_effect_must_have_sharding);
  tcase_add_test(t, side_effect_cannot_be_replicated);
  tcase_add_test(t, signature_change_allows_tiled_entry);
  tcase_add_test(t, ret_check_parameter_shape);
  tcase_add_test(t, ret_check_parameter_count);
  tcase_add_test(t, ret_check_result_shape);
  tcase_add_test(t, channel_ids_unique_and_increasing);
  tcase_add_test(t, channel_ids_after_an_edit_past_the_walk);
  tcase_add_test(t, early_order_not_used_after_an_edit);
  tcase_add_test(t, sharding_walk_is_no_graph_edit);
  suite_add_tcase(s, t);
  TCase *r = tcase_create("rewrites");
  tcase_add_checked_fixture(r, load_plugins, unload_plugins);
  tcase_add_test(r, megatron_mlp_one_all_reduce_per_layer);
  tcase_add_test(r, reshard_replicated_to_tiled_is_local_slice);
  tcase_add_test(r, reshard_tiled_to_replicated_all_gathers);
  tcase_add_test(r, unsupported_op_falls_back_replicated);
  tcase_add_test(r, reshard_moves_dims_by_all_to_all_and_permute);
  tcase_add_test(r, reshard_permutes_replicated_tiles);
  tcase_add_test(r, counters_report_full_rematerialization);
  tcase_add_test(r, contracting_dot_into_sharded_output_reduce_scatters);
  tcase_add_test(r, windowed_dot_rotates_the_big_operand);
  tcase_add_test(r, grouped_conv_partitions_whole_groups);
  tcase_add_test(r, iota_is_made_locally);
  tcase_add_test(r, reshard_across_device_orders_permutes_not_rematerializes);
  tcase_add_test(r, reshard_through_the_whole_value_counts_a_rematerialization);
  tcase_add_test(r, uneven_dims_move_by_all_to_all);
  tcase_add_test(r, reshape_splitting_into_a_minor_sharded_dim_reshards_the_result);
  tcase_add_test(r, topk_on_split_dim_merges_candidates);
  tcase_add_test(r, sort_on_sharded_dim_moves_the_sharding);
  tcase_add_test(r, subgroup_manual_all_reduce_must_stay_in_its_subgroup);
  tcase_add_test(r, uneven_reduce_masks_padding_and_variadic_reduce_gathers);
  tcase_add_test(r, bad_sharding_for_partition_count_is_an_error);
  tcase_add_test(r, partitioned_instructions_keep_their_names);
  suite_add_tcase(s, r);
  return s;
}

HK_TEST_MAIN(spmd_suite)
