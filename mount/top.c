/* SPDX-License-Identifier: MIT */
/* top: `tensorfs top` (a live view of a mount, in curses) and `tensorfs stats`. */
#include "top.h"

#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "util.h"

#define MAX_LINES 256
#define LINE_CAP 256

/* What one refresh shows, as lines of text: the same for curses, plain output and stats. */
struct screen {
	char line[MAX_LINES][LINE_CAP];
	int n;
	int table; /* index of the version table's header line; -1 when none */
};

enum sort_key { SORT_RATE, SORT_READS, SORT_BYTES, SORT_NAME, NSORT };
static const char *const sort_names[NSORT] = { "MB/s", "reads/s", "bytes", "name" };

struct snap {
	double t; /* monotonic seconds */
	struct tfs_metrics m;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static __attribute__((format(printf, 2, 3))) void add(struct screen *s, const char *fmt, ...)
{
	va_list ap;

	if (s->n >= MAX_LINES)
		return;
	va_start(ap, fmt);
	vsnprintf(s->line[s->n++], LINE_CAP, fmt, ap);
	va_end(ap);
}

static double get(const struct snap *s, const char *name)
{
	return tfs_metrics_get(&s->m, name, NULL);
}

/* The change of a counter per second since prev; 0 without prev. */
static double rate(const struct snap *cur, const struct snap *prev, const char *name)
{
	double dt = prev ? cur->t - prev->t : 0;

	return dt > 0 ? (get(cur, name) - get(prev, name)) / dt : 0;
}

static double pct(double part, double whole)
{
	return whole > 0 ? 100.0 * part / whole : 0;
}

struct row {
	char dataset[128], version[128];
	double bytes, reads, bytes_rate, reads_rate;
};

static enum sort_key sort_by;

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	double dx, dy;

	switch (sort_by) {
	case SORT_NAME: {
		int c = strcmp(x->dataset, y->dataset);

		return c ? c : strcmp(x->version, y->version);
	}
	case SORT_READS:
		dx = x->reads_rate, dy = y->reads_rate;
		break;
	case SORT_BYTES:
		dx = x->bytes, dy = y->bytes;
		break;
	default:
		dx = x->bytes_rate, dy = y->bytes_rate;
	}
	return dx < dy ? 1 : dx > dy ? -1 : strcmp(x->dataset, y->dataset);
}

/* The version table: a row per dataset version the mount has served. */
static size_t version_rows(const struct snap *cur, const struct snap *prev, struct row **out)
{
	const struct tfs_metrics *m = &cur->m;
	struct row *rows = calloc(m->n ? m->n : 1, sizeof(*rows));
	double dt = prev ? cur->t - prev->t : 0;
	size_t n = 0;

	if (!rows)
		return 0;
	for (size_t i = 0; i < m->n; i++) {
		const char *labels = m->v[i].labels;
		struct row *r;

		if (strcmp(m->v[i].name, "tensorfs_version_read_bytes_total"))
			continue;
		r = &rows[n++];
		tfs_metrics_label(labels, "dataset", r->dataset, sizeof(r->dataset));
		tfs_metrics_label(labels, "version", r->version, sizeof(r->version));
		r->bytes = m->v[i].value;
		r->reads = tfs_metrics_get(m, "tensorfs_version_read_requests_total", labels);
		if (dt > 0) {
			r->bytes_rate =
				(r->bytes - tfs_metrics_get(&prev->m,
							    "tensorfs_version_read_bytes_total",
							    labels)) /
				dt;
			r->reads_rate =
				(r->reads - tfs_metrics_get(&prev->m,
							    "tensorfs_version_read_requests_total",
							    labels)) /
				dt;
		}
	}
	qsort(rows, n, sizeof(*rows), row_cmp);
	*out = rows;
	return n;
}

/* Lay out what cur (and the change since prev, when given) says. */
static void render(struct screen *s, const char *title, const char *mnt, const struct snap *cur,
		   const struct snap *prev, int with_keys)
{
	char a[32], b[32], c[32];
	double up = get(cur, "tensorfs_uptime_seconds");
	double hits = get(cur, "tensorfs_cache_hits_total"),
	       misses = get(cur, "tensorfs_cache_misses_total");
	double dh, dm;
	struct snap zero = { 0 };
	const char *now = "now";
	char hit_now[32] = "";
	struct row *rows = NULL;
	size_t nrows;

	s->n = 0;
	s->table = -1;
	add(s, "%s - %s   up %02d:%02d:%02d%s%s", title, mnt, (int)up / 3600, (int)up % 3600 / 60,
	    (int)up % 60, with_keys ? "   sort: " : "", with_keys ? sort_names[sort_by] : "");
	if (with_keys)
		add(s, "keys: s sort (MB/s, reads/s, bytes, name)   q quit");
	add(s, "%s", "");
	/* One sample (stats) has no "now": rates are over the uptime, and say so. */
	if (!prev) {
		zero.t = cur->t - up;
		prev = &zero;
		now = "avg";
	}
	dh = hits - get(prev, "tensorfs_cache_hits_total");
	dm = misses - get(prev, "tensorfs_cache_misses_total");
	if (prev != &zero)
		snprintf(hit_now, sizeof(hit_now), " (now %.1f%%)", pct(dh, dh + dm));
	if (prev == &zero)
		add(s, "Read     avg %8.1f MB/s  reads %.0f  total %s",
		    rate(cur, prev, "tensorfs_read_bytes_total") / 1e6,
		    get(cur, "tensorfs_read_requests_total"),
		    tfs_size_str(get(cur, "tensorfs_read_bytes_total"), a, sizeof(a)));
	else
		add(s, "Read     now %8.1f MB/s  avg %8.1f MB/s  reads %.0f (%.0f/s)  total %s",
		    rate(cur, prev, "tensorfs_read_bytes_total") / 1e6,
		    up > 0 ? get(cur, "tensorfs_read_bytes_total") / up / 1e6 : 0,
		    get(cur, "tensorfs_read_requests_total"),
		    rate(cur, prev, "tensorfs_read_requests_total"),
		    tfs_size_str(get(cur, "tensorfs_read_bytes_total"), a, sizeof(a)));
	add(s, "Stall    readers blocked on chunk loads: %.3f s total, %.0f ms/s %s",
	    get(cur, "tensorfs_reader_wait_seconds_total"),
	    1e3 * rate(cur, prev, "tensorfs_reader_wait_seconds_total"), now);
	/* Seconds of load a second: how many threads were loading chunks, on average; and how many
	 * were in store reads, which loads make but also lookups and a run of frames' one read:
	 * not a part of the loads. */
	add(s,
	    "Loads    %.2f threads loading chunks, %.2f threads in store reads %s; %.3f s and "
	    "%.3f s in all",
	    rate(cur, prev, "tensorfs_cache_load_seconds_total"),
	    rate(cur, prev, "tensorfs_store_read_seconds_total"), now,
	    get(cur, "tensorfs_cache_load_seconds_total"),
	    get(cur, "tensorfs_store_read_seconds_total"));
	add(s, "Cache    memory %s of %s (%.0f%%)  hit %.1f%%%s  chunks %.0f  evicted %.0f",
	    tfs_size_str(get(cur, "tensorfs_cache_bytes"), a, sizeof(a)),
	    tfs_size_str(get(cur, "tensorfs_cache_budget_bytes"), b, sizeof(b)),
	    pct(get(cur, "tensorfs_cache_bytes"), get(cur, "tensorfs_cache_budget_bytes")),
	    pct(hits, hits + misses), hit_now, get(cur, "tensorfs_cache_entries"),
	    get(cur, "tensorfs_cache_evictions_total"));
	if (get(cur, "tensorfs_disk_cache_budget_bytes") > 0) {
		double h = get(cur, "tensorfs_disk_cache_hits_total"),
		       mi = get(cur, "tensorfs_disk_cache_misses_total");

		add(s, "         disk %s of %s (%.0f%%)  hit %.1f%%  fills %.0f  bad files %.0f",
		    tfs_size_str(get(cur, "tensorfs_disk_cache_bytes"), a, sizeof(a)),
		    tfs_size_str(get(cur, "tensorfs_disk_cache_budget_bytes"), b, sizeof(b)),
		    pct(get(cur, "tensorfs_disk_cache_bytes"),
			get(cur, "tensorfs_disk_cache_budget_bytes")),
		    pct(h, h + mi), get(cur, "tensorfs_disk_cache_fills_total"),
		    get(cur, "tensorfs_disk_cache_bad_files_total"));
	} else {
		add(s, "         disk: none (-o cache_dir=DIR for remote lakes)");
	}
	/* A tier (-o cache_tier=URL) shows once it has been asked for something. */
	if (get(cur, "tensorfs_cache_tier_hits_total") +
		    get(cur, "tensorfs_cache_tier_misses_total") >
	    0) {
		double h = get(cur, "tensorfs_cache_tier_hits_total"),
		       mi = get(cur, "tensorfs_cache_tier_misses_total");

		add(s,
		    "         tier hit %.1f%%  served %s  written %.0f (%s)  queued %s  bad %.0f  "
		    "errors %.0f",
		    pct(h, h + mi),
		    tfs_size_str(get(cur, "tensorfs_cache_tier_hit_bytes_total"), a, sizeof(a)),
		    get(cur, "tensorfs_cache_tier_writes_total"),
		    tfs_size_str(get(cur, "tensorfs_cache_tier_write_bytes_total"), b, sizeof(b)),
		    tfs_size_str(get(cur, "tensorfs_cache_tier_pending_bytes"), c, sizeof(c)),
		    get(cur, "tensorfs_cache_tier_bad_total"),
		    get(cur, "tensorfs_cache_tier_errors_total") +
			    get(cur, "tensorfs_cache_tier_write_errors_total"));
	}
	add(s,
	    "Views    built %.0f  idle %s of view_mem %s (%.0f%%)  built in all %.0f  nodes %.0f",
	    get(cur, "tensorfs_views"),
	    tfs_size_str(get(cur, "tensorfs_views_idle_bytes"), a, sizeof(a)),
	    tfs_size_str(get(cur, "tensorfs_view_mem_bytes"), b, sizeof(b)),
	    pct(get(cur, "tensorfs_views_idle_bytes"), get(cur, "tensorfs_view_mem_bytes")),
	    get(cur, "tensorfs_views_built_total"), get(cur, "tensorfs_nodes"));
	add(s, "Prefetch loaders %.0f  in flight %s  ahead of readers %s  used %.0f  wasted %.0f",
	    get(cur, "tensorfs_prefetch_threads"),
	    tfs_size_str(get(cur, "tensorfs_prefetch_inflight_bytes"), a, sizeof(a)),
	    tfs_size_str(get(cur, "tensorfs_prefetch_ahead_bytes"), b, sizeof(b)),
	    get(cur, "tensorfs_prefetch_hits_total"), get(cur, "tensorfs_prefetch_wasted_total"));
	add(s, "Store    requests %.0f (%.0f/s)  fetched %s (%.1f MB/s)  retries %.0f  errors %.0f",
	    get(cur, "tensorfs_store_requests_total"),
	    rate(cur, prev, "tensorfs_store_requests_total"),
	    tfs_size_str(get(cur, "tensorfs_store_fetched_bytes_total"), c, sizeof(c)),
	    rate(cur, prev, "tensorfs_store_fetched_bytes_total") / 1e6,
	    get(cur, "tensorfs_store_retries_total"),
	    get(cur, "tensorfs_chunk_load_errors_total") +
		    get(cur, "tensorfs_prefetch_errors_total"));
	add(s,
	    "Staging  sessions %.0f  slots %.0f (leased %.0f)  batches %.0f (%.1f/s)  errors %.0f",
	    get(cur, "tensorfs_staging_sessions"), get(cur, "tensorfs_staging_slots"),
	    get(cur, "tensorfs_staging_slots_leased"), get(cur, "tensorfs_staging_batches_total"),
	    rate(cur, prev, "tensorfs_staging_batches_total"),
	    get(cur, "tensorfs_staging_errors_total"));
	add(s, "Lookups  errors %.0f%s", get(cur, "tensorfs_lookup_errors_total"),
	    get(cur, "tensorfs_lookup_errors_total") > 0 ? " (the last are in .tensorfs/errors)"
							 : "");
	add(s, "%s", "");
	nrows = version_rows(cur, prev, &rows);
	s->table = s->n;
	add(s, "%-20s %-24s %12s %10s %12s %10s", "DATASET", "VERSION", "READS", "READS/S", "BYTES",
	    "MB/S");
	for (size_t i = 0; i < nrows; i++)
		add(s, "%-20.20s %-24.24s %12.0f %10.0f %12s %10.1f", rows[i].dataset,
		    rows[i].version, rows[i].reads, rows[i].reads_rate,
		    tfs_size_str(rows[i].bytes, a, sizeof(a)), rows[i].bytes_rate / 1e6);
	if (!nrows)
		add(s, "(no column file read yet)");
	free(rows);
}

static int take(const char *mnt, struct snap *s)
{
	int rc = tfs_metrics_read(mnt, &s->m);

	s->t = now_s();
	if (rc)
		tfs_err("%s: cannot read .tensorfs/metrics: %s (is it a tensorfs mount?)", mnt,
			strerror(-rc));
	return rc;
}

/* Plain output, for pipes and logs: one line per interval. */
static void line_mode(const char *mnt, const struct snap *cur, const struct snap *prev)
{
	char when[32];
	time_t t = time(NULL);
	struct tm tm;
	double h = get(cur, "tensorfs_cache_hits_total"),
	       m = get(cur, "tensorfs_cache_misses_total");

	localtime_r(&t, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	printf("%s %s read %.1f MB/s %.0f reads/s stall %.0f ms/s loading %.2f (store %.2f) "
	       "cache %.0f%% hit %.1f%% inflight %.1f MB store %.0f req/s retries %.0f errors %.0f "
	       "slots %.0f/%.0f views %.0f (idle %.1f MB) nodes %.0f\n",
	       when, mnt, rate(cur, prev, "tensorfs_read_bytes_total") / 1e6,
	       rate(cur, prev, "tensorfs_read_requests_total"),
	       1e3 * rate(cur, prev, "tensorfs_reader_wait_seconds_total"),
	       rate(cur, prev, "tensorfs_cache_load_seconds_total"),
	       rate(cur, prev, "tensorfs_store_read_seconds_total"),
	       pct(get(cur, "tensorfs_cache_bytes"), get(cur, "tensorfs_cache_budget_bytes")),
	       pct(h, h + m), get(cur, "tensorfs_prefetch_inflight_bytes") / 1e6,
	       rate(cur, prev, "tensorfs_store_requests_total"),
	       get(cur, "tensorfs_store_retries_total"),
	       get(cur, "tensorfs_chunk_load_errors_total"),
	       get(cur, "tensorfs_staging_slots_leased"), get(cur, "tensorfs_staging_slots"),
	       get(cur, "tensorfs_views"), get(cur, "tensorfs_views_idle_bytes") / 1e6,
	       get(cur, "tensorfs_nodes"));
	fflush(stdout);
}

static void draw(const struct screen *s)
{
	int rows, cols;

	getmaxyx(stdscr, rows, cols);
	erase();
	for (int i = 0; i < s->n && i < rows; i++) {
		if (i == 0 || i == s->table)
			attron(A_REVERSE);
		mvaddnstr(i, 0, s->line[i], cols);
		if (i == 0 || i == s->table) {
			for (int x = (int)strlen(s->line[i]); x < cols; x++)
				addch(' ');
			attroff(A_REVERSE);
		}
	}
	refresh();
}

/* Wait up to seconds for a key; returns it, or ERR. */
static int wait_key(double seconds)
{
	struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };

	if (poll(&p, 1, (int)(seconds * 1000)) > 0)
		return getch();
	return ERR;
}

int tfs_cmd_top(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "delay", required_argument, NULL, 'd' },
		{ "iterations", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	struct snap a = { 0 }, b = { 0 }, *cur = &a, *prev = &b;
	double delay = 1.0;
	long count = -1;
	int opt, tty, rc = 0;
	struct screen *scr;
	const char *mnt;
	char *end;

	while ((opt = getopt_long(argc, argv, "d:n:", longopts, NULL)) != -1) {
		if (opt == 'd' && (delay = strtod(optarg, &end)) > 0 && !*end)
			continue;
		if (opt == 'n' && (count = strtol(optarg, &end, 10)) > 0 && !*end)
			continue;
		fprintf(stderr, "usage: tensorfs top MOUNTPOINT [-d SECONDS] [-n COUNT]\n");
		return 2;
	}
	if (argc - optind != 1) {
		fprintf(stderr, "usage: tensorfs top MOUNTPOINT [-d SECONDS] [-n COUNT]\n");
		return 2;
	}
	mnt = argv[optind];
	if (take(mnt, prev))
		return 1;
	tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
	scr = calloc(1, sizeof(*scr));
	if (!scr) {
		tfs_metrics_free(&prev->m);
		return 1;
	}
	if (tty) {
		initscr();
		cbreak();
		noecho();
		curs_set(0);
		keypad(stdscr, TRUE);
		nodelay(stdscr, TRUE);
		render(scr, "tensorfs top", mnt, prev, NULL, 1);
		draw(scr);
	}
	for (long i = 0; count < 0 || i < count; i++) {
		double due = now_s() + delay;
		int key = ERR;

		/* Keys redraw at once; the figures move on the interval. */
		while (tty && now_s() < due) {
			key = wait_key(due - now_s());
			if (key == 'q' || key == 'Q')
				goto done;
			if (key == 's' || key == 'S')
				sort_by = (sort_by + 1) % NSORT;
			if (key != ERR) {
				render(scr, "tensorfs top", mnt, prev, NULL, 1);
				if (cur->m.n)
					render(scr, "tensorfs top", mnt, cur, prev, 1);
				draw(scr);
			}
		}
		if (!tty)
			usleep((useconds_t)(delay * 1e6));
		tfs_metrics_free(&cur->m);
		if (take(mnt, cur)) {
			rc = 1;
			break;
		}
		if (tty) {
			render(scr, "tensorfs top", mnt, cur, prev, 1);
			draw(scr);
		} else {
			line_mode(mnt, cur, prev);
		}
		struct snap *t = prev;

		prev = cur;
		cur = t;
	}
done:
	if (tty)
		endwin();
	tfs_metrics_free(&a.m);
	tfs_metrics_free(&b.m);
	free(scr);
	return rc;
}

/* `tensorfs stats MOUNTPOINT [--json]`: the counters once, for scripts (--json: as the
 * .tensorfs/stats file has them) or for people. */
int tfs_cmd_stats(int argc, char **argv)
{
	const char *mnt = NULL;
	int json = 0, rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!mnt && argv[i][0] != '-')
			mnt = argv[i];
		else
			mnt = NULL, i = argc;
	}
	if (!mnt) {
		fprintf(stderr, "usage: tensorfs stats MOUNTPOINT [--json]\n");
		return 2;
	}
	if (json) {
		char path[4096], buf[65536];
		ssize_t n;
		int fd;

		snprintf(path, sizeof(path), "%s/.tensorfs/stats", mnt);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			tfs_err("%s: %s (is it a tensorfs mount?)", path, strerror(errno));
			return 1;
		}
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			fwrite(buf, 1, (size_t)n, stdout);
		rc = n < 0 ? errno : 0;
		close(fd);
		if (rc)
			tfs_err("%s: %s", path, strerror(rc));
		return rc ? 1 : 0;
	}
	struct snap s = { 0 };
	struct screen *scr = calloc(1, sizeof(*scr));

	if (!scr || take(mnt, &s)) {
		free(scr);
		return 1;
	}
	render(scr, "tensorfs stats", mnt, &s, NULL, 0);
	/* Rates need two samples: stats shows totals (the "now" figures read 0). */
	for (int i = 0; i < scr->n; i++)
		puts(scr->line[i]);
	tfs_metrics_free(&s.m);
	free(scr);
	return 0;
}
