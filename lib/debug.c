// SPDX-License-Identifier: MIT
/* MI_DEBUG=topic,... parsed once (lib/debug.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "debug.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char topics[256];

static void read_env(void)
{
	const char *s = getenv("MI_DEBUG");
	size_t n;

	if (!s)
		return;
	n = strlen(s);
	if (n > sizeof(topics) - 3)
		n = sizeof(topics) - 3;
	/* ",a,b," so that a topic matches as ",topic," */
	topics[0] = ',';
	memcpy(topics + 1, s, n);
	topics[n + 1] = ',';
	topics[n + 2] = '\0';
}

bool mi_debug(const char *topic)
{
	char key[64];
	size_t n = strlen(topic);

	pthread_once(&once, read_env);
	if (!topics[0])
		return false;
	if (strstr(topics, ",all,"))
		return true;
	if (n + 3 > sizeof(key))
		return false;
	key[0] = ',';
	memcpy(key + 1, topic, n);
	key[n + 1] = ',';
	key[n + 2] = '\0';
	return strstr(topics, key) != NULL;
}
