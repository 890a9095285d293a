// Which sanitizer a build runs under, as one name for both compilers: g++
// defines __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__, clang before 17 only
// answers __has_feature (the ASan pass of scripts/test.sh builds with clang).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define GPEMU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define GPEMU_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(GPEMU_ASAN)
#define GPEMU_ASAN 1
#endif
#if __has_feature(thread_sanitizer) && !defined(GPEMU_TSAN)
#define GPEMU_TSAN 1
#endif
#endif
