/* SPDX-License-Identifier: MIT */
/* mix_cmd: `tensorfs mix create|update|ls|show|log LAKE_URL ...`: the lake's weighted mixtures
 * of token columns (core/mix.h). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "format.h"
#include "mix.h"
#include "pack.h"
#include "refspec.h"
#include "store.h"
#include "util.h"
#include "version.h"

/* DATASET[@REF][:COL]=WEIGHT, resolved to a commit whose token column is checked. */
static int parse_source(struct tfs_store *s, const char *arg, struct tfs_mix_source *out)
{
	char *spec = strdup(arg), *eq = spec ? strrchr(spec, '=') : NULL, *at, *colon;
	const char *ref = "main";
	struct tfs_version *v = NULL;
	char err[256] = "";
	size_t col;
	int rc = -EINVAL;

	memset(out, 0, sizeof(*out));
	if (!spec)
		return -ENOMEM;
	if (!eq || eq == spec) {
		tfs_err("'%s': expected DATASET[@REF][:COLUMN]=WEIGHT", arg);
		goto out;
	}
	*eq = 0;
	colon = strchr(spec, ':');
	if (colon)
		*colon++ = 0;
	at = strchr(spec, '@');
	if (at) {
		*at++ = 0;
		ref = at;
	}
	out->dataset = strdup(spec);
	out->weight = strdup(eq + 1);
	out->column = colon ? strdup(colon) : NULL;
	if (!out->dataset || !out->weight || (colon && !out->column)) {
		rc = -ENOMEM;
		goto out;
	}
	if (tfs_mix_weight(out->weight, &out->w)) {
		tfs_err("'%s': the weight must be a positive number, at most 1e300", arg);
		goto out;
	}
	rc = tfs_dataset_check(s, spec);
	if (rc == -ENOENT) {
		tfs_err("'%s': no dataset %s in the lake", arg, spec);
		goto out;
	}
	if (!rc) {
		rc = tfs_refspec_resolve(s, spec, ref, &out->commit, err, sizeof(err));
		if (rc && *err)
			tfs_err("'%s': %s", arg, err);
	}
	if (!rc)
		rc = tfs_version_open(s, spec, &out->commit, &v);
	if (!rc && tfs_pack_find_column(&v->manifest, out->column, &col, err, sizeof(err))) {
		tfs_err("'%s': %s", arg, err);
		rc = -EINVAL;
	}
	tfs_version_put(v);
out:
	free(spec);
	return rc;
}

static int write_version(int argc, char **argv, int create)
{
	static const struct option longopts[] = {
		{ "seed", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	struct tfs_mix m = { 0 }, head = { 0 };
	struct tfs_store *s = NULL;
	char hex[TFS_ID_HEX];
	int opt, seeded = 0, rc = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt != 's')
			return tfs_cli_usage(2);
		m.seed = strtoull(optarg, NULL, 10);
		seeded = 1;
	}
	if (argc - optind < 3)
		return tfs_cli_usage(2);
	if (!tfs_name_valid(argv[optind + 1])) {
		tfs_err("'%s' is not a valid mixture name", argv[optind + 1]);
		return 2;
	}
	if (argc - optind - 2 > TFS_MIX_MAX_SOURCES) {
		tfs_err("at most %d sources", TFS_MIX_MAX_SOURCES);
		return 2;
	}
	if (tfs_store_open(argv[optind], 0, &s))
		return 1;
	m.name = strdup(argv[optind + 1]);
	m.src = calloc((size_t)(argc - optind - 2), sizeof(*m.src));
	if (!m.name || !m.src)
		rc = -ENOMEM;
	for (int i = optind + 2; !rc && i < argc; i++) {
		rc = parse_source(s, argv[i], &m.src[m.n]);
		m.n++;
	}
	if (!rc && !create && !seeded) { /* the seed stays unless given */
		rc = tfs_mix_head(s, m.name, &head);
		m.seed = head.seed;
		tfs_mix_free(&head);
	}
	if (!rc) {
		rc = tfs_mix_commit(s, &m, create);
		if (rc == -EINVAL)
			tfs_err("mixture %s: a weight it would not read back; nothing was written",
				m.name);
	}
	if (rc == -EEXIST)
		tfs_err("mixture %s exists: tensorfs mix update makes a new version", m.name);
	else if (rc == -ENOENT && !create)
		tfs_err("no mixture %s: tensorfs mix create makes one", m.name);
	else if (rc == -EAGAIN)
		tfs_err("mixture %s moved meanwhile: nothing was written; run again", m.name);
	else if (!rc) {
		tfs_id_hex(&m.id, hex);
		printf("mixture %s: version %s of %zu source%s\n", m.name, hex, m.n,
		       m.n == 1 ? "" : "s");
	}
	tfs_mix_free(&m);
	tfs_store_close(s);
	return rc == -EAGAIN ? TFS_EXIT_RETRY : rc ? 1 : 0;
}

static int print_name(void *arg, const char *name, int is_dir)
{
	struct tfs_buf *names = arg;

	(void)is_dir;
	return tfs_buf_printf(names, "%s\n", name);
}

static void print_version(const struct tfs_mix *m)
{
	char hex[TFS_ID_HEX], when[32];
	double total = 0;

	tfs_id_hex(&m->id, hex);
	tfs_format_utc((int64_t)m->time, "%Y-%m-%d %H:%M:%S UTC", when, sizeof(when));
	printf("mixture  %s\nversion  %s\ndate     %s\nseed     %" PRIu64 "\n", m->name, hex, when,
	       m->seed);
	for (size_t i = 0; i < m->n; i++)
		total += m->src[i].w;
	for (size_t i = 0; i < m->n; i++) {
		tfs_id_hex(&m->src[i].commit, hex);
		printf("  %3zu  %-20s %.12s  %-12s weight %s (%.4f)\n", i, m->src[i].dataset, hex,
		       m->src[i].column ? m->src[i].column : "-", m->src[i].weight,
		       m->src[i].w / total);
	}
}

int tfs_cmd_mix(int argc, char **argv)
{
	struct tfs_store *s = NULL;
	struct tfs_mix m = { 0 };
	int rc;

	if (argc < 3)
		return tfs_cli_usage(2);
	if (!strcmp(argv[1], "create") || !strcmp(argv[1], "update"))
		return write_version(argc - 1, argv + 1, !strcmp(argv[1], "create"));
	if (tfs_store_open(argv[2], 0, &s))
		return 1;
	if (!strcmp(argv[1], "ls") && argc == 3) {
		struct tfs_buf names = { 0 };

		rc = tfs_mix_list(s, print_name, &names);
		if (!rc && names.len)
			fwrite(names.data, 1, names.len, stdout);
		tfs_buf_free(&names);
	} else if ((!strcmp(argv[1], "show") || !strcmp(argv[1], "log")) && argc == 4) {
		rc = tfs_mix_head(s, argv[3], &m);
		if (rc == -ENOENT)
			tfs_err("no mixture %s", argv[3]);
		while (!rc) {
			struct tfs_id parent = m.parent;
			int more = m.has_parent && !strcmp(argv[1], "log");

			print_version(&m);
			tfs_mix_free(&m);
			if (!more)
				break;
			printf("\n");
			rc = tfs_mix_load(s, argv[3], &parent, &m);
		}
	} else {
		tfs_store_close(s);
		return tfs_cli_usage(2);
	}
	tfs_store_close(s);
	return rc ? 1 : 0;
}
