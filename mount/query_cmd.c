/* SPDX-License-Identifier: MIT */
/* query_cmd: `tensorfs query save|ls|show|log|rm URL ...`: a dataset's saved queries
 * (core/query.h). save is `tensorfs sql --save NAME`. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "query.h"
#include "store.h"
#include "util.h"

struct names {
	char **v;
	size_t n, cap;
};

static int add_name(void *arg, const char *name, int is_dir)
{
	struct names *ns = arg;

	(void)is_dir;
	if (TFS_GROW(ns->v, &ns->cap, ns->n + 1))
		return -ENOMEM;
	return (ns->v[ns->n] = strdup(name)) ? (ns->n++, 0) : -ENOMEM;
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names, sorted. */
static int print_names(struct tfs_store *s, const char *ds)
{
	struct names ns = { 0 };
	int rc = tfs_query_list(s, ds, add_name, &ns);

	if (ns.n)
		qsort(ns.v, ns.n, sizeof(*ns.v), by_str);
	for (size_t i = 0; i < ns.n; i++) {
		if (!rc)
			printf("%s\n", ns.v[i]);
		free(ns.v[i]);
	}
	free(ns.v);
	return rc;
}

static void print_version(const struct tfs_query *q)
{
	char hex[TFS_ID_HEX], commit[TFS_ID_HEX], when[32];

	tfs_id_hex(&q->id, hex);
	tfs_id_hex(&q->commit, commit);
	tfs_format_utc((int64_t)q->time, "%Y-%m-%d %H:%M:%S UTC", when, sizeof(when));
	printf("query    %s\nversion  %s\ndate     %s\ncommit   %s\nrows     %" PRIu64
	       "\nsql      %s\n",
	       q->name, hex, when, commit, q->nrows, q->sql);
}

int tfs_cmd_query(int argc, char **argv)
{
	struct tfs_store *s = NULL;
	struct tfs_query q = { 0 };
	char *ds = NULL;
	int rc;

	if (argc < 3)
		return tfs_cli_usage(2);
	if (!strcmp(argv[1], "save")) {
		/* query save URL[@REF] NAME "SELECT ..." [sql options] */
		char **args = calloc((size_t)argc + 2, sizeof(*args));

		if (argc < 5 || !args) {
			free(args);
			return tfs_cli_usage(2);
		}
		args[0] = "sql";
		args[1] = "--save";
		args[2] = argv[3];
		args[3] = argv[2];
		for (int i = 4; i < argc; i++)
			args[i] = argv[i];
		rc = tfs_cmd_sql(argc, args);
		free(args);
		return rc;
	}
	if (tfs_cli_open_dataset(argv[2], 0, &s, &ds))
		return 1;
	if (!strcmp(argv[1], "ls") && argc == 3) {
		rc = print_names(s, ds);
	} else if ((!strcmp(argv[1], "show") || !strcmp(argv[1], "log")) && argc == 4) {
		rc = tfs_query_head(s, ds, argv[3], &q);
		if (rc == -ENOENT)
			tfs_err("%s: no query %s", argv[2], argv[3]);
		while (!rc) {
			struct tfs_id parent = q.parent;
			const int more = q.has_parent && !strcmp(argv[1], "log");

			print_version(&q);
			tfs_query_free(&q);
			if (!more)
				break;
			printf("\n");
			rc = tfs_query_load(s, ds, argv[3], &parent, &q);
		}
	} else if (!strcmp(argv[1], "rm") && argc == 4) {
		rc = tfs_query_remove(s, ds, argv[3]);
		if (rc == -ENOENT)
			tfs_err("%s: no query %s", argv[2], argv[3]);
		else if (!rc)
			printf("removed query %s of %s (its versions stay in the lake)\n", argv[3],
			       ds);
	} else {
		free(ds);
		tfs_store_close(s);
		return tfs_cli_usage(2);
	}
	free(ds);
	tfs_store_close(s);
	return rc ? 1 : 0;
}
