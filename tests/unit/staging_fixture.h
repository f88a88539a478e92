/* SPDX-License-Identifier: MIT */
/* staging_fixture: a small real lake (two columns, 1000 rows) shared by the staging unit tests.
 * Included by one test program each: STAGING_TMPDIR names its temporary directory template. */
#ifndef TFS_STAGING_FIXTURE_H
#define TFS_STAGING_FIXTURE_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "format.h"
#include "import.h"
#include "npy.h"
#include "staging.h"
#include "store.h"
#include "version.h"

#define N 1000

static char tmpdir[] = STAGING_TMPDIR;
static struct tfs_store *store;
static struct tfs_version *ver;
static struct tfs_cache *cache;
static struct tfs_workpool *pool;

/* Column a: uint16 rows of 3 (row*3+j); column b: int64 row*7. */
static void write_npy(const char *path, const char *descr, unsigned ndim, const uint64_t *shape,
		      const void *data, size_t len)
{
	struct tfs_dtype dt;
	char hdr[TFS_NPY_ALIGN], err[128];
	int big, fd;

	assert_int_equal(tfs_dtype_parse(descr, &dt, &big, err, sizeof(err)), 0);
	assert_int_equal(tfs_npy_header_build(&dt, N, ndim, shape, hdr), 0);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, hdr, sizeof(hdr)), (ssize_t)sizeof(hdr));
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static int setup(void **state)
{
	static uint16_t a[N][3];
	static int64_t b[N];
	static const uint64_t shape_a[] = { 3 };
	struct tfs_import_opts o = { .codec = TFS_CODEC_ZSTD, .level = 1, .chunk_bytes = 1024 };
	struct tfs_import_src src[2];
	char pa[512], pb[512], url[512];
	struct tfs_id id;

	(void)state;
	if (!mkdtemp(tmpdir))
		return -1;
	for (int i = 0; i < N; i++) {
		for (int j = 0; j < 3; j++)
			a[i][j] = (uint16_t)(i * 3 + j);
		b[i] = (int64_t)i * 7;
	}
	snprintf(pa, sizeof(pa), "%s/a.npy", tmpdir);
	snprintf(pb, sizeof(pb), "%s/b.npy", tmpdir);
	write_npy(pa, "<u2", 1, shape_a, a, sizeof(a));
	write_npy(pb, "<i8", 0, NULL, b, sizeof(b));
	snprintf(url, sizeof(url), "file://%s/lake", tmpdir);
	if (tfs_store_open(url, TFS_STORE_CREATE, &store) || tfs_dataset_create(store, "d"))
		return -1;
	src[0] = (struct tfs_import_src){ "a", pa, TFS_SRC_NPY, 0 };
	src[1] = (struct tfs_import_src){ "b", pb, TFS_SRC_NPY, 0 };
	if (tfs_import(store, "d", src, 2, &o, &id) || tfs_version_open(store, "d", &id, &ver))
		return -1;
	if (tfs_cache_create(1 << 20, &cache) || tfs_workpool_create(2, &pool))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	char cmd[600];

	(void)state;
	tfs_workpool_destroy(pool);
	tfs_version_put(ver);
	tfs_cache_destroy(cache);
	tfs_store_close(store);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) ? -1 : 0;
}

/* A ring of depth slots of max_rows rows over both columns, on device. */
static struct tfs_staging *ring(int device, unsigned depth, uint64_t max_rows, int *rc_out)
{
	struct tfs_staging_config cfg = {
		.ver = ver,
		.cache = cache,
		.ncols = 2,
		.cols = { 0, 1 },
		.max_rows = max_rows,
		.depth = depth,
		.device = device,
		.shm_dir = tmpdir,
		.tag = "unit",
		.uid = getuid(),
		.gid = getgid(),
	};
	struct tfs_staging *st = NULL;
	char err[256] = "";

	cfg.cols[0] = (size_t)tfs_version_column(ver, "a");
	cfg.cols[1] = (size_t)tfs_version_column(ver, "b");
	cfg.pool = pool;
	*rc_out = tfs_staging_create(&cfg, &st, err, sizeof(err));
	return st;
}

#endif
