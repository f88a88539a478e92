/* SPDX-License-Identifier: MIT */
/* Fuzz target for S3's XML replies (core/s3parse.c): listing pages, pages of multipart uploads,
 * error codes and elements, as a hostile or broken server could send them. The first byte picks
 * the listing's prefix; the rest is the body. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "s3parse.h"

static const char *const prefixes[] = { "", "lake/", "lake/ds/objects/ab/", "a&b/" };

/* Every name handed on is a direct child: not empty, no '/', not hidden. */
static int check_name(void *arg, const char *name, int is_dir)
{
	(void)is_dir;
	FUZZ_CHECK(name[0] != 0 && name[0] != '.');
	FUZZ_CHECK(!strchr(name, '/'));
	++*(int *)arg;
	return 0;
}

static int check_upload(void *arg, const char *key, const struct tfs_buf *id, int64_t started)
{
	(void)started;
	FUZZ_CHECK(strlen(key) == strnlen(key, 4096) && id->data != NULL);
	++*(int *)arg;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct tfs_buf v = { 0 }, tok = { 0 }, scratch[3] = { { 0 } }, km = { 0 }, um = { 0 };
	struct tfs_buf body = { 0 };
	const char *prefix;
	char code[96];
	int more = 0, names = 0, rc;

	if (len < 1)
		return 0;
	prefix = prefixes[data[0] % (sizeof(prefixes) / sizeof(prefixes[0]))];
	if (tfs_buf_append(&body, data + 1, len - 1))
		return 0;
	rc = tfs_s3_listing_parse((const char *)body.data, (const char *)body.data + body.len,
				  prefix, strlen(prefix), check_name, &names, &v, &tok, &more);
	FUZZ_CHECK(rc == 0 || rc == -EPROTO || rc == -ENOMEM);
	FUZZ_CHECK(rc != -EPROTO || more);
	rc = tfs_s3_uploads_parse((const char *)body.data, (const char *)body.data + body.len,
				  check_upload, &names, scratch, &km, &um, &more);
	FUZZ_CHECK(rc == 0 || rc == -EPROTO || rc == -ENOMEM);
	tfs_s3_error_code(&body, code, sizeof(code));
	FUZZ_CHECK(strlen(code) < sizeof(code));
	for (const char *c = code; *c; c++)
		FUZZ_CHECK(*c != '\n' && *c != '\r' && *c != '\033');
	if (tfs_xml_get((const char *)body.data, (const char *)body.data + body.len, "UploadId",
			&v))
		FUZZ_CHECK(v.data && v.data[v.len] == 0);
	tfs_buf_free(&v);
	tfs_buf_free(&tok);
	for (int i = 0; i < 3; i++)
		tfs_buf_free(&scratch[i]);
	tfs_buf_free(&km);
	tfs_buf_free(&um);
	tfs_buf_free(&body);
	return 0;
}
