/* SPDX-License-Identifier: MIT */
/* Fuzz target for the importers of untrusted files (core/import_json.c over jansson,
 * core/import_wds.c and core/import_npz.c over libarchive, core/megatron.c): byte 0 odd, the
 * rest is a WebDataset shard (tar); 2, an .npz file; 4, a Megatron-LM dataset (bytes 1-4 the
 * .idx's length, little-endian, then the .idx, then the .bin); else a JSON Lines file. Each input
 * is imported into a fresh dataset of a real file:// lake; a bad line or sample is skipped and
 * counted, never half-imported; a bad array fails the import. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "fuzz_common.h"
#include "import.h"
#include "megatron.h"
#include "store.h"
#include "util.h"

static char tmpdir[64]; /* on tmpfs: a lake is made and removed per input */

static void cleanup(void)
{
	if (tmpdir[0])
		fuzz_rm_tree(tmpdir);
}

/* A file holding p[0, n), or abort: the fuzzer's own failure, not the input's. */
static void put_file(const char *path, const uint8_t *p, size_t n)
{
	const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || write(fd, p, n) != (ssize_t)n || close(fd))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct tfs_import_opts o = { .message = "fuzz",
				     .chunk_bytes = 256,
				     .codec = TFS_CODEC_ZSTD,
				     .level = 1,
				     .threads = 1 };
	struct tfs_import_result res;
	char src[128], url[128], lake[96], prefix[96];
	const uint8_t *body;
	size_t blen;
	unsigned kind;
	const char *shard[1] = { src };
	struct tfs_store *s;
	struct tfs_id id;
	int rc;

	if (!tmpdir[0]) {
		tfs_log_open("/dev/null"); /* skipped samples are logged by the thousand */
		snprintf(tmpdir, sizeof(tmpdir), "/dev/shm/tfs-fuzz-import-%d-XXXXXX",
			 (int)getpid());
		if (!mkdtemp(tmpdir))
			abort();
		atexit(cleanup);
	}
	if (len < 1)
		return 0;
	kind = data[0];
	body = data + 1;
	blen = len - 1;
	snprintf(prefix, sizeof(prefix), "%s/src", tmpdir);
	snprintf(src, sizeof(src), "%s.%s", prefix,
		 kind & 1    ? "tar"
		 : kind == 2 ? "npz"
		 : kind == 4 ? "bin"
			     : "jsonl");
	snprintf(lake, sizeof(lake), "%s/lake", tmpdir);
	snprintf(url, sizeof(url), "file://%s", lake);
	if (kind == 4) { /* src.idx first, src.bin (src) the rest */
		char idx[128];
		uint32_t n = 0;

		if (blen >= 4)
			memcpy(&n, body, 4);
		body += blen >= 4 ? 4 : blen;
		blen -= blen >= 4 ? 4 : blen;
		if (n > blen)
			n = (uint32_t)blen;
		snprintf(idx, sizeof(idx), "%s.idx", prefix);
		put_file(idx, body, n);
		body += n;
		blen -= n;
	}
	put_file(src, body, blen);
	if (tfs_store_open(url, TFS_STORE_CREATE, &s) || tfs_dataset_create(s, "d"))
		abort();
	memset(&res, 0, sizeof(res));
	if (kind & 1)
		rc = tfs_import_webdataset(s, "d", shard, 1, 0, &o, &res, &id);
	else if (kind == 2)
		rc = tfs_import_npz(s, "d", src, &o, &res, &id);
	else if (kind == 4)
		rc = tfs_import_megatron(s, "d", prefix, "tokens", &o, &res, &id);
	else
		rc = tfs_import_jsonl(s, "d", src, NULL, 0, NULL, NULL, 0, &o, &res, &id);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENODATA || rc == -ENOMEM || rc == -EIO ||
		   rc == -E2BIG || rc == -EFBIG);
	if (!rc) {
		/* What was committed reads back with the rows the import reported. */
		struct tfs_commit c;

		FUZZ_CHECK(!tfs_ref_read(s, "d", TFS_REF_BRANCH, "main", &id) &&
			   !tfs_commit_load(s, "d", &id, &c));
		FUZZ_CHECK(c.rows == res.rows);
		tfs_commit_free(&c);
	}
	tfs_store_close(s);
	fuzz_rm_tree(lake);
	return 0;
}
