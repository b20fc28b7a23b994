/* SPDX-License-Identifier: GPL-2.0-only */
/* userspace shim: everything is in ../shim.h */
