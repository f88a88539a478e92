/* SPDX-License-Identifier: MIT */
/* Unit tests of core/reader against a real lake: a gather list run by the plain C loop gives
 * each column kind's rows (fixed, ragged, text, bytes) as reading them one by one does, from
 * wherever the computed offsets were written; bad rows are padded from the reader's map. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "badchunks.h"
#include "import.h"
#include "npy.h"
#include "reader.h"
#include "store.h"
#include "version.h"
#include "workpool.h"

#include "npyfile_fixture.h"
#include "tmpdir_fixture.h"

#define NJ 400 /* JSON Lines rows */
#define NW 120 /* WebDataset samples */

static struct tfs_store *store;
static struct tfs_version *vj, *vw; /* id/vec/name; key/cls/bin */
static struct tfs_version *vf;	    /* img: 8000 rows of 600 bytes in framed 256 KiB chunks */
#define NF 8000
#define FB 600
static struct tfs_cache *cache;

static int setup(void **state)
{
	const struct tfs_import_opts o = { .codec = TFS_CODEC_ZSTD,
					   .level = 1,
					   .chunk_bytes = 512 };
	struct tfs_import_result res;
	char path[256], url[256], cmd[512];
	const char *shard = path;
	struct tfs_id id;
	FILE *f;

	(void)state;
	if (tmpdir_make("reader"))
		return -1;
	/* id: int64, vec: ragged float64 of 0..6 values, name: text of varying length. */
	snprintf(path, sizeof(path), "%s/rows.jsonl", tmpdir);
	f = fopen(path, "w");
	for (int i = 0; i < NJ; i++) {
		fprintf(f, "{\"id\": %d, \"vec\": [", i * 11);
		for (int j = 0; j < i % 7; j++)
			fprintf(f, "%s%d.5", j ? ", " : "", i + j);
		fprintf(f, "], \"name\": \"row %d%.*s\"}\n", i, i % 23, "xxxxxxxxxxxxxxxxxxxxxxxx");
	}
	fclose(f);
	snprintf(url, sizeof(url), "file://%s/lake", tmpdir);
	if (tfs_store_open(url, TFS_STORE_CREATE, &store) || tfs_dataset_create(store, "j") ||
	    tfs_dataset_create(store, "w"))
		return -1;
	if (tfs_import_jsonl(store, "j", path, NULL, 0, NULL, NULL, 1, &o, &res, &id) ||
	    tfs_version_open(store, "j", &id, &vj))
		return -1;
	/* A WebDataset shard: cls (fixed int64) and bin (bytes, 0..300 of them). */
	snprintf(path, sizeof(path), "%s/wds", tmpdir);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s", path);
	if (system(cmd))
		return -1;
	for (int i = 0; i < NW; i++) {
		char p[300];

		snprintf(p, sizeof(p), "%s/s%04d.cls", path, i);
		f = fopen(p, "w");
		fprintf(f, "%d", i % 10);
		fclose(f);
		snprintf(p, sizeof(p), "%s/s%04d.bin", path, i);
		f = fopen(p, "w");
		for (int j = 0; j < (i * 37) % 301; j++)
			fputc((i * 7 + j) & 0xff, f);
		fclose(f);
	}
	snprintf(cmd, sizeof(cmd), "cd %s/wds && tar cf ../shard.tar $(ls | sort)", tmpdir);
	if (system(cmd))
		return -1;
	snprintf(path, sizeof(path), "%s/shard.tar", tmpdir);
	if (tfs_import_webdataset(store, "w", &shard, 1, 1, &o, &res, &id) ||
	    tfs_version_open(store, "w", &id, &vw))
		return -1;
	/* img: framed chunks (64 KiB frames), for the frames mode. */
	{
		const struct tfs_import_opts of = { .codec = TFS_CODEC_ZSTD,
						    .level = 1,
						    .chunk_bytes = 256 << 10 };
		struct tfs_import_src src = { "img", path, TFS_SRC_NPY, 0 };

		snprintf(path, sizeof(path), "%s/img.npy", tmpdir);
		if (npyfile_write_u1(path, NF, FB))
			return -1;
		if (tfs_dataset_create(store, "f") || tfs_import(store, "f", &src, 1, &of, &id) ||
		    tfs_version_open(store, "f", &id, &vf))
			return -1;
	}
	return tfs_cache_create(64 << 20, &cache) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	tfs_version_put(vj);
	tfs_version_put(vw);
	tfs_version_put(vf);
	tfs_cache_destroy(cache);
	tfs_store_close(store);
	return tmpdir_remove();
}

/* Rows to gather: runs of consecutive rows, repeats and jumps. */
static size_t pick(uint64_t *rows, size_t cap, uint64_t nrows, unsigned seed)
{
	size_t n = 0;

	srand(seed);
	while (n < cap) {
		const uint64_t r = (uint64_t)rand() % nrows;
		const size_t run = (size_t)(rand() % 9) + 1;

		for (size_t j = 0; j < run && n < cap && r + j < nrows; j++)
			rows[n++] = r + j;
	}
	return n;
}

/* Bytes of version row r of column col read by the version, one row at a time: the reference. */
static uint8_t *row_bytes(struct tfs_version *v, size_t col, uint64_t r, uint64_t *len)
{
	const struct tfs_column *c = &v->manifest.cols[col];
	uint8_t *buf;
	uint64_t off[2];

	if (c->kind == TFS_COL_FIXED) {
		*len = c->row_bytes;
		buf = malloc(*len);
		assert_int_equal(tfs_version_read(v, cache, col, r * c->row_bytes, buf, *len),
				 (ssize_t)*len);
		return buf;
	}
	assert_int_equal(tfs_version_read(v, cache, c->offsets, r * 8, off, 16), 16);
	*len = off[1] - off[0];
	buf = malloc(*len ? *len : 1);
	if (*len)
		assert_int_equal(tfs_version_read(v, cache, c->data, off[0], buf, *len),
				 (ssize_t)*len);
	return buf;
}

/* The gathered rows of col in dst, laid out at `at`, against the reference; rows listed in
 * padded_rows (a bad row) must be zeros or empty. */
static void check(struct tfs_version *v, size_t col, const uint64_t *rows, size_t n,
		  const struct tfs_gather_place *at, const uint8_t *dst, const uint8_t *bad)
{
	const struct tfs_column *c = &v->manifest.cols[col];
	const uint64_t *offs = (const uint64_t *)(const void *)(dst + at->col_off);

	if (c->kind != TFS_COL_FIXED)
		assert_int_equal(offs[0], 0);
	for (size_t i = 0; i < n; i++) {
		uint64_t len;
		uint8_t *want = row_bytes(v, col, rows[i], &len);
		const int is_bad = bad && bad[i];

		if (c->kind == TFS_COL_FIXED) {
			const uint8_t *got = dst + at->col_off + i * c->row_bytes;

			if (is_bad)
				for (uint64_t b = 0; b < len; b++)
					assert_int_equal(got[b], 0);
			else
				assert_memory_equal(got, want, len);
		} else {
			const uint64_t glen = offs[i + 1] - offs[i];

			assert_int_equal(glen, is_bad ? 0 : len);
			if (glen)
				assert_memory_equal(dst + at->data_off + offs[i], want, len);
			if (c->kind == TFS_COL_RAGGED && !is_bad) {
				int64_t shape;

				assert_int_equal(tfs_version_read(v, cache, c->shapes, rows[i] * 8,
								  &shape, 8),
						 8);
				assert_int_equal(
					((const int64_t *)(const void *)(dst + at->shapes_off))[i],
					shape);
			}
		}
		free(want);
	}
}

#define ROWS 300
#define ROOM (256u << 10)

static void layout(struct tfs_gather_place *at)
{
	at->col_off = 0;
	at->shapes_off = (ROWS + 1) * 8;
	at->data_off = at->shapes_off + ROWS * 8;
	at->room = ROOM;
}

/* Gather col's rows with meta at the destination (the host slot) and with meta elsewhere (a
 * pinned ring apart from device memory): the same bytes either way. */
static void gather_both_ways(struct tfs_version *v, const char *name, unsigned seed)
{
	const int col = tfs_version_column(v, name);
	const size_t bytes = (ROWS + 1) * 8 + ROWS * 8 + ROOM;
	uint8_t *dst = calloc(1, bytes), *meta = calloc(1, bytes), *apart = calloc(1, bytes);
	struct tfs_gather_list l;
	struct tfs_gather_place at;
	struct tfs_gather_result res;
	struct tfs_reader *r;
	uint64_t rows[ROWS];
	const size_t n = pick(rows, ROWS, v->manifest.rows, seed);

	assert_true(col >= 0);
	layout(&at);
	assert_int_equal(tfs_reader_open(v, cache, 0, &r), 0);
	tfs_gather_list_init(&l, cache);
	assert_int_equal(tfs_reader_gather(r, (size_t)col, rows, n, &at, dst, &l, &res), 0);
	assert_true(l.nops > 0 && l.npins > 0);
	assert_true(l.nops < n + 2 || v->manifest.cols[col].kind != TFS_COL_FIXED);
	tfs_gather_list_run(&l, dst);
	check(v, (size_t)col, rows, n, &at, dst, NULL);
	tfs_gather_list_release(&l);
	assert_int_equal(l.npins, 0);

	/* Offsets computed into meta; the destination sees them only through the list. */
	assert_int_equal(tfs_reader_gather(r, (size_t)col, rows, n, &at, meta, &l, &res), 0);
	tfs_gather_list_run(&l, apart);
	check(v, (size_t)col, rows, n, &at, apart, NULL);
	tfs_gather_list_free(&l);
	tfs_reader_close(r);
	free(dst);
	free(meta);
	free(apart);
}

static void test_fixed(void **state)
{
	(void)state;
	gather_both_ways(vj, "id", 1);
	gather_both_ways(vw, "cls", 2);
}

static void test_ragged(void **state)
{
	(void)state;
	gather_both_ways(vj, "vec", 3);
}

static void test_text(void **state)
{
	(void)state;
	gather_both_ways(vj, "name", 4);
	gather_both_ways(vw, "key", 5);
}

static void test_bytes(void **state)
{
	(void)state;
	assert_int_equal(vw->manifest.cols[tfs_version_column(vw, "bin")].kind, TFS_COL_BYTES);
	gather_both_ways(vw, "bin", 6);
}

/* Frames mode: a few rows of each chunk come from single frames (less decoded than the whole
 * chunks), rows that straddle frames included, the same bytes as whole chunks give. */
static void test_frames(void **state)
{
	const int col = tfs_version_column(vf, "img");
	const struct tfs_column *c = &vf->manifest.cols[col];
	const size_t bytes = (ROWS + 1) * 8 + ROWS * 8 + ROOM;
	uint8_t *dst = calloc(1, bytes);
	struct tfs_gather_place at;
	struct tfs_gather_result res;
	struct tfs_gather_list l;
	struct tfs_cache_stats cs;
	struct tfs_cache *fresh;
	struct tfs_reader *r;
	uint64_t rows[6], whole = 0;

	(void)state;
	assert_true(c->nchunks >= 4);
	assert_int_equal(tfs_cache_create(64 << 20, &fresh), 0);
	for (size_t i = 0; i < 6; i++) {
		rows[i] = i * 1321 + 5; /* a row of each of six chunks */
		whole += tfs_column_chunk_rows(c, tfs_column_chunk_of(c, rows[i])) * FB;
	}
	layout(&at);
	assert_int_equal(tfs_reader_open(vf, fresh, 0, &r), 0);
	tfs_reader_frames(r, 1);
	tfs_gather_list_init(&l, fresh);
	assert_int_equal(tfs_reader_gather(r, (size_t)col, rows, 6, &at, dst, &l, &res), 0);
	tfs_gather_list_run(&l, dst);
	tfs_cache_stats(fresh, &cs);
	assert_true(cs.bytes_loaded < whole * 3 / 4); /* frames, not whole chunks */
	check(vf, (size_t)col, rows, 6, &at, dst, NULL);
	tfs_gather_list_free(&l);
	tfs_reader_close(r);
	tfs_cache_destroy(fresh);
	free(dst);
}

/* Chunk k's frame entry e, which starts at chunk offset base, against img. */
static void check_frame(const struct tfs_column *c, size_t k, const struct tfs_cache_entry *e,
			uint64_t base)
{
	const uint64_t first = tfs_column_chunk_first(c, k);

	for (size_t o = 0; o < e->len; o += 97)
		assert_int_equal(e->data[o],
				 npyfile_byte(first + (base + o) / FB, (base + o) % FB));
	assert_int_equal(e->data[e->len - 1],
			 npyfile_byte(first + (base + e->len - 1) / FB, (base + e->len - 1) % FB));
}

/* A read of a chunk's frames at once (a page fault's read-around; here all but the chunk's last
 * byte) gets its first frame pinned and leaves every frame of the run cached, each decoded once,
 * the frames after the first on the pool when one is given (else on this thread): the reads that
 * follow are hits. A read of the whole chunk gets it whole, with no index read. */
static void test_frame_runs(void **state)
{
	const int col = tfs_version_column(vf, "img");
	const struct tfs_column *c = &vf->manifest.cols[col];
	struct tfs_workpool *pool;

	(void)state;
	assert_int_equal(tfs_workpool_create(3, &pool), 0);
	for (int pooled = 0; pooled < 2; pooled++) {
		struct tfs_cache_stats cs0, cs1;
		struct tfs_cache *fresh;

		assert_int_equal(tfs_cache_create(64 << 20, &fresh), 0);
		for (size_t k = 0; k < 4; k++) {
			const uint64_t bytes = tfs_column_chunk_rows(c, k) * FB;
			struct tfs_cache_entry *e;
			uint64_t base = 1;

			assert_int_equal(tfs_version_piece_get(vf, fresh, pooled ? pool : NULL,
							       (size_t)col, k, 0, bytes - 1, &e,
							       &base),
					 0);
			assert_int_equal(base, 0);
			assert_true(e->len < bytes && bytes > 2 * e->len); /* a frame of several */
			check_frame(c, k, e, base);
			tfs_cache_put(fresh, e);
		}
		if (pooled)
			assert_true(tfs_workpool_busy_peak(pool) > 0); /* frames ran as tasks */
		else
			assert_int_equal(tfs_workpool_busy_peak(pool), 0);
		tfs_cache_stats(fresh, &cs0);
		for (size_t k = 0; k < 4; k++) {
			const uint64_t bytes = tfs_column_chunk_rows(c, k) * FB;

			for (uint64_t in = 0; in < bytes; in += 20000) {
				struct tfs_cache_entry *e;
				uint64_t base;

				assert_int_equal(tfs_version_piece_get(vf, fresh, NULL, (size_t)col,
								       k, in, 1, &e, &base),
						 0);
				assert_true(base <= in && in < base + e->len);
				check_frame(c, k, e, base);
				tfs_cache_put(fresh, e);
			}
		}
		tfs_cache_stats(fresh, &cs1);
		assert_int_equal(cs1.misses, cs0.misses); /* every frame was cached by its run */
		assert_int_equal(cs1.bytes_loaded, cs0.bytes_loaded);
		tfs_cache_destroy(fresh);
	}
	for (size_t k = 0; k < 2; k++) {
		const uint64_t bytes = tfs_column_chunk_rows(c, k) * FB;
		struct tfs_cache_stats cs;
		struct tfs_cache *fresh;
		struct tfs_cache_entry *e;
		uint64_t base = 1;

		assert_int_equal(tfs_cache_create(64 << 20, &fresh), 0);
		assert_int_equal(tfs_version_piece_get(vf, fresh, pool, (size_t)col, k, 0,
						       bytes + (k ? FB : 0), &e, &base),
				 0);
		assert_int_equal(base, 0);
		assert_int_equal(e->len, bytes);
		check_frame(c, k, e, base);
		tfs_cache_put(fresh, e);
		tfs_cache_stats(fresh, &cs);
		assert_int_equal(cs.misses, 1); /* the chunk alone: no index */
		tfs_cache_destroy(fresh);
	}
	tfs_workpool_destroy(pool);
}

/* Chunk k read whole, every byte against img. */
static void check_chunk(const struct tfs_column *c, size_t k, struct tfs_cache *fresh, int want_rc)
{
	const uint64_t first = tfs_column_chunk_first(c, k);
	struct tfs_cache_entry *e;

	assert_int_equal(
		tfs_version_chunk_get(vf, fresh, (size_t)tfs_version_column(vf, "img"), k, &e),
		want_rc);
	if (want_rc)
		return;
	assert_int_equal(e->len, tfs_column_chunk_rows(c, k) * FB);
	for (size_t o = 0; o < e->len; o++)
		if (e->data[o] != npyfile_byte(first + o / FB, o % FB))
			fail_msg("chunk %zu byte %zu", k, o);
	tfs_cache_put(fresh, e);
}

/* A chunk read whole after a reader that jumps left frames of it cached (frames 1 and 3 of its
 * 4) reads only the others, a request a run, and copies the cached ones: every byte as stored.
 * A chunk with none cached is one whole read. A missing frame damaged on the disk is EIO, not
 * the cached frames with wrong bytes between them. */
static void test_chunk_from_frames(void **state)
{
	const int col = tfs_version_column(vf, "img");
	const struct tfs_column *c = &vf->manifest.cols[col];
	const size_t k = 2, frame = 109 * FB; /* the most whole rows in 64 KiB */
	struct tfs_store_counters s0, s1;
	struct tfs_cache *fresh;
	char key[TFS_KEY_MAX], path[1024];
	FILE *f;
	int ch;

	(void)state;
	assert_int_equal(tfs_column_chunk_rows(c, k) * FB, 4 * frame);
	assert_int_equal(tfs_cache_create(64 << 20, &fresh), 0);
	for (size_t i = 1; i < 4; i += 2) {
		struct tfs_cache_entry *e;
		uint64_t base;

		assert_int_equal(tfs_version_piece_get(vf, fresh, NULL, (size_t)col, k,
						       i * frame + 10, 1, &e, &base),
				 0);
		assert_int_equal(base, i * frame);
		assert_int_equal(e->len, frame);
		tfs_cache_put(fresh, e);
	}
	tfs_store_counters(store, &s0);
	check_chunk(c, k, fresh, 0);
	tfs_store_counters(store, &s1);
	assert_int_equal(s1.gets - s0.gets, 0);
	assert_int_equal(s1.ranged_gets - s0.ranged_gets, 2); /* frames 0 and 2 */
	assert_true(s1.bytes_read - s0.bytes_read < c->chunks[k].stored_size * 3 / 4);

	/* Nothing of chunk k + 1 cached: the object, whole. */
	check_chunk(c, k + 1, fresh, 0);
	tfs_store_counters(store, &s0);
	assert_int_equal(s0.gets - s1.gets, 1);
	assert_int_equal(s0.ranged_gets - s1.ranged_gets, 0);

	/* Frame 0 of chunk k + 2 cached; a byte of frame 3 flipped on the disk. */
	{
		struct tfs_cache_entry *e;
		uint64_t base;

		assert_int_equal(
			tfs_version_piece_get(vf, fresh, NULL, (size_t)col, k + 2, 5, 1, &e, &base),
			0);
		tfs_cache_put(fresh, e);
	}
	tfs_object_key(vf->ds, &c->chunks[k + 2].id, key);
	snprintf(path, sizeof(path), "%s/lake/%s", tmpdir, key);
	f = fopen(path, "r+b");
	assert_non_null(f);
	assert_int_equal(fseek(f, -100, SEEK_END), 0);
	ch = fgetc(f);
	assert_int_equal(fseek(f, -100, SEEK_END), 0);
	fputc(ch ^ 0x10, f);
	fclose(f);
	check_chunk(c, k + 2, fresh, -EIO);
	tfs_cache_destroy(fresh);
}

/* A chunk is pinned once a list however the batch's rows alternate among chunks, as a shuffled
 * batch's do: here 100 chunks in turn, three times over (more than the last pins a frame is
 * looked for among). */
static void test_pins_once(void **state)
{
	const struct tfs_import_opts o = { .codec = TFS_CODEC_ZSTD,
					   .level = 1,
					   .chunk_bytes = 8 << 10 };
	const size_t bytes = (ROWS + 1) * 8 + ROWS * 8 + ROOM;
	uint8_t *dst = calloc(1, bytes);
	char path[256];
	struct tfs_import_src src = { "img", path, TFS_SRC_NPY, 0 };
	struct tfs_gather_place at;
	struct tfs_gather_result res;
	struct tfs_gather_list l;
	struct tfs_version *vp;
	struct tfs_reader *r;
	const struct tfs_column *c;
	uint64_t rows[ROWS];
	struct tfs_id id;
	int col;

	(void)state;
	snprintf(path, sizeof(path), "%s/img.npy", tmpdir); /* setup's 8000 rows of 600 bytes */
	assert_int_equal(tfs_dataset_create(store, "p"), 0);
	assert_int_equal(tfs_import(store, "p", &src, 1, &o, &id), 0);
	assert_int_equal(tfs_version_open(store, "p", &id, &vp), 0);
	col = tfs_version_column(vp, "img");
	c = &vp->manifest.cols[col];
	assert_true(c->nchunks >= 100);
	for (size_t i = 0; i < ROWS; i++)
		rows[i] = tfs_column_chunk_first(c, i % 100) + i / 100;
	layout(&at);
	assert_int_equal(tfs_reader_open(vp, cache, 0, &r), 0);
	tfs_gather_list_init(&l, cache);
	assert_int_equal(tfs_reader_gather(r, (size_t)col, rows, ROWS, &at, dst, &l, &res), 0);
	assert_int_equal(l.npins, 100);
	tfs_gather_list_run(&l, dst);
	check(vp, (size_t)col, rows, ROWS, &at, dst, NULL);
	/* Released and used again: the map starts empty. */
	tfs_gather_list_release(&l);
	assert_int_equal(tfs_reader_gather(r, (size_t)col, rows + 150, 150, &at, dst, &l, &res), 0);
	assert_int_equal(l.npins, 100);
	tfs_gather_list_run(&l, dst);
	check(vp, (size_t)col, rows + 150, 150, &at, dst, NULL);
	tfs_gather_list_free(&l);
	tfs_reader_close(r);
	tfs_version_put(vp);
	free(dst);
}

/* Rows that do not fit a column's room: -E2BIG with the bytes they need. */
static void test_room(void **state)
{
	const int col = tfs_version_column(vw, "bin");
	uint64_t rows[NW], need = 0;
	uint8_t *dst = calloc(1, 64 << 10);
	struct tfs_gather_place at = { 0, 4096, 0, 1000 };
	struct tfs_gather_result res;
	struct tfs_gather_list l;
	struct tfs_reader *r;

	(void)state;
	for (size_t i = 0; i < NW; i++) {
		rows[i] = i;
		need += (uint64_t)((i * 37) % 301);
	}
	assert_int_equal(tfs_reader_open(vw, cache, 0, &r), 0);
	tfs_gather_list_init(&l, cache);
	assert_int_equal(tfs_reader_gather(r, (size_t)col, rows, NW, &at, dst, &l, &res), -E2BIG);
	assert_int_equal(res.need, need);
	tfs_gather_list_free(&l);
	tfs_reader_close(r);
	free(dst);
}

/* A chunk recorded damaged: with pad its rows are zeros (fixed) or empty (text), counted, and
 * named by tfs_reader_row_bad / tfs_reader_bytes_bad; without pad the reader reads on (the bytes
 * here are intact: the record alone decides). Runs last: the record is the process's. */
static void test_pad_bad_rows(void **state)
{
	const int id = tfs_version_column(vj, "id"), name = tfs_version_column(vj, "name");
	const struct tfs_column *ci = &vj->manifest.cols[id], *cn = &vj->manifest.cols[name];
	const struct tfs_column *dn = &vj->manifest.cols[cn->data];
	const size_t bytes = (ROWS + 1) * 8 + ROWS * 8 + ROOM;
	uint8_t *dst = calloc(1, bytes), bad[ROWS];
	struct tfs_bad_chunk b = { 0 };
	struct tfs_gather_place at;
	struct tfs_gather_result res;
	struct tfs_gather_list l;
	struct tfs_reader *r, *r0;
	uint64_t rows[ROWS];
	size_t n, nbad = 0;

	(void)state;
	assert_true(ci->nchunks > 2 && dn->nchunks > 2);
	assert_int_equal(tfs_reader_open(vj, cache, 1, &r), 0);
	assert_int_equal(tfs_reader_open(vj, cache, 0, &r0), 0);
	assert_int_equal(tfs_reader_row_bad(r, (size_t)id, 0), 0);
	b.id = ci->chunks[1].id;
	tfs_bad_chunk_note(&b);
	b.id = dn->chunks[2].id;
	tfs_bad_chunk_note(&b);
	/* The reader's map follows the record. */
	assert_true(tfs_reader_chunk_bad(r, (size_t)id, 1));
	assert_false(tfs_reader_chunk_bad(r, (size_t)id, 0));
	assert_true(tfs_reader_row_bad(r, (size_t)id, tfs_column_chunk_first(ci, 1)));
	assert_false(tfs_reader_row_bad(r, (size_t)id, 0));

	layout(&at);
	n = pick(rows, ROWS, vj->manifest.rows, 7);
	/* Fixed: rows of chunk 1 are zeros. */
	tfs_gather_list_init(&l, cache);
	assert_int_equal(tfs_reader_gather(r, (size_t)id, rows, n, &at, dst, &l, &res), 0);
	tfs_gather_list_run(&l, dst);
	for (size_t i = 0; i < n; i++) {
		bad[i] = tfs_column_chunk_of(ci, rows[i]) == 1;
		nbad += bad[i];
	}
	assert_true(nbad > 0);
	assert_int_equal(res.padded, nbad);
	check(vj, (size_t)id, rows, n, &at, dst, bad);
	tfs_gather_list_release(&l);

	/* Text: rows whose bytes touch data chunk 2 are empty. */
	nbad = 0;
	memset(dst, 0xee, bytes);
	assert_int_equal(tfs_reader_gather(r, (size_t)name, rows, n, &at, dst, &l, &res), 0);
	tfs_gather_list_run(&l, dst);
	for (size_t i = 0; i < n; i++) {
		uint64_t off[2];

		assert_int_equal(tfs_version_read(vj, cache, cn->offsets, rows[i] * 8, off, 16),
				 16);
		bad[i] = (uint8_t)tfs_reader_bytes_bad(r, cn->data, off[0], off[1]);
		nbad += bad[i];
	}
	assert_true(nbad > 0);
	assert_int_equal(res.padded, nbad);
	check(vj, (size_t)name, rows, n, &at, dst, bad);
	tfs_gather_list_release(&l);

	/* Without pad: every row as stored. */
	assert_int_equal(tfs_reader_gather(r0, (size_t)name, rows, n, &at, dst, &l, &res), 0);
	assert_int_equal(res.padded, 0);
	tfs_gather_list_run(&l, dst);
	check(vj, (size_t)name, rows, n, &at, dst, NULL);
	tfs_gather_list_free(&l);
	tfs_reader_close(r);
	tfs_reader_close(r0);
	free(dst);
}

/* Rows of 1 to 40 bytes (the executor copies 4 to 16 of them without memcpy) land as memcpy
 * puts them, at every alignment, and nothing around them moves. */
static void test_small_rows(void **state)
{
	uint8_t src[4096], want[8192], got[8192];
	struct tfs_gather_list l;
	uint64_t x = 2463534242ull, dst = 1;

	(void)state;
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 131 + 7);
	memset(want, 0x5a, sizeof(want));
	memset(got, 0x5a, sizeof(got));
	tfs_gather_list_init(&l, NULL);
	for (size_t n = 1; n <= 40; n++) {
		for (int k = 0; k < 3; k++) {
			const size_t from = (size_t)(x % (sizeof(src) - n));

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			assert_true(dst + n < sizeof(want));
			assert_int_equal(tfs_gather_list_add(&l, src + from, dst, n), 0);
			memcpy(want + dst, src + from, n);
			dst += n + 1 + k; /* a gap: ops do not merge, and the gap stays as it was */
		}
	}
	tfs_gather_list_run(&l, got);
	assert_memory_equal(got, want, sizeof(want));
	tfs_gather_list_free(&l);
}

/* tfs_gather_list_run_on, split over a pool and written past the caches, puts the same bytes
 * where the plain loop does: ops of every length (odd ones, and ops crossing the parts'
 * boundaries), sources and destinations at every alignment, zeros, and ops already in place;
 * lists below, at and above the sizes where it splits and streams. */
static void test_run_on_pool(void **state)
{
	const size_t src_bytes = 24u << 20, cap = 40u << 20;
	const uint64_t sizes[] = { 1u << 20, 5u << 20, 8u << 20, 33u << 20 };
	uint8_t *src = malloc(src_bytes), *a = malloc(cap), *b = malloc(cap);
	struct tfs_workpool *pool;
	struct tfs_gather_list l;
	uint64_t x = 88172645463325252ull;

	(void)state;
	assert_non_null(src);
	assert_non_null(a);
	assert_non_null(b);
	for (size_t i = 0; i < src_bytes; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		src[i] = (uint8_t)x;
	}
	assert_int_equal(tfs_workpool_create(3, &pool), 0);
	tfs_gather_list_init(&l, NULL);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		for (int round = 0; round < 3; round++) {
			uint64_t dst = (uint64_t)round * 3;

			/* Both destinations start alike: the bytes between ops stay as they were,
			 * and an op in place copies nothing. */
			for (size_t i = 0; i < cap; i++)
				a[i] = b[i] = (uint8_t)(i * 7 + k);
			while (dst < sizes[k]) {
				uint64_t n, kind;

				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				n = 1 + x % (300u << 10);
				kind = (x >> 40) % 8;
				if (dst + n > cap)
					break;
				if (kind == 0) {
					assert_int_equal(tfs_gather_list_add(&l, NULL, dst, n), 0);
				} else if (kind == 1) {
					/* In place: a's bytes there are b's too. */
					tfs_gather_list_add(&l, a + dst, dst, n);
					assert_memory_equal(a + dst, b + dst, n);
				} else {
					const uint64_t from = (x >> 20) % (src_bytes - n);

					assert_int_equal(
						tfs_gather_list_add(&l, src + from, dst, n), 0);
				}
				dst += n + (kind == 2 ? (x >> 50) % 100 : 0);
			}
			/* The in-place ops name a's addresses: run into a first, then the same list
			 * into b, whose in-place ops become copies of a's (equal) bytes. */
			tfs_gather_list_run(&l, a);
			tfs_gather_list_run_on(&l, b, pool, round != 1); /* round 1: cached */
			assert_memory_equal(a, b, cap);
			tfs_gather_list_release(&l);
		}
		/* A list of 1 MiB is one part, run here; larger ones are split into tasks. */
		if (k == 0)
			assert_int_equal(tfs_workpool_busy_peak(pool), 0);
	}
	assert_true(tfs_workpool_busy_peak(pool) > 0);
	tfs_gather_list_free(&l);
	tfs_workpool_destroy(pool);
	free(src);
	free(a);
	free(b);
}

int main(void)
{
	/* test_chunk_from_frames last: it damages a chunk, which the process records as bad. */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixed),	     cmocka_unit_test(test_ragged),
		cmocka_unit_test(test_text),	     cmocka_unit_test(test_bytes),
		cmocka_unit_test(test_room),	     cmocka_unit_test(test_frames),
		cmocka_unit_test(test_pad_bad_rows), cmocka_unit_test(test_small_rows),
		cmocka_unit_test(test_run_on_pool),  cmocka_unit_test(test_pins_once),
		cmocka_unit_test(test_frame_runs),   cmocka_unit_test(test_chunk_from_frames),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
