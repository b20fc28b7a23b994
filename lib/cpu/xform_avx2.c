// SPDX-License-Identifier: MIT
/* AVX2+FMA transformer row kernels.  Only called after cpuid says so. */
#ifdef __x86_64__
#pragma GCC target("avx2,fma")
#define VW 8
#define XTAB mi_xform_kern_avx2
#include "cpu/xform_impl.h"
#endif
