// SPDX-License-Identifier: MIT
/* Portable kernels: GCC vector extensions, 4 floats per vector (SSE2 on
 * x86-64, NEON/scalar elsewhere).  Micro-tile 6x8. */
#define VW 4
#define KMR 6
#define KNV 2
#define KISA MI_ISA_GENERIC
#define KTAB mi_cpu_kern_generic
#include "cpu/kern_impl.h"
#include "cpu/nchwc_impl.h"
