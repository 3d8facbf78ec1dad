/*
 * errmsg.c -- per-thread message for the last failed call (ferrite_errmsg).
 * Internal code records a specific message where it knows one; the API
 * boundary (fr_err_finish) supplies strerror() text otherwise.
 */
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static __thread char err_buf[512];
static __thread int err_set;

int fr_err(int rc, const char *fmt, ...)
{
	/* Formatted aside first: callers prefix the last message with
	 * fr_err(rc, "%s: %s", path, fr_err_get()), which reads err_buf. */
	char msg[sizeof(err_buf)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	memcpy(err_buf, msg, sizeof(err_buf));
	err_set = 1;
	return rc;
}

void fr_err_clear(void)
{
	err_set = 0;
}

int fr_err_isset(void)
{
	return err_set;
}

const char *fr_err_get(void)
{
	return err_set ? err_buf : "";
}

int fr_err_finish(int rc)
{
	if (rc < 0 && !err_set) {
		snprintf(err_buf, sizeof(err_buf), "%s", strerror(-rc));
		err_set = 1;
	}
	return rc;
}

void fr_report(fr_report_fn report, void *arg, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (report)
		report(arg, line);
}
