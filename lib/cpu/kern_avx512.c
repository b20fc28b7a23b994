// SPDX-License-Identifier: MIT
/* AVX-512 kernels: 16 floats per vector, micro-tile 6x64 (24 zmm
 * accumulators).  Only called after cpuid says AVX-512F/BW/VL/DQ exist. */
#ifdef __x86_64__
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")
#define VW 16
#ifndef KMR
#define KMR 6
#define KNV 4
#endif
#define KISA MI_ISA_AVX512
#define KTAB mi_cpu_kern_avx512
#include "cpu/kern_impl.h"
#include "cpu/nchwc_impl.h"
#endif
