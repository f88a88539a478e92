/* SPDX-License-Identifier: MIT */
/* Fuzz target for URLs as users and config files give them (core/store.c, core/store_s3.c,
 * core/store_http.c, core/source.c): LAKE_URL/DATASET split, and s3:// and http(s):// lake URLs
 * opened (no request is made when a store opens). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "fuzz_common.h"
#include "s3call.h"
#include "source.h"
#include "store.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static int quiet;
	char *url, *lake = NULL, *ds = NULL;
	struct tfs_store *s = NULL;

	if (!quiet) {
		tfs_log_set_level(TFS_LOG_ERROR);
		if (tfs_log_open("/dev/null"))
			abort();
		unsetenv("TENSORFS_CONFIG");
		quiet = 1;
	}
	url = strndup((const char *)data, len);
	if (!url)
		return 0;
	if (!tfs_url_split(url, &lake, &ds)) {
		/* The dataset is one valid name; the lake is what came before it. */
		FUZZ_CHECK(tfs_name_valid(ds) && !strchr(ds, '/') && ds[0] != '.');
		FUZZ_CHECK(!strncmp(url, lake, strlen(lake)));
		FUZZ_CHECK(strstr(url + strlen(lake) - 1, ds) != NULL);
		free(lake);
		free(ds);
	}
	(void)tfs_source_is_url(url);
	(void)tfs_s3_key_ok(url);
	/* Remote stores only: a file:// URL would touch the file system. */
	if ((!strncmp(url, "s3://", 5) || !strncmp(url, "http://", 7) ||
	     !strncmp(url, "https://", 8)) &&
	    !tfs_store_open(url, 0, &s)) {
		/* The root URL, without a trailing '/' (store.h). */
		FUZZ_CHECK(s->url && strlen(s->url) > 0 && s->url[strlen(s->url) - 1] != '/');
		tfs_store_close(s);
	}
	free(url);
	return 0;
}
