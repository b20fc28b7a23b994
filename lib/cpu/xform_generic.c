// SPDX-License-Identifier: MIT
/* Portable transformer row kernels (4 floats per vector). */
#define VW 4
#define XTAB mi_xform_kern_generic
#include "cpu/xform_impl.h"
