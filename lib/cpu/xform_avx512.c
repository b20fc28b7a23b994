// SPDX-License-Identifier: MIT
/* AVX-512 transformer row kernels.  Only called after cpuid says so. */
#ifdef __x86_64__
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")
#define VW 16
#define XTAB mi_xform_kern_avx512
#include "cpu/xform_impl.h"
#endif
