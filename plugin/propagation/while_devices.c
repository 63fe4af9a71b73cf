/* while_devices.c - XLA's CheckAndUpdateDeviceAssignmentsInWhileBody: a
 * while body holding a channel instruction on device D keeps every other
 * device-assigned instruction (and the while) on D, or propagation fails;
 * the body root is put on D so partitioning keeps the loop there. */
#include "prop.h"

/* Send/recv between devices and all-reduce / reduce-scatter with a channel
 * pin the loop to their device. */
static bool is_channel_instr(const hk_instr *i) {
  switch (i->opcode) {
    case HK_OP_SEND: case HK_OP_RECV:
      return !(i->attrs && i->attrs->is_host_transfer);
    case HK_OP_ALL_REDUCE: case HK_OP_REDUCE_SCATTER:
      return hk_instr_has_channel_id(i);
    default: return false;
  }
}

static hk_status *conflict(const hk_instr *i, int64_t dev, const hk_instr *channel, int64_t want) {
  return hk_error(HK_FAILED_PRECONDITION,
                  "Instruction: %s is on device: %lld, which conflicts with device: %lld of "
                  "channel instruction: %s",
                  i->name, (long long)dev, (long long)want, channel ? channel->name : "?");
}

/* Device-assigned instructions seen before the channel one: per device the
 * last one (XLA keeps a map ordered by device). */
typedef struct dev_seen {
  int32_t n;
  int64_t dev[64];
  const hk_instr *instr[64];
} dev_seen;

static void seen_add(dev_seen *s, int64_t dev, const hk_instr *i) {
  for (int32_t k = 0; k < s->n; k++)
    if (s->dev[k] == dev) {
      s->instr[k] = i;
      return;
    }
  if (s->n < 64) {
    s->dev[s->n] = dev;
    s->instr[s->n++] = i;
  }
}

/* The lowest device other than want, with its instruction. */
static hk_status *seen_conflict(const dev_seen *s, const hk_instr *channel, int64_t want) {
  int32_t best = -1;
  for (int32_t k = 0; k < s->n; k++)
    if (s->dev[k] != want && (best < 0 || s->dev[k] < s->dev[best])) best = k;
  return best < 0 ? NULL : conflict(s->instr[best], s->dev[best], channel, want);
}

hk_status *prop_check_while_devices(hk_module *m, hk_instr *w) {
  if (w->n_called != 2) return NULL;
  hk_computation *body = w->called[1];
  const hk_instr *channel = NULL;
  int64_t unique = -1;
  dev_seen seen = {0};
  for (hk_instr *i = body->first; i; i = i->next) {
    int64_t dev = i->sharding ? hk_sharding_unique_device(i->sharding) : -1;
    if (dev < 0) continue;
    if (unique >= 0) {
      if (dev != unique) return conflict(i, dev, channel, unique);
    } else if (is_channel_instr(i)) {
      channel = i;
      unique = dev;
      HK_TRY(seen_conflict(&seen, channel, unique));
    } else {
      seen_add(&seen, dev, i);
    }
  }
  if (unique < 0) return NULL;
  int64_t wd = w->sharding ? hk_sharding_unique_device(w->sharding) : -1;
  if (wd >= 0 && wd != unique) return conflict(w, wd, channel, unique);
  int64_t rd = body->root->sharding ? hk_sharding_unique_device(body->root->sharding) : -1;
  if (rd < 0)
    hk_instr_set_sharding(body->root,
                          hk_sharding_for_shape(m, hk_sharding_maximal(m, unique), body->root->shape));
  else if (rd != unique) return conflict(body->root, rd, channel, unique);
  return NULL;
}
