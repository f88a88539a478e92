/* SPDX-License-Identifier: MIT */
/* Fuzz target for tfs_commit_parse: parse, serialize, parse again, and compare. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "format.h"
#include "fuzz_common.h"

static void same_commit(const struct tfs_commit *a, const struct tfs_commit *b)
{
	FUZZ_CHECK(tfs_id_eq(&a->manifest, &b->manifest));
	FUZZ_CHECK(a->nparents == b->nparents);
	for (size_t i = 0; i < a->nparents; i++)
		FUZZ_CHECK(tfs_id_eq(&a->parents[i], &b->parents[i]));
	FUZZ_CHECK(a->time == b->time && a->rows == b->rows);
	FUZZ_CHECK(!strcmp(a->message, b->message));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct tfs_commit c, c2;
	struct tfs_buf out = { 0 }, out2 = { 0 };
	struct tfs_manifest empty = { 0 };
	int rc;

	rc = tfs_commit_parse((const char *)data, len, &c);
	FUZZ_CHECK(rc == 0 || rc == -EIO || rc == -EPROTO);
	if (rc) {
		FUZZ_CHECK(c.parents == NULL && c.message == NULL);
		return 0;
	}
	FUZZ_CHECK(c.message != NULL);
	FUZZ_CHECK(c.nparents == 0 || c.parents != NULL);

	FUZZ_CHECK(tfs_commit_serialize(&c, &out) == 0);
	rc = tfs_commit_parse((const char *)out.data, out.len, &c2);
	if (rc)
		fprintf(stderr, "re-parse failed:\n%.*s\n", (int)out.len, out.data);
	FUZZ_CHECK(rc == 0);
	same_commit(&c, &c2);
	FUZZ_CHECK(tfs_commit_serialize(&c2, &out2) == 0);
	FUZZ_CHECK(out.len == out2.len && !memcmp(out.data, out2.data, out.len));

	/* schema.json renders any parsed commit (an empty manifest: no columns to name). */
	tfs_buf_free(&out2);
	FUZZ_CHECK(tfs_schema_json("ds", &c, &empty, &out2) == 0);
	FUZZ_CHECK(out2.len > 0 && out2.data[out2.len - 1] == '\n');

	tfs_buf_free(&out);
	tfs_buf_free(&out2);
	tfs_commit_free(&c);
	tfs_commit_free(&c2);
	return 0;
}
