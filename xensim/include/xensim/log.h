/*
 * xensim levelled logger.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Messages go to stderr as "xensim[<pid>]: <message>\n", one write(2) per
 * message so that lines of concurrent processes do not interleave. The
 * threshold comes from $XENSIM_LOG (err, warn, info or debug; default
 * warn), read once per process.
 */
#ifndef XENSIM_LOG_H
#define XENSIM_LOG_H

#include <stdbool.h>

#define XENSIM_LOG_ERR      0
#define XENSIM_LOG_WARN     1
#define XENSIM_LOG_INFO     2
#define XENSIM_LOG_DEBUG    3

/*
 * Log @fmt at @level (XENSIM_LOG_*) if the threshold lets it through.
 * A trailing newline is added when missing. Preserves errno.
 */
void xensim_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* True if a message at @level would be printed (to skip costly formatting). */
bool xensim_log_enabled(int level);

#endif /* XENSIM_LOG_H */
