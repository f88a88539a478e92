/* SPDX-License-Identifier: MIT */
/* vector_cmd: `tensorfs vector index URL[@REF] COLUMN --ivf NLIST [--pq M] [--metric ...]`
 * builds an IVF (or IVF-PQ) index of an embedding column with FAISS (mount/vindex.h) and keeps
 * it in the lake beside the column, pinned to the commit it indexes:
 * DATASET/vectors/COLUMN/<commit id>, a line "tensorfs-vindex 1 metric=M ivf=N pq=M rows=R
 * dim=D" and the index's bytes. `vector ls URL` lists them; `tensorfs sql ... --near
 * COLUMN=Q.npy --nprobe P` searches one (exact search is the default). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "format.h"
#include "knn.h"
#include "store.h"
#include "util.h"
#include "version.h"
#include "vindex.h"

#define MAGIC "tensorfs-vindex 1"
static const char *const metric_names[] = { "ip", "cosine", "l2" };

static void index_key(const char *ds, const char *col, const struct tfs_id *commit, char *out)
{
	char hex[TFS_ID_HEX];

	tfs_id_hex(commit, hex);
	snprintf(out, TFS_KEY_MAX, "%s/vectors/%s/%s", ds, col, hex);
}

/* Row r's vector into out (d floats), cosine: normalised. */
static void normalise(float *x, size_t d)
{
	double n = 0;

	for (size_t j = 0; j < d; j++)
		n += (double)x[j] * x[j];
	if (n > 0)
		for (size_t j = 0; j < d; j++)
			x[j] = (float)(x[j] / sqrt(n));
}

static int build(struct tfs_store *s, const char *ds, struct tfs_version *v, const char *colname,
		 size_t nlist, size_t pq, enum tfs_knn_metric metric, uint64_t ntrain)
{
	const int at = tfs_version_column(v, colname);
	const struct tfs_column *c = at < 0 ? NULL : &v->manifest.cols[at];
	struct tfs_cache *cache = NULL;
	struct tfs_vindex *ix = NULL;
	struct tfs_buf out = { 0 };
	float *train = NULL, *x = NULL;
	int64_t *ids = NULL;
	uint8_t *bytes = NULL;
	size_t len = 0, d;
	char err[512], key[TFS_KEY_MAX];
	int rc;

	if (!c || c->kind != TFS_COL_FIXED || strcmp(c->dtype.descr, "<f4") || c->ndim != 1) {
		tfs_err("vector index: %s is not a column of float32 vectors", colname);
		return -EINVAL;
	}
	d = (size_t)c->shape[0];
	if (c->rows < nlist) {
		tfs_err("vector index: %" PRIu64 " rows are fewer than --ivf %zu lists", c->rows,
			nlist);
		return -EINVAL;
	}
	rc = tfs_cache_create(256ull << 20, &cache);
	if (!rc && tfs_vindex_create(d, nlist, pq, metric != TFS_KNN_L2, &ix, err, sizeof(err))) {
		tfs_err("vector index: %s", err);
		rc = -EINVAL;
	}
	/* Training: evenly spaced rows, at most ntrain. */
	ntrain = ntrain < c->rows ? ntrain : c->rows;
	train = rc ? NULL : malloc(ntrain * d * sizeof(*train) + 1);
	if (!rc && !train)
		rc = -ENOMEM;
	for (uint64_t i = 0; !rc && i < ntrain; i++) {
		const uint64_t r = i * c->rows / ntrain;

		if (tfs_version_read(v, cache, (size_t)at, r * c->row_bytes, train + i * d,
				     c->row_bytes) != (ssize_t)c->row_bytes)
			rc = -EIO;
		if (metric == TFS_KNN_COSINE)
			normalise(train + i * d, d);
	}
	if (!rc && tfs_vindex_train(ix, train, (size_t)ntrain, err, sizeof(err))) {
		tfs_err("vector index: %s", err);
		rc = -EINVAL;
	}
	/* Every row, a chunk at a time. */
	for (size_t k = 0; !rc && k < c->nchunks; k++) {
		const uint64_t first = tfs_column_chunk_first(c, k),
			       m = tfs_column_chunk_rows(c, k);
		float *g = realloc(x, m * d * sizeof(*x) + 1);
		int64_t *gi = realloc(ids, m * sizeof(*ids) + 1);

		if (g)
			x = g;
		if (gi)
			ids = gi;
		if (!g || !gi) {
			rc = -ENOMEM;
			break;
		}
		if (tfs_version_read(v, cache, (size_t)at, first * c->row_bytes, x,
				     m * c->row_bytes) != (ssize_t)(m * c->row_bytes))
			rc = -EIO;
		for (uint64_t i = 0; !rc && i < m; i++) {
			ids[i] = (int64_t)(first + i);
			if (metric == TFS_KNN_COSINE)
				normalise(x + i * d, d);
		}
		if (!rc && tfs_vindex_add(ix, x, (size_t)m, ids, err, sizeof(err))) {
			tfs_err("vector index: %s", err);
			rc = -EINVAL;
		}
	}
	if (rc == -EIO)
		tfs_err("vector index: column %s cannot be read", colname);
	if (!rc && tfs_vindex_save(ix, &bytes, &len, err, sizeof(err))) {
		tfs_err("vector index: %s", err);
		rc = -EIO;
	}
	if (!rc)
		rc = tfs_buf_printf(&out,
				    MAGIC " metric=%s ivf=%zu pq=%zu rows=%" PRIu64 " dim=%zu\n",
				    metric_names[metric], nlist, pq, c->rows, d)
			     ?: tfs_buf_append(&out, bytes, len);
	if (!rc) {
		index_key(ds, colname, &v->commit.id, key);
		rc = tfs_store_put(s, key, out.data, out.len);
	}
	if (!rc) {
		char hex[TFS_ID_HEX];

		tfs_id_hex(&v->commit.id, hex);
		char kind[32];

		snprintf(kind, sizeof(kind), pq ? "PQ%zu" : "Flat", pq);
		printf("indexed %s of %s at commit %.12s: %" PRIu64 " vectors of %zu, IVF%zu,%s, "
		       "%s, %zu bytes\n",
		       colname, ds, hex, c->rows, d, nlist, kind, metric_names[metric], len);
	}
	free(bytes);
	free(train);
	free(x);
	free(ids);
	tfs_buf_free(&out);
	tfs_vindex_free(ix);
	tfs_cache_destroy(cache);
	return rc;
}

int tfs_cli_vindex_search(struct tfs_store *s, const char *ds, struct tfs_version *v,
			  const char *col, const float *q, size_t nq, size_t d,
			  enum tfs_knn_metric metric, size_t k, size_t nprobe, const uint64_t *rows,
			  uint64_t n, struct tfs_knn_hit *out, size_t *found)
{
	char key[TFS_KEY_MAX], err[512], m[16];
	struct tfs_buf b = { 0 };
	struct tfs_vindex *ix = NULL;
	const uint8_t *nl;
	float *qq = NULL, *scores = NULL;
	int64_t *labels = NULL;
	int rc;

	index_key(ds, col, &v->commit.id, key);
	rc = tfs_store_get(s, key, &b);
	if (rc == -ENOENT) {
		tfs_err("--nprobe: no vector index of %s at this commit (tensorfs vector index URL "
			"%s "
			"--ivf NLIST)",
			col, col);
		return -EINVAL;
	}
	if (rc)
		return rc;
	nl = memchr(b.data, '\n', b.len);
	if (!nl || strncmp((const char *)b.data, MAGIC " metric=", sizeof(MAGIC " metric=") - 1) ||
	    sscanf((const char *)b.data + sizeof(MAGIC " metric=") - 1, "%15[a-z2]", m) != 1) {
		tfs_err("%s: not a vector index", key);
		rc = -EIO;
		goto out;
	}
	if (strcmp(m, metric_names[metric])) {
		tfs_err("--nprobe: the index of %s is for --metric %s", col, m);
		rc = -EINVAL;
		goto out;
	}
	if (tfs_vindex_load(nl + 1, b.len - (size_t)(nl + 1 - b.data), &ix, err, sizeof(err))) {
		tfs_err("%s: %s", key, err);
		rc = -EIO;
		goto out;
	}
	if (tfs_vindex_dim(ix) != d) {
		tfs_err("--near: vectors of %zu values, the index's are %zu", d,
			tfs_vindex_dim(ix));
		rc = -EINVAL;
		goto out;
	}
	qq = malloc(nq * d * sizeof(*qq) + 1);
	scores = malloc(nq * k * sizeof(*scores) + 1);
	labels = malloc(nq * k * sizeof(*labels) + 1);
	if (!qq || !scores || !labels) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(qq, q, nq * d * sizeof(*qq));
	for (size_t i = 0; metric == TFS_KNN_COSINE && i < nq; i++)
		normalise(qq + i * d, d);
	if (tfs_vindex_search(ix, qq, nq, k, nprobe, (const int64_t *)rows, (size_t)n, scores,
			      labels, err, sizeof(err))) {
		tfs_err("--nprobe: %s", err);
		rc = -EIO;
		goto out;
	}
	for (size_t i = 0; i < nq; i++) {
		found[i] = 0;
		for (size_t j = 0; j < k && labels[i * k + j] >= 0; j++) {
			out[i * k + j].row = (uint64_t)labels[i * k + j];
			out[i * k + j].score = scores[i * k + j];
			found[i]++;
		}
	}
out:
	free(qq);
	free(scores);
	free(labels);
	tfs_vindex_free(ix);
	tfs_buf_free(&b);
	return rc;
}

static int print_one(void *arg, const char *name, int is_dir)
{
	(void)arg;
	if (is_dir)
		printf("%s\n", name);
	return 0;
}

int tfs_cmd_vector(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "ivf", required_argument, NULL, 'i' },
		{ "pq", required_argument, NULL, 'p' },
		{ "metric", required_argument, NULL, 'm' },
		{ "train", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	enum tfs_knn_metric metric = TFS_KNN_COSINE;
	size_t nlist = 0, pq = 0;
	uint64_t ntrain = 0;
	struct tfs_store *s = NULL;
	struct tfs_version *v = NULL;
	struct tfs_id id;
	char *url, *ds = NULL, *at;
	const char *ref = "main";
	int opt, rc;

	if (argc >= 3 && !strcmp(argv[1], "ls")) {
		char key[TFS_KEY_MAX];

		if (argc != 3 || tfs_cli_open_dataset(argv[2], 0, &s, &ds))
			return argc != 3 ? tfs_cli_usage(2) : 1;
		snprintf(key, sizeof(key), "%s/vectors", ds);
		rc = tfs_store_list(s, key, print_one, NULL);
		free(ds);
		tfs_store_close(s);
		return rc && rc != -ENOENT ? 1 : 0;
	}
	if (argc < 2 || strcmp(argv[1], "index"))
		return tfs_cli_usage(2);
	argc--;
	argv++;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt == 'i')
			nlist = (size_t)strtoull(optarg, NULL, 10);
		else if (opt == 'p')
			pq = (size_t)strtoull(optarg, NULL, 10);
		else if (opt == 't')
			ntrain = strtoull(optarg, NULL, 10);
		else if (opt == 'm' && tfs_knn_metric_parse(optarg, &metric)) {
			tfs_err("--metric %s: cosine, l2 or ip", optarg);
			return 2;
		} else if (opt != 'm')
			return tfs_cli_usage(2);
	}
	if (argc - optind != 2 || !nlist) {
		tfs_err("vector index URL[@REF] COLUMN --ivf NLIST [--pq M] [--metric "
			"cosine|l2|ip] "
			"[--train N]");
		return 2;
	}
	url = strdup(argv[optind]);
	if (!url)
		return 1;
	at = strrchr(strrchr(url, '/') ? strrchr(url, '/') : url, '@');
	if (at) {
		*at = 0;
		ref = at + 1;
	}
	if (tfs_cli_open_dataset(url, 0, &s, &ds)) {
		free(url);
		return 1;
	}
	tfs_cli_keep_freed_memory();
	rc = tfs_cli_resolve(s, url, ds, ref, &id);
	if (!rc)
		rc = tfs_version_open(s, ds, &id, &v);
	if (!rc)
		rc = build(s, ds, v, argv[optind + 1], nlist, pq, metric,
			   ntrain ? ntrain : (nlist * 64 < 262144 ? nlist * 64 : 262144));
	tfs_version_put(v);
	free(ds);
	free(url);
	tfs_store_close(s);
	return rc ? 1 : 0;
}
