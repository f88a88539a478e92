/* SPDX-License-Identifier: MIT */
/* Unit tests of gpu/staging with the host backend: gathers against a real lake, slot states. */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "format.h"
#include "import.h"
#include "npy.h"
#include "staging.h"
#include "store.h"
#include "version.h"

#define STAGING_TMPDIR "/tmp/tfs-staging-XXXXXX"
#include "staging_fixture.h"

/* The slot's bytes, through the file as a loader sees it. */
static void check_slot(struct tfs_staging *st, unsigned slot, const uint64_t *rows, size_t n)
{
	struct tfs_staging_loc loc;
	const uint8_t *map;
	int fd;

	tfs_staging_locate(st, slot, &loc);
	assert_int_equal(tfs_staging_rows(st, slot), n);
	fd = open(loc.path, O_RDONLY);
	assert_true(fd >= 0);
	map = mmap(NULL, loc.file_bytes, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(map != MAP_FAILED);
	for (size_t i = 0; i < n; i++) {
		const uint16_t *a = (const uint16_t *)(map + loc.col_off[0]) + i * 3;
		const int64_t *b = (const int64_t *)(map + loc.col_off[1]) + i;

		for (int j = 0; j < 3; j++)
			assert_int_equal(a[j], rows[i] * 3 + (uint64_t)j);
		assert_int_equal(*b, (int64_t)rows[i] * 7);
	}
	munmap((void *)map, loc.file_bytes);
}

static void test_gather_rows(void **state)
{
	uint64_t rows[200];
	struct tfs_staging *st;
	int rc, slot;

	(void)state;
	st = ring(TFS_STAGING_HOST, 3, 200, &rc);
	assert_int_equal(rc, 0);
	srand(5);
	for (int round = 0; round < 20; round++) {
		size_t n = 1 + (size_t)rand() % 200;

		for (size_t i = 0; i < n; i++)
			rows[i] = round % 2 ? (uint64_t)rand() % N : (uint64_t)(round * 40 + i) % N;
		slot = tfs_staging_fill(st, -1, rows, n, round % 3 == 0);
		assert_true(slot >= 0);
		assert_int_equal(tfs_staging_take(st, (unsigned)slot), 0);
		check_slot(st, (unsigned)slot, rows, n);
		assert_int_equal(tfs_staging_release(st, (unsigned)slot), 0);
	}
	tfs_staging_destroy(st);
}

static void test_slot_states(void **state)
{
	const uint64_t rows[] = { 1, 2, 3 };
	struct tfs_staging_loc loc;
	struct tfs_staging *st;
	char path[512];
	int rc;

	(void)state;
	st = ring(TFS_STAGING_HOST, 2, 8, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(tfs_staging_fill(st, 1, rows, 3, 1), 1);
	assert_int_equal(tfs_staging_fill(st, 1, rows, 3, 0), -EBUSY); /* filling or ready */
	assert_int_equal(tfs_staging_fill(st, -1, rows, 3, 0), 0);
	assert_int_equal(tfs_staging_fill(st, -1, rows, 3, 0), -EBUSY); /* none free */
	assert_int_equal(tfs_staging_release(st, 0), -EINVAL);		/* ready, not leased */
	assert_int_equal(tfs_staging_take(st, 0), 0);
	assert_int_equal(tfs_staging_take(st, 0), -EINVAL); /* leased already */
	assert_int_equal(tfs_staging_leased(st), 1);
	tfs_staging_discard(st, 1); /* made ahead, never taken */
	assert_int_equal(tfs_staging_take(st, 1), -EINVAL);
	assert_int_equal(tfs_staging_fill(st, 1, rows, 3, 0), 1);
	assert_int_equal(tfs_staging_release(st, 0), 0);
	assert_int_equal(tfs_staging_release(st, 0), -EINVAL);
	assert_int_equal(tfs_staging_release(st, 7), -EINVAL);
	tfs_staging_locate(st, 0, &loc);
	snprintf(path, sizeof(path), "%s", loc.path);
	assert_int_equal(access(path, R_OK), 0);
	tfs_staging_destroy(st); /* a ready slot and a leased one: both go */
	assert_int_equal(access(path, F_OK), -1);
}

/* --- a backend whose batches complete late ---------------------------------------------------
 * As a device's kernel does: submit returns at once, and the list is executed and released
 * on another thread only when the test lets it go. Until then, the chunks it reads must stay
 * in the cache whatever else is loaded. */

struct late {
	uint8_t *mem;
	uint64_t slot_bytes;
	unsigned depth;
	pthread_t *th;
	int *busy;
	struct tfs_gather_list **lists;
};

static pthread_mutex_t go_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go_cond = PTHREAD_COND_INITIALIZER;
static int go;
static struct late *the_late;

static int late_probe(int device, char *err, size_t err_cap)
{
	(void)device;
	(void)err;
	(void)err_cap;
	return 0;
}

static int late_create(const struct tfs_staging_config *cfg, uint64_t slot_bytes, void **b,
		       char *err, size_t err_cap)
{
	struct late *l = calloc(1, sizeof(*l));

	(void)err;
	(void)err_cap;
	l->mem = calloc(cfg->depth, slot_bytes);
	l->th = calloc(cfg->depth, sizeof(*l->th));
	l->busy = calloc(cfg->depth, sizeof(*l->busy));
	l->lists = calloc(cfg->depth, sizeof(*l->lists));
	l->slot_bytes = slot_bytes;
	l->depth = cfg->depth;
	the_late = l;
	*b = l;
	return 0;
}

static void late_wait(struct late *l, unsigned slot)
{
	if (l->busy[slot])
		pthread_join(l->th[slot], NULL);
	l->busy[slot] = 0;
}

static void late_destroy(void *b)
{
	struct late *l = b;

	for (unsigned i = 0; i < l->depth; i++)
		late_wait(l, i);
	free(l->mem);
	free(l->th);
	free(l->busy);
	free(l->lists);
	free(l);
	the_late = NULL;
}

static int late_begin(void *b, unsigned slot, uint8_t **mem)
{
	struct late *l = b;

	late_wait(l, slot);
	*mem = l->mem + slot * l->slot_bytes;
	return 0;
}

static void *late_run(void *arg)
{
	struct late *l = the_late;
	const unsigned slot = (unsigned)(uintptr_t)arg;

	pthread_mutex_lock(&go_lock);
	while (!go)
		pthread_cond_wait(&go_cond, &go_lock);
	pthread_mutex_unlock(&go_lock);
	tfs_gather_list_run(l->lists[slot], l->mem + slot * l->slot_bytes);
	tfs_gather_list_release(l->lists[slot]);
	return NULL;
}

static int late_submit(void *b, unsigned slot, struct tfs_gather_list *gl, size_t bytes)
{
	struct late *l = b;

	(void)bytes;
	l->lists[slot] = gl;
	l->busy[slot] = 1;
	return pthread_create(&l->th[slot], NULL, late_run, (void *)(uintptr_t)slot) ? -EAGAIN : 0;
}

static void late_locate(const void *b, unsigned slot, struct tfs_staging_loc *loc)
{
	const struct late *l = b;

	loc->device = TFS_STAGING_HOST;
	loc->base = slot * l->slot_bytes;
}

static const struct tfs_staging_backend late_backend = {
	.name = "late",
	.probe = late_probe,
	.create = late_create,
	.destroy = late_destroy,
	.begin = late_begin,
	.submit = late_submit,
	.locate = late_locate,
};

/* Load every chunk of both columns through a cache too small for them: all but pinned ones go. */
static void churn(struct tfs_cache *c)
{
	for (int pass = 0; pass < 2; pass++)
		for (size_t col = 0; col < ver->manifest.ncols; col++)
			for (size_t k = 0; k < ver->manifest.cols[col].nchunks; k++) {
				struct tfs_cache_entry *e;

				assert_int_equal(tfs_version_chunk_get(ver, c, col, k, &e), 0);
				tfs_cache_put(c, e);
			}
}

static void test_chunks_pinned_until_complete(void **state)
{
	uint64_t rows[64];
	struct tfs_staging_config cfg = {
		.ver = ver,
		.ncols = 2,
		.max_rows = 64,
		.depth = 2,
		.device = TFS_STAGING_HOST,
		.backend = &late_backend,
	};
	const struct tfs_column *ca, *cb;
	struct tfs_staging_loc loc;
	struct tfs_cache_stats cs;
	struct tfs_staging *st;
	struct tfs_cache *small;
	char err[256] = "";
	int slot;

	(void)state;
	assert_int_equal(tfs_cache_create(2048, &small), 0);
	cfg.cache = small;
	cfg.cols[0] = (size_t)tfs_version_column(ver, "a");
	cfg.cols[1] = (size_t)tfs_version_column(ver, "b");
	ca = &ver->manifest.cols[cfg.cols[0]];
	cb = &ver->manifest.cols[cfg.cols[1]];
	assert_int_equal(tfs_staging_create(&cfg, &st, err, sizeof(err)), 0);
	for (size_t i = 0; i < 64; i++)
		rows[i] = 400 + (i * 7) % 64; /* within a chunk or two of each column */
	go = 0;
	slot = tfs_staging_fill(st, -1, rows, 64, 0);
	assert_true(slot >= 0);
	assert_int_equal(tfs_staging_take(st, (unsigned)slot), 0);
	/* In flight: loading everything else evicts none of the batch's chunks. */
	churn(small);
	tfs_cache_stats(small, &cs);
	assert_true(cs.evictions > 0);
	for (size_t i = 0; i < 64; i++) {
		assert_true(tfs_cache_contains(small,
					       &ca->chunks[tfs_column_chunk_of(ca, rows[i])].id));
		assert_true(tfs_cache_contains(small,
					       &cb->chunks[tfs_column_chunk_of(cb, rows[i])].id));
	}
	pthread_mutex_lock(&go_lock);
	go = 1;
	pthread_cond_broadcast(&go_cond);
	pthread_mutex_unlock(&go_lock);
	late_wait(the_late, (unsigned)slot);
	/* Complete: the rows are there, and the chunks may go now. */
	tfs_staging_locate(st, (unsigned)slot, &loc);
	for (size_t i = 0; i < 64; i++) {
		const uint16_t *a = (const uint16_t *)(the_late->mem + loc.col_off[0]) + i * 3;
		const int64_t *b = (const int64_t *)(the_late->mem + loc.col_off[1]) + i;

		for (int j = 0; j < 3; j++)
			assert_int_equal(a[j], rows[i] * 3 + (uint64_t)j);
		assert_int_equal(*b, (int64_t)rows[i] * 7);
	}
	churn(small);
	tfs_cache_stats(small, &cs);
	assert_true(cs.bytes <= 2048 + 1024);
	tfs_staging_release(st, (unsigned)slot);
	tfs_staging_destroy(st);
	tfs_cache_destroy(small);
}

/* The configuration of a host ring like ring()'s: depth slots of max_rows rows over both
 * columns, named tag, its file in tmpdir. */
static struct tfs_staging_config host_config(unsigned depth, uint64_t max_rows, const char *tag)
{
	struct tfs_staging_config cfg = {
		.ver = ver,
		.cache = cache,
		.ncols = 2,
		.max_rows = max_rows,
		.depth = depth,
		.device = TFS_STAGING_HOST,
		.shm_dir = tmpdir,
		.tag = tag,
		.uid = getuid(),
		.gid = getgid(),
		.pool = pool,
	};

	cfg.cols[0] = (size_t)tfs_version_column(ver, "a");
	cfg.cols[1] = (size_t)tfs_version_column(ver, "b");
	return cfg;
}

/* A host ring like ring()'s, named tag, its slots kept in keep, which may hold room bytes
 * beside it. */
static struct tfs_staging *kept_ring_in(unsigned depth, uint64_t max_rows, const char *tag,
					struct tfs_ringkeep *keep, uint64_t room)
{
	struct tfs_staging_config cfg = host_config(depth, max_rows, tag);
	struct tfs_staging *st = NULL;
	char err[256] = "";

	cfg.keep = keep;
	cfg.keep_room = room;
	assert_int_equal(tfs_staging_create(&cfg, &st, err, sizeof(err)), 0);
	return st;
}

static struct tfs_staging *kept_ring(unsigned depth, uint64_t max_rows, const char *tag,
				     struct tfs_ringkeep *keep)
{
	return kept_ring_in(depth, max_rows, tag, keep, UINT64_MAX);
}

static void one_batch(struct tfs_staging *st, uint64_t first)
{
	uint64_t rows[50];
	int slot;

	for (size_t i = 0; i < 50; i++)
		rows[i] = (first + i * 13) % N;
	slot = tfs_staging_fill(st, -1, rows, 50, 1);
	assert_true(slot >= 0);
	assert_int_equal(tfs_staging_take(st, (unsigned)slot), 0);
	check_slot(st, (unsigned)slot, rows, 50);
	assert_int_equal(tfs_staging_release(st, (unsigned)slot), 0);
}

static ino_t file_of(struct tfs_staging *st, char *path, size_t cap)
{
	struct tfs_staging_loc loc;
	struct stat sb;

	tfs_staging_locate(st, 0, &loc);
	snprintf(path, cap, "%s", loc.path);
	assert_int_equal(stat(path, &sb), 0);
	return sb.st_ino;
}

/* Files of kept slots in the test's directory: tensorfs-<pid>-kept-<n>. */
static int kept_files(void)
{
	char cmd[600];
	FILE *f;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls %s | grep -c -- '^tensorfs-%ld-kept-'", tmpdir,
		 (long)getpid());
	f = popen(cmd, "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%d", &n), 1);
	pclose(f);
	return n;
}

/* A ring of the shape of one destroyed takes its slots (the same file, under the new ring's
 * name; the old name gone); another shape makes its own; the budget drops the least recently
 * kept; freeing the keep frees (and removes) every file. */
static void test_kept_slots(void **state)
{
	struct tfs_staging *a, *b, *c, *d;
	struct tfs_ringkeep_stats ks;
	struct tfs_ringkeep *keep;
	char pa[512], pb[512], pc[512];
	ino_t ia, ic;
	uint64_t ring_bytes, small_bytes;

	(void)state;
	a = kept_ring(3, 200, "ka", NULL);
	ring_bytes = tfs_staging_slot_bytes(a) * 3;
	tfs_staging_destroy(a);
	c = kept_ring(2, 100, "kc", NULL);
	small_bytes = tfs_staging_slot_bytes(c) * 2;
	tfs_staging_destroy(c);
	assert_int_equal(tfs_ringkeep_create(ring_bytes + small_bytes, 60000, &keep), 0);

	a = kept_ring(3, 200, "ka", keep);
	one_batch(a, 1);
	ia = file_of(a, pa, sizeof(pa));
	tfs_staging_destroy(a);
	assert_int_equal(access(pa, F_OK), -1); /* its name went with the ring */
	assert_int_equal(kept_files(), 1);
	tfs_ringkeep_stats(keep, &ks);
	assert_int_equal(ks.rings, 1);
	assert_int_equal(ks.bytes, ring_bytes);

	b = kept_ring(3, 200, "kb", keep);
	assert_int_equal(file_of(b, pb, sizeof(pb)), ia);
	assert_true(strstr(pb, "tensorfs-kb") != NULL);
	assert_int_equal(kept_files(), 0);
	tfs_ringkeep_stats(keep, &ks);
	assert_int_equal(ks.rings, 0);
	assert_int_equal(ks.reused, 1);
	for (uint64_t i = 0; i < 5; i++)
		one_batch(b, i * 101);

	c = kept_ring(2, 100, "kc", keep); /* another shape: made afresh */
	ic = file_of(c, pc, sizeof(pc));
	assert_true(ic != ia);
	one_batch(c, 7);
	tfs_staging_destroy(b);
	tfs_staging_destroy(c);
	tfs_ringkeep_stats(keep, &ks);
	assert_int_equal(ks.rings, 2);
	assert_int_equal(ks.bytes, ring_bytes + small_bytes);
	assert_int_equal(kept_files(), 2);

	/* A third shape kept: the budget drops the least recently kept (b's slots). */
	d = kept_ring(2, 100, "kd", keep);
	assert_int_equal(file_of(d, pc, sizeof(pc)), ic); /* c's, reused */
	tfs_staging_destroy(d);
	d = kept_ring(1, 100, "kd", keep);
	tfs_staging_destroy(d);
	tfs_ringkeep_stats(keep, &ks);
	assert_int_equal(ks.dropped, 1);
	assert_int_equal(ks.rings, 2);
	a = kept_ring(3, 200, "ka", keep); /* b's slots are gone: new ones */
	tfs_ringkeep_stats(keep, &ks);
	assert_int_equal(ks.reused, 2); /* b's, then c's */
	one_batch(a, 3);
	tfs_staging_destroy(a);
	tfs_ringkeep_free(keep);
	assert_int_equal(kept_files(), 0);
}

/* Kept slots go after the keep's time: the file removed, counted as dropped. */
static void test_kept_slots_expire(void **state)
{
	struct tfs_ringkeep_stats ks;
	struct tfs_ringkeep *keep;
	struct tfs_staging *a;

	(void)state;
	assert_int_equal(tfs_ringkeep_create(64 << 20, 150, &keep), 0);
	a = kept_ring(2, 100, "ke", keep);
	one_batch(a, 5);
	tfs_staging_destroy(a);
	tfs_ringkeep_stats(keep, &ks);
	assert_int_equal(ks.rings, 1);
	for (int i = 0; i < 500 && ks.rings; i++) {
		usleep(10000);
		tfs_ringkeep_stats(keep, &ks);
	}
	assert_int_equal(ks.rings, 0);
	assert_int_equal(ks.bytes, 0);
	assert_int_equal(ks.dropped, 1);
	assert_int_equal(kept_files(), 0);
	a = kept_ring(2, 100, "ke", keep); /* made afresh */
	tfs_ringkeep_stats(keep, &ks);
	assert_int_equal(ks.reused, 0);
	tfs_staging_destroy(a);
	tfs_ringkeep_free(keep);
	assert_int_equal(kept_files(), 0);
}

/* Kept slots stay within the room the staging limit leaves: a ring that makes slots of its own
 * first frees the least recently kept past its room; one that takes kept slots frees none. */
static void test_kept_slots_within_room(void **state)
{
	struct tfs_staging *a, *c, *d;
	struct tfs_ringkeep_stats ks;
	struct tfs_ringkeep *keep;
	char pc[512], pd[512];
	uint64_t small_bytes;
	ino_t ic;

	(void)state;
	assert_int_equal(tfs_ringkeep_create(UINT64_MAX, 60000, &keep), 0);
	a = kept_ring(3, 200, "ra", keep);
	c = kept_ring(2, 100, "rc", keep);
	small_bytes = tfs_staging_slot_bytes(c) * 2;
	ic = file_of(c, pc, sizeof(pc));
	tfs_staging_destroy(a);
	tfs_staging_destroy(c); /* kept: c's, then a's */
	assert_int_equal(kept_files(), 2);

	/* A third shape with room for c's slots alone: a's go (the least recently kept). */
	d = kept_ring_in(1, 100, "rd", keep, small_bytes);
	tfs_ringkeep_stats(keep, &ks);
	assert_int_equal(ks.rings, 1);
	assert_int_equal(ks.bytes, small_bytes);
	assert_int_equal(ks.dropped, 1);
	assert_int_equal(kept_files(), 1);
	one_batch(d, 2);
	tfs_staging_destroy(d); /* kept too: d's, then c's */

	/* No room at all, but c's shape: its slots are taken, and nothing else is freed. */
	c = kept_ring_in(2, 100, "rc2", keep, 0);
	assert_int_equal(file_of(c, pd, sizeof(pd)), ic);
	tfs_ringkeep_stats(keep, &ks);
	assert_int_equal(ks.rings, 1);
	assert_int_equal(ks.dropped, 1);
	one_batch(c, 4);

	/* No room and a shape not kept: every kept ring goes before the new slots are made. */
	a = kept_ring_in(3, 200, "ra2", keep, 0);
	tfs_ringkeep_stats(keep, &ks);
	assert_int_equal(ks.rings, 0);
	assert_int_equal(ks.bytes, 0);
	assert_int_equal(ks.dropped, 2);
	assert_int_equal(kept_files(), 0);
	one_batch(a, 6);
	tfs_staging_destroy(a);
	tfs_staging_destroy(c);
	tfs_ringkeep_free(keep);
	assert_int_equal(kept_files(), 0);
}

/* Bytes the file at path holds on its file system. */
static uint64_t held_bytes(const char *path)
{
	struct stat sb;

	assert_int_equal(stat(path, &sb), 0);
	return (uint64_t)sb.st_blocks * 512;
}

/* Bytes of path's pages mapped in this process (its mappings' Rss in /proc/self/smaps). */
static uint64_t mapped_bytes(const char *path)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	const size_t plen = strlen(path);
	uint64_t kb, sum = 0;
	char line[1024];
	int in = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		const size_t n = strcspn(line, "\n");
		const char *dash = strchr(line, '-'), *space = strchr(line, ' ');

		if (dash && space && dash < space) /* a mapping's first line: "from-to perms ..." */
			in = n >= plen && !memcmp(line + n - plen, path, plen);
		else if (in && sscanf(line, "Rss: %" SCNu64 " kB", &kb) == 1)
			sum += kb << 10;
	}
	fclose(f);
	return sum;
}

/* Whether files in dir can be given room ahead (posix_fallocate): what a slot's reservation
 * takes; a file system without it reserves nothing, and the tests below skip. */
static int dir_reserves(const char *dir)
{
	char p[512];
	int fd, rc;

	snprintf(p, sizeof(p), "%s/probe", dir);
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	rc = posix_fallocate(fd, 0, 4096);
	close(fd);
	unlink(p);
	return rc == 0;
}

/* A host ring's memory is reserved a slot at a time, when the slot is first filled, not all of
 * it when the ring is made (a stream's opening would wait for the kernel to reserve it all). */
static void test_ring_reserved_a_slot_at_a_time(void **state)
{
	const uint64_t rows[] = { 1, 500, 999 };
	struct tfs_staging_loc loc;
	struct tfs_staging *st;
	uint64_t slot_bytes;
	int rc, slot;

	(void)state;
	if (!dir_reserves(tmpdir))
		skip();
	st = ring(TFS_STAGING_HOST, 4, 40000, &rc); /* slots of 40,000 rows: 560 KB */
	assert_int_equal(rc, 0);
	slot_bytes = tfs_staging_slot_bytes(st);
	tfs_staging_locate(st, 0, &loc);
	assert_true(loc.file_bytes >= 4 * slot_bytes);
	assert_true(held_bytes(loc.path) < slot_bytes);
	slot = tfs_staging_fill(st, -1, rows, 3, 1);
	assert_true(slot >= 0);
	assert_int_equal(tfs_staging_take(st, (unsigned)slot), 0);
	check_slot(st, (unsigned)slot, rows, 3);
	/* The slot filled is reserved whole (its rows write only its first bytes); no other. */
	assert_true(held_bytes(loc.path) >= slot_bytes);
	assert_true(held_bytes(loc.path) < 2 * slot_bytes);
	/* And mapped whole, so that no write of a gather takes a fault a page. */
	assert_true(mapped_bytes(loc.path) >= slot_bytes);
	assert_true(mapped_bytes(loc.path) < 2 * slot_bytes);
	assert_int_equal(tfs_staging_release(st, (unsigned)slot), 0);
	tfs_staging_destroy(st);
}

static char shm_dir[512]; /* test_full_shm_fails_the_batch's tmpfs, while mounted */

static int unmount_shm(void **state)
{
	(void)state;
	if (shm_dir[0]) {
		(void)umount2(shm_dir, MNT_DETACH);
		rmdir(shm_dir);
		shm_dir[0] = 0;
	}
	return 0;
}

/* A ring in a tmpfs of 1 MiB: one that cannot fit is refused when made, saying why; a slot
 * whose memory is gone by its first fill fails that batch (never SIGBUS in a gather), and the
 * next fill, with room again, succeeds. Needs root to mount the tmpfs; skipped without. */
static void test_full_shm_fails_the_batch(void **state)
{
	struct tfs_staging_config cfg = host_config(4, 40000, "full"); /* 2.2 MB */
	const uint64_t rows[] = { 3, 4, 5 };
	struct tfs_staging *st = NULL;
	char dir[512], hog[600], err[256] = "";
	uint8_t block[64 << 10] = { 0 };
	int fd, slot;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/shm", tmpdir);
	assert_int_equal(mkdir(dir, 0700), 0);
	if (mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0700")) {
		rmdir(dir);
		skip();
	}
	memcpy(shm_dir, dir, sizeof(shm_dir)); /* unmounted by unmount_shm, whatever happens */
	cfg.shm_dir = dir;
	assert_int_equal(tfs_staging_create(&cfg, &st, err, sizeof(err)), -ENOMEM);
	assert_non_null(strstr(err, "cannot reserve"));
	cfg.depth = 1; /* 560 KB */
	assert_int_equal(tfs_staging_create(&cfg, &st, err, sizeof(err)), 0);
	/* Another user of the tmpfs takes its room before the slot's first fill. */
	snprintf(hog, sizeof(hog), "%s/hog", dir);
	fd = open(hog, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	while (write(fd, block, sizeof(block)) == (ssize_t)sizeof(block))
		;
	close(fd);
	slot = tfs_staging_fill(st, -1, rows, 3, 1);
	assert_true(slot >= 0);
	assert_int_equal(tfs_staging_take(st, (unsigned)slot), -ENOMEM);
	unlink(hog);
	slot = tfs_staging_fill(st, -1, rows, 3, 1);
	assert_true(slot >= 0);
	assert_int_equal(tfs_staging_take(st, (unsigned)slot), 0);
	check_slot(st, (unsigned)slot, rows, 3);
	assert_int_equal(tfs_staging_release(st, (unsigned)slot), 0);
	tfs_staging_destroy(st);
}

static void test_limits_and_devices(void **state)
{
	struct tfs_staging *st;
	char err[256] = "";
	int rc, dev;

	(void)state;
	st = ring(TFS_STAGING_HOST, 2, 1ull << 40, &rc); /* a slot of 2^40 rows */
	assert_null(st);
	assert_int_equal(rc, -E2BIG);
	assert_int_equal(tfs_staging_parse_device("host", &dev, err, sizeof(err)), 0);
	assert_int_equal(dev, TFS_STAGING_HOST);
	assert_int_equal(tfs_staging_parse_device("cuda:3", &dev, err, sizeof(err)), 0);
	assert_int_equal(dev, 3);
	assert_int_equal(tfs_staging_parse_device("cuda", &dev, err, sizeof(err)), 0);
	assert_int_equal(dev, 0);
	static const char *const bad[] = { "cuda:",
					   "cuda:x",
					   "tpu",
					   "0000:3b:00",
					   "0000:3b:00.",
					   "0000:3g:00.0",
					   ":3b:00.0",
					   "0000::00.0",
					   "3b.00.0",
					   "0:0:0:0.0",
					   "00000000:3b:00.0.0" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (tfs_staging_parse_device(bad[i], &dev, err, sizeof(err)) != -EINVAL)
			fail_msg("device '%s' taken", bad[i]);
	/* A bus id's form, but no CUDA device there (none on this machine, or no CUDA in this
	 * build): a reason that names it. On a machine with a device, the GPU tests find it. */
	for (size_t i = 0; i < 2; i++) {
		const char *pci = i ? "3b:00.0" : "0000:ff:1f.7";

		err[0] = 0;
		rc = tfs_staging_parse_device(pci, &dev, err, sizeof(err));
		if (rc != -ENODEV && !(rc == 0 && dev >= 0))
			fail_msg("%s: %d", pci, rc);
		if (rc)
			assert_non_null(strstr(err, pci));
	}
	assert_int_equal(tfs_staging_probe(TFS_STAGING_HOST, err, sizeof(err)), 0);
	/* A device number no machine has: a clear error, never a crash. */
	assert_int_equal(tfs_staging_probe(1000, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "cuda:1000"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gather_rows),
		cmocka_unit_test(test_slot_states),
		cmocka_unit_test(test_chunks_pinned_until_complete),
		cmocka_unit_test(test_limits_and_devices),
		cmocka_unit_test(test_ring_reserved_a_slot_at_a_time),
		cmocka_unit_test_teardown(test_full_shm_fails_the_batch, unmount_shm),
		cmocka_unit_test(test_kept_slots),
		cmocka_unit_test(test_kept_slots_expire),
		cmocka_unit_test(test_kept_slots_within_room),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
