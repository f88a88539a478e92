/* SPDX-License-Identifier: MIT */
/* Fuzz target for view names and where= filters: tfs_view_parse, then tfs_view_build on a lake. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "format.h"
#include "fuzz_common.h"
#include "import.h"
#include "npy.h"
#include "pack.h"
#include "store.h"
#include "version.h"
#include "view.h"

/* A small real file:// lake, built once: a filter reads its scalar columns through the cache
 * (several chunks each, so the block shuffle has groups to move); pack= views pack its token
 * column's documents (0 to 22 tokens each). */
#define ROWS 1000
#define CHUNK_BYTES 512

#define TMP_PREFIX "tfs-fuzz-view-"

static char tmpdir[64]; /* /tmp/tfs-fuzz-view-<pid>-XXXXXX */
static struct tfs_store *store;
static struct tfs_version *version;
static struct tfs_cache *cache;

static void die(const char *what, int rc)
{
	fprintf(stderr, "fuzz_view: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
	abort();
}

static void cleanup(void)
{
	if (version)
		tfs_version_put(version);
	if (cache)
		tfs_cache_destroy(cache);
	if (store)
		tfs_store_close(store);
	fuzz_rm_tree(tmpdir);
}

/* A crash skips cleanup(): remove what runs that are gone left behind (their pid is dead). */
static void remove_stale_lakes(void)
{
	DIR *d = opendir("/tmp");
	struct dirent *de;
	char path[300];

	if (!d)
		return;
	while ((de = readdir(d))) {
		char *end;
		long pid;

		if (strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)))
			continue;
		pid = strtol(de->d_name + strlen(TMP_PREFIX), &end, 10);
		if (*end != '-' || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "/tmp/%s", de->d_name);
		fuzz_rm_tree(path);
	}
	closedir(d);
}

/* Write an NPY file of ROWS rows of the given dtype and row shape; fill(i, p) makes row i. */
static void write_npy(const char *name, const char *descr, unsigned row_ndim,
		      const uint64_t *row_shape, void (*fill)(uint64_t i, uint8_t *row), char *path,
		      size_t cap)
{
	char hdr[TFS_NPY_ALIGN], err[128];
	struct tfs_dtype dt;
	uint64_t row_bytes;
	uint8_t *data;
	int big, fd, rc;

	rc = tfs_dtype_parse(descr, &dt, &big, err, sizeof(err));
	if (rc)
		die(err, rc);
	row_bytes = dt.itemsize;
	for (unsigned d = 0; d < row_ndim; d++)
		row_bytes *= row_shape[d];
	rc = tfs_npy_header_build(&dt, ROWS, row_ndim, row_shape, hdr);
	if (rc)
		die("npy header", rc);
	data = calloc(ROWS, row_bytes);
	if (!data)
		die("calloc", ENOMEM);
	for (uint64_t i = 0; i < ROWS; i++)
		fill(i, data + i * row_bytes);
	snprintf(path, cap, "%s/%s.npy", tmpdir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		die(path, errno);
	rc = tfs_write_full(fd, hdr, sizeof(hdr));
	if (!rc)
		rc = tfs_write_full(fd, data, ROWS * row_bytes);
	if (rc)
		die(path, rc);
	close(fd);
	free(data);
}

static void fill_label(uint64_t i, uint8_t *p)
{
	const int64_t v = (int64_t)(i % 10) - (i % 97 == 0 ? 1000 : 0);

	memcpy(p, &v, 8);
}

static void fill_x(uint64_t i, uint8_t *p)
{
	const float v = i % 50 == 0 ? -0.0f : (float)i * 0.5f - 100.0f;

	memcpy(p, &v, 4);
}

static void fill_flag(uint64_t i, uint8_t *p)
{
	*p = i % 3 == 0;
}

static void fill_half(uint64_t i, uint8_t *p)
{
	/* float16 bit patterns over the whole range: subnormals, normals, inf and NaN. */
	const uint16_t v = (uint16_t)(i * 65.537);

	memcpy(p, &v, 2);
}

static void fill_u16(uint64_t i, uint8_t *p)
{
	const uint16_t v = (uint16_t)(65535 - i * 7);

	memcpy(p, &v, 2);
}

static void fill_vec(uint64_t i, uint8_t *p)
{
	const float v[2] = { (float)i, -(float)i };

	memcpy(p, v, sizeof(v));
}

static void fill_cplx(uint64_t i, uint8_t *p)
{
	const float v[2] = { (float)i, 1.0f };

	memcpy(p, v, sizeof(v));
}

/* The token column's documents: a directory of ROWS 1-D uint16 arrays, into path. */
static void write_token_dir(char *path, size_t cap)
{
	struct tfs_dtype dt;
	char hdr[TFS_NPY_ALIGN], err[128], file[256];
	int big, rc = tfs_dtype_parse("<u2", &dt, &big, err, sizeof(err));

	if (rc)
		die(err, rc);
	snprintf(path, cap, "%s/tok", tmpdir);
	if (mkdir(path, 0700))
		die(path, errno);
	for (uint64_t i = 0; i < ROWS; i++) {
		const uint64_t n = (i * 7) % 23;
		uint16_t doc[23];
		int fd;

		for (uint64_t j = 0; j < n; j++)
			doc[j] = (uint16_t)((i + j) % 1000);
		rc = tfs_npy_header_build(&dt, n, 0, NULL, hdr);
		if (rc)
			die("npy header", rc);
		snprintf(file, sizeof(file), "%s/%06" PRIu64 ".npy", path, i);
		fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0)
			die(file, errno);
		rc = tfs_write_full(fd, hdr, sizeof(hdr));
		if (!rc && n)
			rc = tfs_write_full(fd, doc, n * sizeof(doc[0]));
		if (rc)
			die(file, rc);
		close(fd);
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const uint64_t two[1] = { 2 };
	static const struct {
		const char *name, *descr;
		unsigned ndim;
		const uint64_t *shape;
		void (*fill)(uint64_t, uint8_t *);
	} cols[] = {
		{ "label", "<i8", 0, NULL, fill_label }, { "x", "<f4", 0, NULL, fill_x },
		{ "flag", "|b1", 0, NULL, fill_flag },	 { "h", "<f2", 0, NULL, fill_half },
		{ "u", "<u2", 0, NULL, fill_u16 },	 { "vec", "<f4", 1, two, fill_vec },
		{ "z", "<c8", 0, NULL, fill_cplx },
	};
	struct tfs_import_src src[sizeof(cols) / sizeof(cols[0]) + 1];
	char paths[sizeof(cols) / sizeof(cols[0]) + 1][128], url[128];
	const size_t ncols = sizeof(cols) / sizeof(cols[0]);
	struct tfs_import_opts opts = { .message = "fuzz",
					.chunk_bytes = CHUNK_BYTES,
					.codec = TFS_CODEC_ZSTD,
					.level = 1,
					.threads = 1 };
	struct tfs_id id;
	int rc;

	(void)argc;
	(void)argv;
	tfs_log_open("/dev/null"); /* filter errors are expected by the thousand */
	remove_stale_lakes();
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/" TMP_PREFIX "%ld-XXXXXX", (long)getpid());
	if (!mkdtemp(tmpdir))
		die("mkdtemp", errno);
	atexit(cleanup);
	snprintf(url, sizeof(url), "file://%s/lake", tmpdir);
	rc = tfs_store_open(url, TFS_STORE_CREATE, &store);
	if (rc)
		die(url, rc);
	rc = tfs_dataset_create(store, "ds");
	if (rc)
		die("create", rc);
	for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
		write_npy(cols[i].name, cols[i].descr, cols[i].ndim, cols[i].shape, cols[i].fill,
			  paths[i], sizeof(paths[i]));
		src[i] = (struct tfs_import_src){ cols[i].name, paths[i], TFS_SRC_NPY, 0 };
	}
	write_token_dir(paths[ncols], sizeof(paths[ncols]));
	src[ncols] = (struct tfs_import_src){ "tok", paths[ncols], TFS_SRC_NPY_DIR, 1 };
	rc = tfs_import(store, "ds", src, ncols + 1, &opts, &id);
	if (rc)
		die("import", rc);
	rc = tfs_ref_resolve(store, "ds", "main", &id);
	if (!rc)
		rc = tfs_version_open(store, "ds", &id, &version);
	if (rc)
		die("open", rc);
	if (version->manifest.rows != ROWS || version->manifest.cols[0].nchunks < 2)
		die("lake geometry", EINVAL);
	rc = tfs_cache_create(64u << 20, &cache);
	if (rc)
		die("cache", rc);
	return 0;
}

static void check_view(const struct tfs_view_params *p, const struct tfs_view *v)
{
	/* A pack view's rows are its samples, in an order of their own. */
	const uint64_t total = v->pack ? tfs_pack_rows(v->pack) : version->manifest.rows;
	unsigned __int128 per;
	uint64_t first;
	uint8_t *seen = calloc(total ? total : 1, 1);
	int padded;

	FUZZ_CHECK(seen);
	FUZZ_CHECK(!v->pack == !p->pack);

	FUZZ_CHECK(v->matched <= total);
	if (!p->where)
		FUZZ_CHECK(v->matched == total);
	FUZZ_CHECK(v->on_error == p->on_error);
	if (p->stride) {
		/* Interleaved: the rows after start (of the whole order), dealt out evenly. */
		const uint64_t left = v->matched - (p->start < v->matched ? p->start : v->matched);

		per = p->drop_last ? left / p->world
				   : ((unsigned __int128)left + p->world - 1) / p->world;
		FUZZ_CHECK(v->n == (uint64_t)per);
	} else {
		/* Shard length, in arithmetic that cannot wrap: ceil (pad) or floor (drop_last). */
		per = p->drop_last ? v->matched / p->world
				   : ((unsigned __int128)v->matched + p->world - 1) / p->world;
		first = p->start < per ? p->start : (uint64_t)per;
		FUZZ_CHECK(v->n == (uint64_t)(per - first));
	}
	padded = !p->drop_last &&
		 (p->stride ? v->matched - (p->start < v->matched ? p->start : v->matched)
			    : v->matched) %
			 p->world;
	for (uint64_t i = 0; i < v->n; i++) {
		FUZZ_CHECK(v->rows[i] < total);
		/* Without padding every row of the order appears once across all shards. */
		if (p->drop_last || (!p->stride && v->matched % p->world == 0))
			FUZZ_CHECK(!seen[v->rows[i]]);
		seen[v->rows[i]] = 1;
		/* Unshuffled, the order is the row order, until padding wraps to its start: when
		 * the rows dealt out (all matched; strided: those after start) do not split evenly.
		 */
		if (!p->shuffle && !v->pack && i && !padded && (!p->stride || i % p->stride))
			FUZZ_CHECK(v->rows[i - 1] < v->rows[i]);
	}
	free(seen);
}

/* Build a view and check it; returns the build's rc. */
static int build(const struct tfs_view_params *p, struct tfs_view **out)
{
	char err[256];
	int rc;

	err[0] = 0;
	*out = NULL;
	rc = tfs_view_build(version, cache, p, out, err, sizeof(err));
	/* The lake is sound: a filter is right or wrong, a pack view's col= and eos= are, and a
	 * query view needs a saved query, which this lake does not have; nothing else may fail. */
	if (rc && rc != -EINVAL)
		fprintf(stderr, "build: %s (%d)\n", err, rc);
	FUZZ_CHECK(rc == 0 || (rc == -EINVAL && (p->where || p->pack || p->query)));
	FUZZ_CHECK(memchr(err, 0, sizeof(err)));
	if (rc) {
		FUZZ_CHECK(err[0]);
		return rc;
	}
	check_view(p, *out);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct tfs_view_params p;
	struct tfs_view *v = NULL, *again = NULL, *neg = NULL, *rows = NULL, *all = NULL;
	char *name, err[256];
	int rc;

	/* A view name is a C string (a directory name, a control-file target). */
	name = malloc(len + 1);
	if (!name)
		return 0;
	memcpy(name, data, len);
	name[len] = 0;
	err[0] = 0;
	rc = tfs_view_parse(name, &p, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == -EINVAL);
	FUZZ_CHECK(memchr(err, 0, sizeof(err)));
	if (rc) {
		FUZZ_CHECK(err[0] && p.where == NULL);
		goto out;
	}
	FUZZ_CHECK(p.world >= 1 && p.rank < p.world);
	FUZZ_CHECK(p.drop_last == 0 || p.drop_last == 1);
	FUZZ_CHECK(p.shuffle == 0 || p.shuffle == 1);
	FUZZ_CHECK(!p.where || p.where[0]);

	if (build(&p, &v))
		goto out;
	/* Views are deterministic: the same parameters give the same rows. */
	FUZZ_CHECK(build(&p, &again) == 0);
	FUZZ_CHECK(again->n == v->n && again->matched == v->matched);
	FUZZ_CHECK(v->n == 0 || !memcmp(again->rows, v->rows, v->n * sizeof(v->rows[0])));
	/* A filter and its negation split the rows between them (of a pack view: the documents
	 * it packs, so the rows views of the same filter are compared). */
	if (p.where) {
		struct tfs_view_params rp = p, np;
		size_t n = strlen(p.where) + 8;

		rp.pack = 0;
		rp.col = NULL; /* p's, freed with p */
		rp.has_eos = 0;
		np = rp;
		np.where = malloc(n);
		FUZZ_CHECK(np.where);
		snprintf(np.where, n, "not (%s)", p.where);
		FUZZ_CHECK(build(&rp, &rows) == 0);
		rc = build(&np, &neg);
		if (rc)
			fprintf(stderr, "'%s' builds but '%s' does not\n", p.where, np.where);
		FUZZ_CHECK(rc == 0);
		FUZZ_CHECK(rows->matched + neg->matched == version->manifest.rows);
		free(np.where);
		/* Packing some of the documents makes no more samples than packing them all. */
		if (p.pack) {
			struct tfs_view_params ap = p;

			ap.where = NULL;
			FUZZ_CHECK(build(&ap, &all) == 0);
			FUZZ_CHECK(v->matched <= all->matched);
		}
	}
out:
	tfs_view_free(v);
	tfs_view_free(again);
	tfs_view_free(neg);
	tfs_view_free(rows);
	tfs_view_free(all);
	tfs_view_params_free(&p);
	free(name);
	return 0;
}
