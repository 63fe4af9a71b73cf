/* hlokit.h - the one header a plugin includes: the whole public ABI.
 *
 * Versioning: HK_ABI_VERSION packs major.minor.  A plugin records the
 * version it was built against; the host refuses a plugin whose major
 * differs and accepts any minor <= its own (everything is append-only
 * within a major version).  Plugins reach the IR by linking against
 * libhlokit.so: the host executable already has it loaded, so a plugin's
 * undefined hk_* symbols resolve at dlopen time (see README "Writing a
 * plugin" for why we chose this over a table of function pointers). */
#ifndef HLOKIT_HLOKIT_H
#define HLOKIT_HLOKIT_H

#define HK_ABI_MAJOR 1
#define HK_ABI_MINOR 8
#define HK_ABI_VERSION ((uint32_t)((HK_ABI_MAJOR << 16) | HK_ABI_MINOR))
#define HK_VERSION_STRING "0.1.0"

#include "status.h"
#include "types.h"
#include "shape.h"
#include "sharding.h"
#include "ir.h"
#include "text.h"
#include "json.h"
#include "analysis.h"
#include "eval.h"
#include "pass.h"

#endif
