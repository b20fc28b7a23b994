// SPDX-License-Identifier: MIT
/* AVX2 + FMA kernels: 8 floats per vector, micro-tile 6x16 (12 ymm
 * accumulators).  Only called after cpuid says AVX2 and FMA exist. */
#ifdef __x86_64__
#pragma GCC target("avx2,fma")
#define VW 8
#define KMR 6
#define KNV 2
#define KISA MI_ISA_AVX2
#define KTAB mi_cpu_kern_avx2
#include "cpu/kern_impl.h"
#include "cpu/nchwc_impl.h"
#endif
