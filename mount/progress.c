/* SPDX-License-Identifier: MIT */
/* progress: a progress line drawn on stderr by a thread while a command works. */
#include "progress.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct tfs_progress_line {
	const char *what, *unit;
	const struct tfs_progress *p;
	int tty; /* redraw in place; otherwise a line per second */
	uint64_t start_ns;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stop; /* protected by lock */
};

int tfs_progress_flag(const char *arg)
{
	if (!strcmp(arg, "--progress"))
		return TFS_PROGRESS_ON;
	if (!strcmp(arg, "--quiet") || !strcmp(arg, "-q"))
		return TFS_PROGRESS_OFF;
	return -1;
}

static void draw(struct tfs_progress_line *pl, int last)
{
	const uint64_t done = __atomic_load_n(&pl->p->done, __ATOMIC_RELAXED),
		       total = __atomic_load_n(&pl->p->total, __ATOMIC_RELAXED),
		       total_items = __atomic_load_n(&pl->p->total_items, __ATOMIC_RELAXED);
	uint64_t items = __atomic_load_n(&pl->p->items, __ATOMIC_RELAXED);
	const double secs = (double)(tfs_now_ns() - pl->start_ns) / 1e9;
	const double rate = secs > 0 ? (double)done / secs : 0;
	char line[256], a[32], b[32], c[32];
	int n;

	/* Rows follow bytes when only the bytes are counted (every row has the same size). */
	if (!items && total_items && total)
		items = (uint64_t)((double)done / (double)total * (double)total_items);
	tfs_size_str((double)done, a, sizeof(a));
	tfs_size_str((double)total, b, sizeof(b));
	if (total_items)
		n = snprintf(line, sizeof(line),
			     "%s: %s of %s (%.0f%%), %" PRIu64 " of %" PRIu64 " %s", pl->what, a, b,
			     total ? 100.0 * (double)done / (double)total : 0, items, total_items,
			     pl->unit);
	else if (total)
		n = snprintf(line, sizeof(line), "%s: %s of %s (%.0f%%), %" PRIu64 " %s", pl->what,
			     a, b, 100.0 * (double)done / (double)total, items, pl->unit);
	else
		n = snprintf(line, sizeof(line), "%s: %" PRIu64 " %s, %s", pl->what, items,
			     pl->unit, a);
	n += snprintf(line + n, sizeof(line) - (size_t)n, ", %s/s",
		      tfs_size_str(rate, c, sizeof(c)));
	if (total && rate > 0 && !last && done < total) {
		const unsigned eta = (unsigned)((double)(total - done) / rate);

		snprintf(line + n, sizeof(line) - (size_t)n, ", ETA %u:%02u:%02u", eta / 3600,
			 eta / 60 % 60, eta % 60);
	} else if (last) {
		snprintf(line + n, sizeof(line) - (size_t)n, ", %.1f s", secs);
	}
	if (pl->tty)
		fprintf(stderr, "\r\033[K%s%s", line, last ? "\n" : "");
	else
		fprintf(stderr, "%s\n", line);
	fflush(stderr);
}

static void *run(void *arg)
{
	struct tfs_progress_line *pl = arg;
	const uint64_t period_ns = pl->tty ? 200000000ull : 1000000000ull;

	pthread_mutex_lock(&pl->lock);
	while (!pl->stop) {
		tfs_cond_wait_until(&pl->cond, &pl->lock, tfs_now_ns() + period_ns);
		if (!pl->stop)
			draw(pl, 0);
	}
	pthread_mutex_unlock(&pl->lock);
	return NULL;
}

struct tfs_progress_line *tfs_progress_line_start(const char *what, const char *unit,
						  const struct tfs_progress *p,
						  enum tfs_progress_mode mode)
{
	const int tty = isatty(STDERR_FILENO);
	struct tfs_progress_line *pl;

	if (mode == TFS_PROGRESS_OFF || (mode == TFS_PROGRESS_AUTO && !tty))
		return NULL;
	pl = calloc(1, sizeof(*pl));
	if (!pl)
		return NULL; /* a command works the same without its progress line */
	pl->what = what;
	pl->unit = unit;
	pl->p = p;
	pl->tty = tty;
	pl->start_ns = tfs_now_ns();
	pthread_mutex_init(&pl->lock, NULL);
	tfs_cond_init_monotonic(&pl->cond);
	if (pthread_create(&pl->thread, NULL, run, pl)) {
		pthread_mutex_destroy(&pl->lock);
		pthread_cond_destroy(&pl->cond);
		free(pl);
		return NULL;
	}
	return pl;
}

void tfs_progress_line_stop(struct tfs_progress_line *pl)
{
	if (!pl)
		return;
	pthread_mutex_lock(&pl->lock);
	pl->stop = 1;
	pthread_cond_signal(&pl->cond);
	pthread_mutex_unlock(&pl->lock);
	pthread_join(pl->thread, NULL);
	draw(pl, 1);
	pthread_mutex_destroy(&pl->lock);
	pthread_cond_destroy(&pl->cond);
	free(pl);
}
