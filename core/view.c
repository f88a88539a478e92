/* SPDX-License-Identifier: MIT */
/* view: a version's rows in another order: a row filter, a deterministic block shuffle and a DDP
 * shard, named by a parameter string such as "seed=7,epoch=3,rank=0,world=8". */
#include "view.h"

#include "pack.h"
#include "query.h"
#include "rng.h"
#include "viewfilter.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SET_ERR(...) snprintf(err, err_cap, __VA_ARGS__)
#define MAX_WHERE 4096 /* bytes of a where= expression (bounds the tree's depth too) */

const char tfs_view_readme[] =
	"Views: a version's rows filtered, shuffled and sharded, as a directory name.\n"
	"\n"
	"  views/<key>=<value>,<key>=<value>,.../<column>.npy\n"
	"\n"
	"  seed=N       shuffle with this seed (any 64-bit number)\n"
	"  epoch=N      shuffle epoch: every epoch has its own order (default 0)\n"
	"  block=N      shuffle window, in chunks (default: as many chunks of the widest\n"
	"               column as make half the mount's cache_mem, rounded down to a\n"
	"               power of two: 256 MiB with the default 512M)\n"
	"  rank=R       this shard (default 0)\n"
	"  world=W      number of shards (default 1)\n"
	"  drop_last=1  drop the rows that do not divide by world; the default (0) pads the\n"
	"               last shards with rows from the start of the shuffled order, as\n"
	"               PyTorch's DistributedSampler does, so every shard has the same length\n"
	"  start=N      skip the first N rows of this shard (to resume mid-epoch); with\n"
	"               stride, the first N rows of the whole order\n"
	"  stride=B     interleaved shards: rank r takes the r-th B rows of every\n"
	"               world x B rows of the order (B: the per-rank batch size), so\n"
	"               after k batches on every rank the job has read exactly the\n"
	"               first k x world x B rows; a run checkpointed at one world size\n"
	"               resumes at another with start=<rows read>, each row once.\n"
	"               Every rank reads every chunk of a window (one shared mount\n"
	"               serves them once; separate machines each fetch it)\n"
	"  on_error=fail|pad|skip\n"
	"               rows of a chunk damaged for good (it fails its checksum after a\n"
	"               refetch, does not decode, or the store answers it missing or\n"
	"               forbidden: the same on every node): fail (default) reads them as\n"
	"               EIO; pad reads them as zeros, the files keep their size; skip\n"
	"               pads the files and leaves the rows out of control-file batches,\n"
	"               which take the next healthy rows of the order instead (as does\n"
	"               tensorfs.torch.Dataset). Bad chunks are listed in\n"
	"               .tensorfs/bad_rows and the log; a view's bad rows in its .bad_rows\n"
	"  where=EXPR   keep the rows where EXPR holds, over scalar columns:\n"
	"               comparisons < <= > >= == != , x in (1,2,3), x not in (...),\n"
	"               and, or, not, parentheses; %XX escapes are decoded, so\n"
	"               where=label%20in%20(1,2,3) works where a shell or URL needs them\n"
	"\n"
	"Example: views/seed=7,epoch=3,rank=0,world=8/image.npy\n"
	"\n"
	"Order. The filter runs first, then the shuffle, then the shard, then start. The\n"
	"shuffle is a block shuffle: rows are grouped by the chunk of the dataset's widest\n"
	"column they live in, the groups are put in a random order, cut into as few windows\n"
	"of at most <block> groups as hold them all (the same number of groups each, give\n"
	"or take one), and the rows of every window are shuffled among themselves. The order is\n"
	"uniform across the whole dataset at the chunk level and within each window at the\n"
	"row level; a front-to-back reader needs only <block> chunks at a time, so it reads\n"
	"at close to sequential speed. A larger block mixes rows more at the cost of more\n"
	"chunks in memory per reader: on data sorted by class, a stretch of the view holds\n"
	"rows of at most <block> chunks, so for near-uniform classes in every 1,000 rows the\n"
	"window must span many class runs (small chunks or a large block). Measured on rows\n"
	"stored class by class (100 classes, 1 KiB rows, 4 MiB chunks; classes in every\n"
	"1,000 view rows, mean / least over the epoch; tests/bench/bench_shuffle.py):\n"
	"\n"
	"    window (block)       100,000 rows (25 chunks)   400,000 rows (98 chunks)\n"
	"    16 MiB (4)             18.7 / 12                   8.3 / 6\n"
	"    64 MiB (16)            56.7 / 52                  26.3 / 23\n"
	"    128 MiB (32)          100.0 / 99                  43.3 / 39\n"
	"    256 MiB (64, default) 100.0 / 99                  71.3 / 67\n"
	"    392 MiB (98)          100.0 / 99                 100.0 / 99\n"
	"\n"
	"A window as large as the dataset mixes perfectly; each doubling of the window\n"
	"doubles the classes a stretch can hold and the memory a reader needs. Data sorted\n"
	"by class mixes best stored mixed: import --images DIR --shuffle SEED. The widest\n"
	"column may be ragged, text or bytes (its data's bytes a row): its rows are then\n"
	"grouped by the data chunk they start in, read from its offsets. Every rank of\n"
	"a job must build the same order: mounts with a different cache_mem (one not in the\n"
	"same power of two) choose another default window, so give such ranks an explicit\n"
	"block=.\n"
	"The generator is xoshiro256** seeded from (seed, epoch) through splitmix64, with\n"
	"integer arithmetic only: the same parameters give the same\n"
	"order on every machine. Shards are contiguous slices of the shuffled order: their\n"
	"union is every row (plus padding), they are pairwise disjoint when world divides\n"
	"the row count or drop_last=1, and each depends only on the parameters.\n"
	"\n"
	"Unknown keys or bad values make the directory not exist (ENOENT); the daemon's log\n"
	"says why. The view's files have the view's row count in their NPY header.\n"
	"\n"
	"Packed samples. pack=S makes a view of a token column's documents (a ragged\n"
	"column of rank 1 and integer dtype; col=NAME when there are several) packed into\n"
	"samples of S + 1 tokens, as Megatron-LM's GPTDataset does:\n"
	"\n"
	"  views/pack=2048,eos=0,seed=7,rank=0,world=8/tokens.npy    (N, S+1), x = row[:-1],\n"
	"                                                            y = row[1:]\n"
	"                                             segments.npy  (N, S+1) uint16 (uint32\n"
	"                                                            past S+1 = 65536): each\n"
	"                                                            token's document within\n"
	"                                                            its sample, from 0\n"
	"                                             doc.npy       (N, 2) int64: the document\n"
	"                                                            (row) and token offset\n"
	"                                                            the sample starts at\n"
	"\n"
	"  eos=ID       a token appended to every document in the stream (none by default)\n"
	"  where=EXPR   pack only the documents (rows) where EXPR holds, e.g.\n"
	"               pack=2048,where=quality>0.8,seed=1; a saved query's views\n"
	"               (queries/NAME/views/pack=S,...) pack the rows it selected\n"
	"\n"
	"The documents are taken in the column's order (a saved query's: its order) or, with\n"
	"seed= or epoch=, in a Fisher-Yates shuffle by the generator above. The stream is\n"
	"every document in that order, each followed by the eos. Sample k is stream tokens\n"
	"[k S, k S + S + 1), so consecutive samples share a token; a stream of T tokens makes\n"
	"(T - 1) / S samples and the tail too short for one is left out. With a seed the\n"
	"samples then take an order of their own from the same generator (continuing after\n"
	"the documents' shuffle), and rank, world, stride, start and drop_last shard that\n"
	"order as they shard rows: any rank computes any sample from the commit and the name\n"
	"alone, and a job resumes at another world size with start=. block= does not apply.\n"
	"The index arrays (document order, each sample's first document and offset, sample\n"
	"order) are built when the view is first opened, in O(documents + samples) time and\n"
	"memory (8 bytes a row of the column and a document packed, 24 a sample), and kept\n"
	"with the view.\n";

/* --- parameters ----------------------------------------------------------------------------- */

/* The value, %XX escapes decoded; *nul set when one decodes to a NUL byte (which would cut the
 * value short unseen: where=label<3%00garbage is not where=label<3). */
static char *percent_decode(const char *s, size_t n, int *nul)
{
	char *out = malloc(n + 1);

	if (out)
		*nul = tfs_percent_decode(s, n, out) != strlen(out);
	return out;
}

static int parse_u64(const char *v, uint64_t *out)
{
	char *end;

	if (!isdigit((unsigned char)*v))
		return -1;
	errno = 0;
	*out = strtoull(v, &end, 10);
	return errno || *end ? -1 : 0;
}

void tfs_view_params_free(struct tfs_view_params *p)
{
	free(p->col);
	p->col = NULL;
	free(p->query);
	p->query = NULL;
	free(p->where);
	p->where = NULL;
}

int tfs_view_parse(const char *name, struct tfs_view_params *p, char *err, size_t err_cap)
{
	static const char *const keys[] = { "seed",  "epoch",	  "rank",  "world",    "block",
					    "start", "drop_last", "where", "on_error", "stride",
					    "pack",  "col",	  "eos" };
	const char *s = name;
	unsigned seen = 0;
	int rc = 0;

	memset(p, 0, sizeof(*p));
	p->world = 1;
	if (!*name) {
		SET_ERR("empty view name");
		return -EINVAL;
	}
	while (*s && !rc) {
		const char *end = s, *eq;
		int depth = 0, nul;
		char key[16], *val;
		size_t klen;

		/* A comma ends the pair only outside parentheses: where=x in (1,2). */
		while (*end && (*end != ',' || depth > 0)) {
			depth += *end == '(' ? 1 : *end == ')' ? -1 : 0;
			end++;
		}
		eq = memchr(s, '=', (size_t)(end - s));
		if (!eq || eq == s || (size_t)(eq - s) >= sizeof(key)) {
			SET_ERR("'%.*s' is not key=value", (int)(end - s), s);
			rc = -EINVAL;
			break;
		}
		klen = (size_t)(eq - s);
		memcpy(key, s, klen);
		key[klen] = 0;
		/* A name means one view: seed=1,seed=2 would leave which seed to chance. */
		for (unsigned i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			if (strcmp(key, keys[i]))
				continue;
			if (seen & (1u << i)) {
				SET_ERR("'%s' is given twice", key);
				rc = -EINVAL;
			}
			seen |= 1u << i;
		}
		if (rc)
			break;
		val = percent_decode(eq + 1, (size_t)(end - eq - 1), &nul);
		if (!val) {
			rc = -ENOMEM;
			break;
		}
		if (nul) {
			SET_ERR("%s: %%00 (a NUL byte) has no place in a view name", key);
			free(val);
			rc = -EINVAL;
			break;
		}
		if (!strcmp(key, "on_error")) {
			p->on_error = !strcmp(val, "fail")   ? TFS_ON_ERROR_FAIL
				      : !strcmp(val, "pad")  ? TFS_ON_ERROR_PAD
				      : !strcmp(val, "skip") ? TFS_ON_ERROR_SKIP
							     : -1;
			if ((int)p->on_error < 0) {
				SET_ERR("on_error=%s: expected fail, pad or skip", val);
				rc = -EINVAL;
			}
		} else if (!strcmp(key, "query")) {
			char *at = strrchr(val, '@');

			free(p->query);
			p->query = val;
			val = NULL;
			if (!at || at == p->query || tfs_id_parse(at + 1, &p->query_id)) {
				SET_ERR("query=%s: expected NAME@VERSION", p->query);
				rc = -EINVAL;
			} else {
				*at = 0;
				if (!tfs_name_valid(p->query)) {
					SET_ERR("query=%s: not a query name (up to 128 letters, "
						"digits, '_', '.', '-')", p->query);
					rc = -EINVAL;
				}
			}
		} else if (!strcmp(key, "col")) {
			free(p->col);
			p->col = val;
			val = NULL;
			if (!*p->col) {
				SET_ERR("col= needs a column name");
				rc = -EINVAL;
			}
		} else if (!strcmp(key, "where")) {
			free(p->where);
			p->where = val;
			val = NULL;
			if (!*p->where) {
				SET_ERR("where= needs an expression");
				rc = -EINVAL;
			} else if (strlen(p->where) > MAX_WHERE) {
				SET_ERR("where= is longer than %d bytes", MAX_WHERE);
				rc = -EINVAL;
			}
		} else {
			uint64_t x;

			if (parse_u64(val, &x)) {
				SET_ERR("%s=%s: expected a non-negative integer", key, val);
				rc = -EINVAL;
			} else if (!strcmp(key, "seed")) {
				p->seed = x;
				p->shuffle = 1;
				p->has_seed = 1;
			} else if (!strcmp(key, "epoch")) {
				p->epoch = x;
				p->shuffle = 1;
			} else if (!strcmp(key, "rank")) {
				p->rank = x;
			} else if (!strcmp(key, "world")) {
				p->world = x;
			} else if (!strcmp(key, "block")) {
				p->block = x;
				if (x == 0) {
					SET_ERR("block=0: expected at least 1");
					rc = -EINVAL;
				}
			} else if (!strcmp(key, "start")) {
				p->start = x;
			} else if (!strcmp(key, "pack")) {
				p->pack = x;
				if (x == 0 || x >= UINT32_MAX) {
					SET_ERR("pack=%s: expected 1 to %u tokens a sample", val,
						UINT32_MAX - 1);
					rc = -EINVAL;
				}
			} else if (!strcmp(key, "eos")) {
				p->eos = x;
				p->has_eos = 1;
			} else if (!strcmp(key, "stride")) {
				p->stride = x;
				if (x == 0) {
					SET_ERR("stride=0: expected at least 1");
					rc = -EINVAL;
				}
			} else if (!strcmp(key, "drop_last")) {
				if (x > 1) {
					SET_ERR("drop_last=%s: expected 0 or 1", val);
					rc = -EINVAL;
				}
				p->drop_last = (int)x;
			} else {
				SET_ERR("unknown view key '%s' (seed, epoch, block, rank, world, "
					"drop_last, start, stride, where, on_error, pack, col, "
					"eos)",
					key);
				rc = -EINVAL;
			}
		}
		free(val);
		s = *end ? end + 1 : end;
	}
	if (!rc && p->world == 0) {
		SET_ERR("world=0: expected at least 1");
		rc = -EINVAL;
	}
	if (!rc && p->rank >= p->world) {
		SET_ERR("rank=%" PRIu64 " is not below world=%" PRIu64, p->rank, p->world);
		rc = -EINVAL;
	}
	if (!rc && !p->pack && (p->col || p->has_eos)) {
		SET_ERR("col= and eos= belong to pack= views");
		rc = -EINVAL;
	}
	if (!rc && p->query && p->where) {
		SET_ERR("a saved query's view takes no where= (the query chose its rows)");
		rc = -EINVAL;
	}
	if (!rc && p->pack && p->block) {
		SET_ERR("block= does not apply to a pack= view (its documents are shuffled whole)");
		rc = -EINVAL;
	}
	if (rc)
		tfs_view_params_free(p);
	return rc;
}

/* --- shuffle -------------------------------------------------------------------------------- */

/* The chunk geometry shuffles follow: the column whose rows hold the most bytes (it dominates
 * what is read), a fixed column by its row's bytes, a column of another kind (ragged, text,
 * bytes) by its data part's bytes a row. Rows of the second are grouped by the data chunk their
 * bytes start in, from its offsets (data_groups); grouping them by the chunks of the offsets
 * part itself (8 bytes a row: 524,288 rows a 4 MiB chunk, whatever the rows' bytes) made a window
 * the whole column, and a reader of a view larger than the cache read each chunk many times. */
struct shuffle_geometry {
	const struct tfs_column *c; /* the fixed column, or the data part; NULL: none */
	size_t header;		    /* with a data part: its column */
	uint64_t chunk_bytes;	    /* a group's bytes */
};

static struct shuffle_geometry widest(const struct tfs_manifest *m)
{
	struct shuffle_geometry g = { NULL, 0, 0 };
	uint64_t best = 0;

	for (size_t i = 0; i < m->ncols; i++) {
		const struct tfs_column *c = &m->cols[i], *d;
		uint64_t bytes;

		if (c->part != TFS_PART_NONE)
			continue;
		if (c->kind == TFS_COL_FIXED) {
			if (g.c && c->row_bytes <= best)
				continue;
			g = (struct shuffle_geometry){ c, i,
						       c->rows_per_chunk
							       ? c->rows_per_chunk * c->row_bytes
							       : tfs_column_max_chunk_bytes(c) };
			best = c->row_bytes;
			continue;
		}
		d = &m->cols[c->data];
		bytes = m->rows ? d->rows * d->row_bytes / m->rows : 0;
		if ((g.c && bytes <= best) || !d->nchunks)
			continue;
		g = (struct shuffle_geometry){
			d, i, (d->rows * d->row_bytes + d->nchunks - 1) / d->nchunks
		};
		best = bytes;
	}
	return g;
}

/* With a data part: every row's group, the data chunk its bytes start in (a row of no bytes at
 * the very end: the last chunk), into *out (handed over). The offsets are read through the cache,
 * a chunk of them at a time, as a reader of the view reads them. A chunk of them damaged for good
 * (-EIO: every machine finds it so) puts its rows where they would start at the data's mean row
 * size, and its rows read as bad rows; any other failure fails the view, whose order would
 * otherwise differ from other machines'. */
static int data_groups(struct tfs_version *v, struct tfs_cache *cache,
		       const struct shuffle_geometry *g, uint32_t **out, char *err, size_t err_cap)
{
	const struct tfs_manifest *m = &v->manifest;
	const size_t oc = m->cols[g->header].offsets;
	const struct tfs_column *d = g->c, *o = &m->cols[oc];
	uint32_t *gr = malloc((m->rows ? m->rows : 1) * sizeof(*gr));
	int rc = 0;

	*out = NULL;
	if (!gr || d->nchunks > UINT32_MAX) {
		free(gr);
		return -ENOMEM;
	}
	for (size_t k = 0; k < o->nchunks && !rc; k++) {
		const uint64_t first = tfs_column_chunk_first(o, k);
		const uint64_t end = first + tfs_column_chunk_rows(o, k) < m->rows
					     ? first + tfs_column_chunk_rows(o, k)
					     : m->rows;
		struct tfs_cache_entry *e = NULL;

		rc = tfs_version_chunk_get(v, cache, oc, k, &e);
		if (!rc && e->len < (end - first) * sizeof(uint64_t))
			rc = -EIO;
		for (uint64_t r = first; r < end && (!rc || rc == -EIO); r++) {
			uint64_t a;

			if (rc) /* where row r starts at the mean size */
				a = (uint64_t)((unsigned __int128)r * d->rows / m->rows);
			else
				memcpy(&a, e->data + (r - first) * sizeof(a), sizeof(a));
			a /= d->row_bytes ? d->row_bytes : 1;
			gr[r] = (uint32_t)(a < d->rows ? tfs_column_chunk_of(d, a)
						       : d->nchunks - 1);
		}
		if (e)
			tfs_cache_put(cache, e);
		rc = rc == -EIO ? 0 : rc;
	}
	if (rc) {
		SET_ERR("shuffle: cannot read the offsets of column %s: %s",
			m->cols[g->header].name, strerror(-rc));
		free(gr);
		return rc;
	}
	*out = gr;
	return 0;
}

/* The group of row r: from groups (a data part's), or its chunk of the fixed column (every row
 * its own group without a column). */
static uint64_t group_of(const struct shuffle_geometry *g, const uint32_t *groups, uint64_t r)
{
	const struct tfs_column *c = g->c;

	if (groups)
		return groups[r];
	if (!c)
		return r;
	return c->rows_per_chunk ? r / c->rows_per_chunk : tfs_column_chunk_of(c, r);
}

/* Block shuffle of rows (ascending on entry) grouped by their chunk of `by`, into out. */
static int block_shuffle(const uint64_t *rows, uint64_t n, const struct shuffle_geometry *by,
			 const uint32_t *groups, uint64_t block, uint64_t seed, uint64_t epoch,
			 uint64_t *out)
{
	uint64_t ngroups = 0, *start = NULL, *order = NULL, k = 0, nwin;
	struct tfs_rng r;

	/* Groups: runs of rows in the same chunk. start[g] indexes rows. */
	start = malloc((n + 1) * sizeof(*start));
	if (!start)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++)
		if (i == 0 || group_of(by, groups, rows[i]) != group_of(by, groups, rows[i - 1]))
			start[ngroups++] = i;
	start[ngroups] = n;
	order = malloc((ngroups ? ngroups : 1) * sizeof(*order));
	if (!order) {
		free(start);
		return -ENOMEM;
	}
	for (uint64_t g = 0; g < ngroups; g++)
		order[g] = g;
	tfs_rng_seed(&r, seed, epoch);
	tfs_rng_shuffle(&r, order, ngroups);
	/* As few windows as hold `block` groups each, the groups spread evenly over them: no
	 * window is left with a stray group or two (a stretch of few classes). */
	nwin = ngroups / block + (ngroups % block != 0); /* no overflow for any block */
	for (uint64_t w = 0, g = 0; w < nwin; w++) {
		/* The first ngroups % nwin windows take one group more. */
		const uint64_t rem = ngroups % nwin;
		const uint64_t end = (w + 1) * (ngroups / nwin) + (w + 1 < rem ? w + 1 : rem);
		uint64_t first = k;

		for (; g < end; g++)
			for (uint64_t i = start[order[g]]; i < start[order[g] + 1]; i++)
				out[k++] = rows[i];
		tfs_rng_shuffle(&r, out + first, k - first);
	}
	free(order);
	free(start);
	return 0;
}

uint64_t tfs_view_default_window(uint64_t cache_budget)
{
	uint64_t w = TFS_VIEW_WINDOW_BYTES;

	while (w * 2 <= cache_budget / 2)
		w *= 2;
	/* A small cache: a window larger than half of it would be read with its chunks evicted. */
	while (cache_budget && w > cache_budget / 2 && w > (1u << 20))
		w /= 2;
	return w;
}

static uint64_t default_window(struct tfs_cache *cache)
{
	struct tfs_cache_stats st = { 0 };

	if (cache)
		tfs_cache_stats(cache, &st);
	return tfs_view_default_window(st.budget);
}

/* Interleaved shards (stride=B): the order from global row `start` on is dealt out B rows at a
 * time, rank r taking the r-th B rows of every W x B, so that when every rank has read k x B
 * rows the job has read rows start .. start + k x W x B of the order, whatever W was: a run
 * resumes at another world size with start = the rows read so far. The last round, shorter
 * than W x B, is split evenly; drop_last=0 pads it from the start of what was left. */
static int shard_strided(const struct tfs_view_params *p, const uint64_t *rows, uint64_t n,
			 struct tfs_view *view)
{
	const uint64_t first = p->start < n ? p->start : n, left = n - first, b = p->stride;
	const uint64_t w = p->world;
	uint64_t per = left / w + (!p->drop_last && left % w ? 1 : 0), full, tail;

	if (!left)
		per = 0;
	full = per / b; /* whole rounds */
	tail = per - full * b;
	view->n = per;
	view->rows = malloc((per ? per : 1) * sizeof(*view->rows));
	if (!view->rows)
		return -ENOMEM;
	for (uint64_t i = 0; i < per; i++) {
		const uint64_t e = i < full * b ? (i / b) * w * b + p->rank * b + i % b
						: full * w * b + p->rank * tail + (i - full * b);

		view->rows[i] = rows[first + e % left];
	}
	return 0;
}

/* The shard of order rows[0..n) that p names into view (its rows, matched and on_error). */
static int shard(const struct tfs_view_params *p, const uint64_t *rows, uint64_t n,
		 struct tfs_view *view)
{
	uint64_t per, first;

	view->matched = n;
	view->on_error = p->on_error;
	if (p->stride)
		return shard_strided(p, rows, n, view);
	/* Contiguous slices of the order, padded from its start unless drop_last. */
	per = n / p->world + (!p->drop_last && n % p->world ? 1 : 0); /* no overflow */
	if (n == 0)
		per = 0;
	first = p->start < per ? p->start : per;
	view->n = per - first;
	view->rows = malloc((view->n ? view->n : 1) * sizeof(*view->rows));
	if (!view->rows)
		return -ENOMEM;
	for (uint64_t i = 0; i < view->n; i++)
		view->rows[i] = rows[(p->rank * per + first + i) % n];
	return 0;
}

int tfs_view_shard(const struct tfs_view_params *p, const uint64_t *rows, uint64_t n,
		   struct tfs_view **out)
{
	struct tfs_view *view = calloc(1, sizeof(*view));
	int rc = view ? shard(p, rows, n, view) : -ENOMEM;

	if (rc) {
		tfs_view_free(view);
		return rc;
	}
	*out = view;
	return 0;
}

/* A saved query's rows (query.h), checked against v: its commit, and rows v has. */
static int query_rows(struct tfs_version *v, const struct tfs_view_params *p, uint64_t **rows,
		      uint64_t *n, char *err, size_t err_cap)
{
	struct tfs_query q;
	int rc = tfs_query_load(v->store, v->ds, p->query, &p->query_id, &q);

	if (rc) {
		SET_ERR("query %s: its version cannot be read (%s)", p->query, strerror(-rc));
		return rc == -ENOENT ? -EINVAL : rc;
	}
	if (!tfs_id_eq(&q.commit, &v->commit.id)) {
		SET_ERR("query %s was saved against another commit", p->query);
		rc = -EINVAL;
	}
	if (!rc)
		rc = tfs_query_rows(v->store, v->ds, &q, rows);
	for (uint64_t i = 0; !rc && i < q.nrows; i++)
		if ((*rows)[i] >= v->manifest.rows) {
			SET_ERR("query %s: row %" PRIu64 " is not a row of its commit", p->query,
				(*rows)[i]);
			rc = -EIO;
		}
	*n = q.nrows;
	if (rc) {
		free(*rows);
		*rows = NULL;
	}
	tfs_query_free(&q);
	return rc;
}

/* The rows a saved query or a where= filter chooses, in their order; *rows NULL (every row)
 * when the view names neither. */
static int chosen_rows(struct tfs_version *v, struct tfs_cache *cache,
		       const struct tfs_view_params *p, uint64_t **rows, uint64_t *n, char *err,
		       size_t err_cap)
{
	*rows = NULL;
	*n = 0;
	if (p->query)
		return query_rows(v, p, rows, n, err, err_cap);
	if (p->where)
		return tfs_view_filter_rows(v, cache, p->where, rows, n, err, err_cap);
	return 0;
}

/* A pack= view: the samples (pack.h) of every document, of those where= keeps or of a saved
 * query's, in their order, sharded. */
static int build_pack(struct tfs_version *v, struct tfs_cache *cache,
		      const struct tfs_view_params *p, struct tfs_view **out, char *err,
		      size_t err_cap)
{
	struct tfs_pack_params pp = { .seq = p->pack,
				      .col = p->col,
				      .has_eos = p->has_eos,
				      .eos = p->eos,
				      .shuffle = p->shuffle,
				      .seed = p->seed,
				      .epoch = p->epoch };
	struct tfs_view *view = NULL;
	uint64_t *docs;
	int rc = chosen_rows(v, cache, p, &docs, &pp.ndocs, err, err_cap);

	if (rc)
		return rc;
	pp.docs = docs;
	view = calloc(1, sizeof(*view));
	rc = view ? tfs_pack_build(v, cache, &pp, &view->pack, err, err_cap) : -ENOMEM;
	free(docs);
	if (!rc)
		rc = shard(p, tfs_pack_order(view->pack), tfs_pack_rows(view->pack), view);
	if (rc) {
		tfs_view_free(view);
		return rc;
	}
	*out = view;
	return 0;
}

int tfs_view_build(struct tfs_version *v, struct tfs_cache *cache, const struct tfs_view_params *p,
		   struct tfs_view **out, char *err, size_t err_cap)
{
	const uint64_t total = v->manifest.rows;
	uint64_t *rows = NULL, *order = NULL, n;
	struct tfs_view *view = NULL;
	uint32_t *groups = NULL;
	int rc = 0;

	if (p->pack)
		return build_pack(v, cache, p, out, err, err_cap);
	rc = chosen_rows(v, cache, p, &rows, &n, err, err_cap);
	if (rc)
		return rc;
	if (!p->query && !p->where) {
		n = total;
		rows = malloc((n ? n : 1) * sizeof(*rows));
		if (!rows)
			return -ENOMEM;
		for (uint64_t i = 0; i < n; i++)
			rows[i] = i;
	}
	if (p->shuffle) {
		const struct shuffle_geometry w = widest(&v->manifest);
		uint64_t block = p->block;

		if (!block) {
			block = w.chunk_bytes ? default_window(cache) / w.chunk_bytes
					      : TFS_VIEW_MAX_BLOCK;
			block = block < TFS_VIEW_MIN_BLOCK ? TFS_VIEW_MIN_BLOCK : block;
			block = block > TFS_VIEW_MAX_BLOCK ? TFS_VIEW_MAX_BLOCK : block;
		}
		order = malloc((n ? n : 1) * sizeof(*order));
		if (!order) {
			rc = -ENOMEM;
			goto out;
		}
		if (w.c && w.c->part == TFS_PART_DATA)
			rc = data_groups(v, cache, &w, &groups, err, err_cap);
		if (!rc)
			rc = block_shuffle(rows, n, &w, groups, block, p->seed, p->epoch, order);
		if (rc)
			goto out;
		free(rows);
		rows = order;
		order = NULL;
	}
	view = calloc(1, sizeof(*view));
	rc = view ? shard(p, rows, n, view) : -ENOMEM;
	if (!rc) {
		*out = view;
		view = NULL;
	}
out:
	tfs_view_free(view);
	free(groups);
	free(order);
	free(rows);
	return rc;
}

void tfs_view_free(struct tfs_view *view)
{
	if (!view)
		return;
	tfs_pack_free(view->pack);
	free(view->rows);
	free(view);
}

int tfs_view_chunk_order(const struct tfs_view *view, const struct tfs_column *c, uint32_t **order,
			 size_t *n, uint32_t **pos)
{
	uint32_t *o = malloc((c->nchunks ? c->nchunks : 1) * sizeof(*o));
	uint32_t *p = malloc((c->nchunks ? c->nchunks : 1) * sizeof(*p));
	size_t count = 0;

	if (!o || !p) {
		free(o);
		free(p);
		return -ENOMEM;
	}
	for (size_t k = 0; k < c->nchunks; k++)
		p[k] = UINT32_MAX;
	for (uint64_t i = 0; i < view->n; i++) {
		size_t k = tfs_column_chunk_of(c, view->rows[i]);

		if (p[k] == UINT32_MAX) {
			p[k] = (uint32_t)count;
			o[count++] = (uint32_t)k;
		}
	}
	*order = o;
	*n = count;
	*pos = p;
	return 0;
}
