#pragma once
// The search's innermost loops (core/search/factor.cpp runSlice, core/search/minplus.cpp
// multiply) are built for AVX2 and for plain x86-64, one chosen when the program loads
// (GCC function multiversioning). Both builds do the same additions and comparisons (no fused
// multiply-add), so they give the same tables; only the width of the registers differs.
// Helpers they call are marked always_inline, so that each build compiles them for its own
// instruction set. ThreadSanitizer cannot run the loader's choice (it runs before its runtime
// starts), so a TSan build has the plain one only.
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define TP_KERNEL_BUILDS [[gnu::target_clones("avx2", "default")]]
#else
#define TP_KERNEL_BUILDS
#endif
