/* export.h - the one place that says what libhlokit.so exports.
 *
 * The library is compiled with -fvisibility=hidden; every ABI header wraps
 * its declarations in HK_ABI_BEGIN ... HK_ABI_END, which gives them default
 * visibility.  So a function is exported exactly when an ABI header
 * declares it: add a declaration to an abi/hlokit/ header and it is
 * exported (in the version node of the next ABI minor, see
 * abi/hlokit.map); declare it in a host/ header and it stays inside.
 * (Static inline functions of the headers are not symbols at all.) */
#ifndef HLOKIT_EXPORT_H
#define HLOKIT_EXPORT_H

#if defined(__GNUC__)
#define HK_ABI_BEGIN _Pragma("GCC visibility push(default)")
#define HK_ABI_END _Pragma("GCC visibility pop")
#else
#define HK_ABI_BEGIN
#define HK_ABI_END
#endif

#endif
