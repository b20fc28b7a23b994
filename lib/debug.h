/* SPDX-License-Identifier: MIT */
/*
 * Debug output switches.  MI_DEBUG is the one environment variable the
 * library reads for diagnostics: a comma-separated list of topics, read
 * once per process ("MI_DEBUG=quant,nchwc", or "all").  Topics only turn
 * on messages on stderr; they never change what the library computes.
 * Documentation/runtime.rst lists the topics.
 */
#ifndef MI_DEBUG_H
#define MI_DEBUG_H

#include <stdbool.h>

/* True when MI_DEBUG names topic (or "all"). */
bool mi_debug(const char *topic);

#endif /* MI_DEBUG_H */
