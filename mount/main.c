/* SPDX-License-Identifier: MIT */
/* main: the tensorfs command line: the commands on lakes and datasets (create, import, ls, info,
 * log, diff, verify, gc, ...) and the dispatch to mount (mount_cmd.c) and top and stats (top.c). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "history.h"
#include "refspec.h"
#include "import.h"
#include "store.h"
#include "util.h"
#include "version.h"
#include "view.h"
#include "config.h"
#include "cli.h"
#include "top.h"

/* A command allocates buffers of a few hundred KiB to a few MiB (a sample, a chunk) and frees
 * them as fast: freed memory is kept for the next one instead of each being mapped, zeroed page
 * by page and unmapped (which cost as much as the resize of a 256x256 image, and most of an
 * exact nearest-neighbour scan). What is kept is at most what was in use at once. */
void tfs_cli_keep_freed_memory(void)
{
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

/* OpenBLAS (exact nearest neighbours, FAISS) starts a thread per core when it is loaded, and
 * each spins for work about 2^28 cycles before it sleeps: 0.14 CPU seconds taken from an
 * import's two threads here, by a library most commands never call. They are stopped first
 * thing; OpenBLAS starts them again when a call of its own needs them. Weak: a BLAS without the
 * call is left as it is. Not under ThreadSanitizer, which cannot see OpenBLAS's own locks. */
extern int blas_thread_shutdown_(void) __attribute__((weak));

static void blas_threads_stop(void)
{
#if !defined(__SANITIZE_THREAD__)
	if (blas_thread_shutdown_)
		blas_thread_shutdown_();
#endif
}

int tfs_cli_open_dataset(const char *url, unsigned flags, struct tfs_store **s, char **ds)
{
	char *lake;
	int rc = tfs_url_split(url, &lake, ds);

	if (rc) {
		tfs_err("%s: expected LAKE_URL/DATASET with a dataset name of letters, digits, "
			"'_', '.', '-'",
			url);
		return rc;
	}
	rc = tfs_store_open(lake, flags, s);
	free(lake);
	if (rc) {
		free(*ds);
		*ds = NULL;
	}
	return rc;
}

static int cmd_create(int argc, char **argv)
{
	struct tfs_store *s;
	char *ds;
	int rc;

	if (argc != 2)
		return tfs_cli_usage(2);
	if (tfs_cli_open_dataset(argv[1], TFS_STORE_CREATE, &s, &ds))
		return 1;
	/* The mount's mixes/ directory shows the lake's mixtures. */
	rc = strcmp(ds, "mixes") ? tfs_dataset_create(s, ds) : -EINVAL;
	if (rc == -EEXIST)
		tfs_err("%s: dataset already exists", argv[1]);
	else if (rc == -EINVAL && !strcmp(ds, "mixes"))
		tfs_err("%s: the name mixes is the mount's directory of mixtures", argv[1]);
	else if (rc)
		tfs_err("%s: cannot create dataset: %s", argv[1], strerror(-rc));
	else
		printf("created dataset %s in %s (branch main)\n", ds, s->url);
	free(ds);
	tfs_store_close(s);
	return rc ? 1 : 0;
}

static int print_name(void *arg, const char *name, int is_dir)
{
	(void)is_dir;
	return tfs_buf_append(arg, name, strlen(name) + 1);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Print NUL-separated names sorted, one per line. */
static void print_sorted(const struct tfs_buf *b, const char *prefix)
{
	size_t n = 0, k = 0;
	char **v;

	for (size_t i = 0; i < b->len; i++)
		n += b->data[i] == 0;
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return;
	for (size_t i = 0; i < b->len; i += strlen((char *)b->data + i) + 1)
		v[k++] = (char *)b->data + i;
	qsort(v, n, sizeof(*v), cmp_str);
	for (size_t i = 0; i < n; i++)
		printf("%s%s\n", prefix, v[i]);
	free(v);
}

static int cmd_ls(int argc, char **argv)
{
	struct tfs_store *s;
	struct tfs_buf names = { 0 };
	int rc;

	if (argc != 2)
		return tfs_cli_usage(2);
	if (tfs_store_open(argv[1], 0, &s))
		return 1;
	rc = tfs_dataset_list(s, print_name, &names);
	if (rc)
		tfs_err("%s: cannot list: %s", argv[1], strerror(-rc));
	else
		print_sorted(&names, "");
	tfs_buf_free(&names);
	tfs_store_close(s);
	return rc ? 1 : 0;
}

static void print_info(const struct tfs_version *v)
{
	const struct tfs_manifest *m = &v->manifest;
	char hex[TFS_ID_HEX], when[32];

	tfs_id_hex(&v->commit.id, hex);
	tfs_format_utc(v->commit.time, "%Y-%m-%d %H:%M:%S UTC", when, sizeof(when));
	printf("dataset  %s\ncommit   %s\ndate     %s\nmessage  %s\nrows     %" PRIu64
	       "\ncolumns  %zu\n",
	       v->ds, hex, when, v->commit.message, m->rows, m->ncols);
	if (m->ncols)
		printf("\n  %-20s %-6s %-20s %12s %10s %6s %14s\n", "column", "dtype", "row shape",
		       "row bytes", "chunk rows", "codec", "stored bytes");
	for (size_t i = 0; i < m->ncols; i++) {
		const struct tfs_column *c = &m->cols[i];
		uint64_t stored = 0;
		char shape[TFS_MAX_DIMS * 22], chunk_rows[24];

		for (size_t k = 0; k < c->nchunks; k++)
			stored += c->chunks[k].stored_size;
		if (c->kind != TFS_COL_FIXED) {
			/* A header; its parts, listed next, hold the rows. */
			if (c->kind == TFS_COL_RAGGED)
				snprintf(shape, sizeof(shape), "ragged, rank %u", c->ndim);
			else
				snprintf(shape, sizeof(shape), "%s", tfs_col_kind_name(c->kind));
			printf("  %-20s %-6s %-20s %12s %10s %6s %14s\n", c->name, c->dtype.descr,
			       shape, "-", "-", "-", "-");
			continue;
		}
		tfs_shape_str(c->shape, c->ndim, shape, sizeof(shape));
		snprintf(chunk_rows, sizeof(chunk_rows), "%" PRIu64, c->rows_per_chunk);
		printf("  %-20s %-6s %-20s %12" PRIu64 " %10s %6s %14" PRIu64 "\n", c->name,
		       c->dtype.descr, shape, c->row_bytes,
		       c->rows_per_chunk ? chunk_rows : "listed", tfs_codec_by_id(c->codec)->name,
		       stored);
	}
	/* Class names (the first ten: schema.json and --json give all) and end-of-document ids. */
	for (size_t i = 0; i < m->ncols; i++) {
		const struct tfs_column *c = &m->cols[i];

		if (c->has_eos)
			printf("\n  %s: end of document %" PRIu64 "\n", c->name, c->eos);
		if (!c->nclasses)
			continue;
		printf("\n  %s: %zu classes:", c->name, c->nclasses);
		for (size_t k = 0; k < c->nclasses && k < 10; k++)
			printf(" %zu=%s", k, c->classes[k]);
		printf("%s\n", c->nclasses > 10 ? " ..." : "");
	}
}

static int cmd_info(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "ref", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *ref = "main";
	struct tfs_version *v = NULL;
	struct tfs_store *s;
	struct tfs_id id;
	char *ds;
	int opt, json = 0, rc;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt == 'r')
			ref = optarg;
		else if (opt == 'j')
			json = 1;
		else
			return tfs_cli_usage(2);
	}
	if (argc - optind != 1)
		return tfs_cli_usage(2);
	if (tfs_cli_open_dataset(argv[optind], 0, &s, &ds))
		return 1;
	rc = tfs_cli_resolve(s, argv[optind], ds, ref, &id);
	if (!rc)
		rc = tfs_version_open(s, ds, &id, &v);
	if (!rc) {
		if (json)
			fwrite(v->schema.data, 1, v->schema.len, stdout);
		else
			print_info(v);
	}
	tfs_version_put(v);
	free(ds);
	tfs_store_close(s);
	return rc ? 1 : 0;
}

/* Parse "-m MSG" and "--branch B" for the commands that write one commit. */
static int write_opts(int argc, char **argv, struct tfs_import_opts *o)
{
	static const struct option longopts[] = {
		{ "message", required_argument, NULL, 'm' },
		{ "branch", required_argument, NULL, 'b' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "m:b:", longopts, NULL)) != -1) {
		if (opt == 'm')
			o->message = optarg;
		else if (opt == 'b')
			o->branch = optarg;
		else
			return -1;
	}
	return 0;
}

static int report_commit(int rc, const char *url, const char *ds, const char *branch,
			 const struct tfs_id *commit)
{
	char hex[TFS_ID_HEX];

	if (rc) {
		tfs_err("%s: nothing was committed", url);
		return rc == -EAGAIN ? TFS_EXIT_RETRY : 1;
	}
	tfs_id_hex(commit, hex);
	printf("committed %s to %s/%s\n", hex, ds, branch ? branch : "main");
	return 0;
}

static int cmd_update(int argc, char **argv)
{
	struct tfs_import_opts o = { .codec = TFS_CODEC_ZSTD, .level = 3 };
	struct tfs_store *s;
	struct tfs_id commit;
	unsigned long long start;
	char *ds, *eq, *end;
	unsigned tries = 0;
	int rc;

	if (write_opts(argc, argv, &o) || argc - optind != 3)
		return tfs_cli_usage(2);
	eq = strchr(argv[optind + 2], '=');
	errno = 0;
	start = strtoull(argv[optind + 2], &end, 10);
	if (!eq || end != eq || errno || !eq[1]) {
		tfs_err("'%s': expected ROWSTART=FILE.npy", argv[optind + 2]);
		return 2;
	}
	if (tfs_cli_open_dataset(argv[optind], 0, &s, &ds))
		return 1;
	do
		rc = tfs_update(s, ds, argv[optind + 1], start, eq + 1, &o, &commit);
	while (tfs_cli_again_if_damaged(rc, &tries, argv[optind], o.progress));
	rc = report_commit(rc, argv[optind], ds, o.branch, &commit);
	free(ds);
	tfs_store_close(s);
	return rc;
}

static int cmd_drop(int argc, char **argv)
{
	struct tfs_import_opts o = { 0 };
	struct tfs_store *s;
	struct tfs_id commit;
	char *ds;
	int rc;

	if (write_opts(argc, argv, &o) || argc - optind != 2)
		return tfs_cli_usage(2);
	if (tfs_cli_open_dataset(argv[optind], 0, &s, &ds))
		return 1;
	rc = tfs_drop(s, ds, argv[optind + 1], &o, &commit);
	rc = report_commit(rc, argv[optind], ds, o.branch, &commit);
	free(ds);
	tfs_store_close(s);
	return rc;
}

/* Resolve REF of a dataset (refspec.h: main~2, an abbreviated id) with a message when it names
 * nothing. */
int tfs_cli_resolve(struct tfs_store *s, const char *url, const char *ds, const char *ref,
		    struct tfs_id *id)
{
	char err[256] = "";
	int rc = tfs_dataset_check(s, ds);

	if (rc == -ENOENT) {
		tfs_err("%s: no such dataset", url);
		return rc;
	}
	if (!rc)
		rc = tfs_refspec_resolve(s, ds, ref, id, err, sizeof(err));
	if (rc && *err)
		tfs_err("%s: %s", url, err);
	return rc;
}

static int cmd_ref(int argc, char **argv, enum tfs_ref_kind kind)
{
	static const struct option longopts[] = {
		{ "from", required_argument, NULL, 'f' },
		{ "at", required_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	const char *from = "main", *what = kind == TFS_REF_TAG ? "tag" : "branch";
	struct tfs_store *s;
	struct tfs_id id;
	char *ds, hex[TFS_ID_HEX];
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt != 'f')
			return tfs_cli_usage(2);
		from = optarg;
	}
	if (argc - optind != 2)
		return tfs_cli_usage(2);
	if (tfs_cli_open_dataset(argv[optind], 0, &s, &ds))
		return 1;
	rc = tfs_cli_resolve(s, argv[optind], ds, from, &id);
	if (!rc) {
		const char *name = argv[optind + 1];

		rc = tfs_ref_create(s, ds, kind, name, &id);
		if (rc == -EEXIST)
			tfs_err("%s: a branch or tag named '%s' exists already%s", argv[optind],
				name, kind == TFS_REF_TAG ? " (tags never move)" : "");
		else if (rc == -EINVAL)
			tfs_err("'%s' is not a valid %s name (letters, digits, '_', '.', '-'; not "
				"'commits', 'log' or a commit id)",
				name, what);
		else if (rc)
			tfs_err("%s: cannot create %s %s: %s", argv[optind], what, name,
				strerror(-rc));
		else {
			tfs_id_hex(&id, hex);
			printf("created %s %s at %s\n", what, name, hex);
		}
	}
	free(ds);
	tfs_store_close(s);
	return rc ? 1 : 0;
}

static int cmd_log(int argc, char **argv)
{
	struct tfs_buf out = { 0 };
	struct tfs_store *s;
	struct tfs_id id;
	long max = 0;
	char *ds;
	int opt, rc;

	while ((opt = getopt(argc, argv, "n:")) != -1) {
		if (opt != 'n')
			return tfs_cli_usage(2);
		max = atol(optarg);
	}
	if (argc - optind < 1 || argc - optind > 2)
		return tfs_cli_usage(2);
	if (tfs_cli_open_dataset(argv[optind], 0, &s, &ds))
		return 1;
	rc = tfs_cli_resolve(s, argv[optind], ds, argc - optind == 2 ? argv[optind + 1] : "main",
			     &id);
	if (!rc)
		rc = tfs_log_text(s, ds, &id, max > 0 ? (size_t)max : 0, &out);
	if (!rc && out.len)
		fwrite(out.data, 1, out.len, stdout);
	tfs_buf_free(&out);
	free(ds);
	tfs_store_close(s);
	return rc ? 1 : 0;
}

static int cmd_diff(int argc, char **argv)
{
	struct tfs_version *a = NULL, *b = NULL;
	struct tfs_buf out = { 0 };
	struct tfs_store *s;
	struct tfs_id ia, ib;
	char *ds;
	int rc;

	if (argc != 4)
		return tfs_cli_usage(2);
	if (tfs_cli_open_dataset(argv[1], 0, &s, &ds))
		return 1;
	rc = tfs_cli_resolve(s, argv[1], ds, argv[2], &ia);
	if (!rc)
		rc = tfs_cli_resolve(s, argv[1], ds, argv[3], &ib);
	if (!rc)
		rc = tfs_version_open(s, ds, &ia, &a);
	if (!rc)
		rc = tfs_version_open(s, ds, &ib, &b);
	if (!rc)
		rc = tfs_diff_text(s, ds, &a->manifest, &b->manifest, &out);
	if (!rc && out.len)
		fwrite(out.data, 1, out.len, stdout);
	tfs_version_put(a);
	tfs_version_put(b);
	tfs_buf_free(&out);
	free(ds);
	tfs_store_close(s);
	return rc ? 1 : 0;
}

static int cmd_view(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "ref", required_argument, NULL, 'r' },
		{ "seed", required_argument, NULL, 's' },
		{ "epoch", required_argument, NULL, 'e' },
		{ "rank", required_argument, NULL, 'k' },
		{ "world", required_argument, NULL, 'w' },
		{ "block", required_argument, NULL, 'b' },
		{ "start", required_argument, NULL, 't' },
		{ "where", required_argument, NULL, 'x' },
		{ "drop-last", no_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	const char *ref = "main";
	struct tfs_buf name = { 0 };
	struct tfs_view_params p;
	struct tfs_view *view = NULL;
	struct tfs_version *v = NULL;
	struct tfs_cache *cache = NULL;
	struct tfs_store *s = NULL;
	struct tfs_id id;
	long show = 20;
	char *ds = NULL, err[256];
	int opt, rc = 0;

	/* The options spell the same key=value name a view directory has. */
	while ((opt = getopt_long(argc, argv, "n:", longopts, NULL)) != -1) {
		const char *key = NULL;

		switch (opt) {
		case 'r':
			ref = optarg;
			continue;
		case 'n':
			show = atol(optarg);
			continue;
		case 'd':
			tfs_buf_printf(&name, "%sdrop_last=1", name.len ? "," : "");
			continue;
		case 's':
			key = "seed";
			break;
		case 'e':
			key = "epoch";
			break;
		case 'k':
			key = "rank";
			break;
		case 'w':
			key = "world";
			break;
		case 'b':
			key = "block";
			break;
		case 't':
			key = "start";
			break;
		case 'x':
			key = "where";
			break;
		default:
			tfs_buf_free(&name);
			return tfs_cli_usage(2);
		}
		tfs_buf_printf(&name, "%s%s=%s", name.len ? "," : "", key, optarg);
	}
	if (argc - optind != 1) {
		tfs_buf_free(&name);
		return tfs_cli_usage(2);
	}
	rc = tfs_view_parse(name.len ? (char *)name.data : "world=1", &p, err, sizeof(err));
	if (rc) {
		tfs_err("%s", err);
		tfs_buf_free(&name);
		return 2;
	}
	if (tfs_cli_open_dataset(argv[optind], 0, &s, &ds)) {
		rc = 1;
		goto out;
	}
	rc = tfs_cli_resolve(s, argv[optind], ds, ref, &id);
	if (!rc)
		rc = tfs_version_open(s, ds, &id, &v);
	if (!rc)
		rc = tfs_cache_create(256ull << 20, &cache);
	if (!rc) {
		rc = tfs_view_build(v, cache, &p, &view, err, sizeof(err));
		if (rc == -EINVAL)
			tfs_err("%s", err);
	}
	if (!rc) {
		printf("view %s of %s@%s: %" PRIu64 " row%s",
		       name.len ? (char *)name.data : "(all rows)", ds, ref, view->n,
		       view->n == 1 ? "" : "s");
		if (p.where)
			printf(" (%" PRIu64 " of %" PRIu64 " match the filter)", view->matched,
			       v->manifest.rows);
		putchar('\n');
		for (uint64_t i = 0; i < view->n && (show < 0 || i < (uint64_t)show); i++)
			printf("%" PRIu64 "\n", view->rows[i]);
	}
	rc = rc ? 1 : 0;
out:
	tfs_view_free(view);
	tfs_version_put(v);
	tfs_cache_destroy(cache);
	tfs_view_params_free(&p);
	tfs_buf_free(&name);
	free(ds);
	tfs_store_close(s);
	return rc;
}

static int cmd_branch(int argc, char **argv)
{
	return cmd_ref(argc, argv, TFS_REF_BRANCH);
}

static int cmd_tag(int argc, char **argv)
{
	return cmd_ref(argc, argv, TFS_REF_TAG);
}

static int cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("tensorfs %s (format %d)\n", TFS_VERSION_STRING, TFS_FORMAT_VERSION);
	return 0;
}

/* The commands, by the word that names them (git's commands[]); `help` and `--config` are
 * taken before. A command's usage errors print its own lines of the usage text. */
static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
	{ "create", cmd_create },     { "import", tfs_cmd_import },
	{ "export", tfs_cmd_export }, { "mix", tfs_cmd_mix },
	{ "sql", tfs_cmd_sql },	      { "query", tfs_cmd_query },
	{ "vector", tfs_cmd_vector }, { "ls", cmd_ls },
	{ "info", cmd_info },	      { "mount", tfs_cmd_mount },
	{ "branch", cmd_branch },     { "tag", cmd_tag },
	{ "log", cmd_log },	      { "diff", cmd_diff },
	{ "update", cmd_update },     { "drop", cmd_drop },
	{ "view", cmd_view },	      { "verify", tfs_cmd_verify },
	{ "index", tfs_cmd_index },   { "gc", tfs_cmd_gc },
	{ "commit", tfs_cmd_commit }, { "session", tfs_cmd_session },
	{ "top", tfs_cmd_top },	      { "stats", tfs_cmd_stats },
	{ "version", cmd_version },   { "--version", cmd_version },
};

/* $TENSORFS_LOG: how much goes to the log (error, warn, info: the default, debug). */
static void log_level_from_env(void)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	const char *v = getenv("TENSORFS_LOG");

	if (!v || !*v)
		return;
	for (int i = 0; i < 4; i++)
		if (!strcmp(v, names[i])) {
			tfs_log_set_level((enum tfs_log_level)i);
			return;
		}
	tfs_warn("TENSORFS_LOG=%s: expected error, warn, info or debug; ignored", v);
}

int main(int argc, char **argv)
{
	const char *prog = basename(argv[0]);

	blas_threads_stop();
	setvbuf(stdout, NULL, _IOLBF, 0);
	log_level_from_env();
	/* mount(8) runs mount.tensorfs SOURCE DIR -o OPTIONS. */
	if (!strcmp(prog, "mount.tensorfs"))
		return tfs_cmd_mount(argc, argv);
	if (argc < 2)
		return tfs_cli_usage(2);
	argc--;
	argv++;
	/* tensorfs help [COMMAND], tensorfs COMMAND --help */
	if (!strcmp(argv[0], "help") || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))
		return tfs_cmd_help(argc > 1 ? argv[1] : NULL);
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return tfs_cmd_help(argv[0]);
	if (!strcmp(argv[0], "--config") || !strncmp(argv[0], "--config=", 9)) {
		const char *path = argv[0][8] == '=' ? argv[0] + 9 : argv[1];
		int used = argv[0][8] == '=' ? 1 : 2;

		if (!path || argc <= used)
			return tfs_cli_usage(2);
		if (tfs_config_set_path(path))
			return 1;
		argc -= used;
		argv += used;
	}
	/* mount -t fuse.tensorfs (mount.fuse3) runs `tensorfs SOURCE MOUNTPOINT -o OPTIONS`. */
	if (strstr(argv[0], "://"))
		return tfs_cmd_mount(argc + 1, argv - 1);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[0], commands[i].name)) {
			tfs_cli_command(commands[i].name);
			return commands[i].run(argc, argv);
		}
	tfs_err("unknown command '%s'", argv[0]);
	return tfs_cli_usage(2);
}
