/* SPDX-License-Identifier: MIT */
/* Fuzz target for how an http(s):// lake is listed (core/lakeindex.c): the index files and the
 * HTML directory listings a hostile or broken web server could send. The first byte picks the
 * parser. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "lakeindex.h"

/* A name becomes a path component: never empty, hidden or deeper than one level. */
static int check_name(void *arg, const char *name, int is_dir)
{
	FUZZ_CHECK(name[0] != 0 && name[0] != '.');
	FUZZ_CHECK(!strchr(name, '/'));
	FUZZ_CHECK(is_dir == 0 || is_dir == 1);
	FUZZ_CHECK(strlen(name) < 256);
	++*(int *)arg;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	int n = 0, rc;

	if (len < 1)
		return 0;
	/* Exactly len bytes, no terminator: the parsers must honour len. */
	if (data[0] & 1) {
		rc = tfs_lakeindex_parse_html((const char *)data + 1, len - 1, check_name, &n);
		FUZZ_CHECK(rc == 0);
	} else {
		rc = tfs_lakeindex_parse((const char *)data + 1, len - 1, check_name, &n);
		FUZZ_CHECK(rc == 0 || rc == -EINVAL);
		FUZZ_CHECK(rc == 0 || n == 0);
	}
	return 0;
}
