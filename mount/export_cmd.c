/* SPDX-License-Identifier: MIT */
/* export_cmd: `tensorfs export URL COLUMN --megatron PREFIX [--ref REF]`: a version's column
 * written out in another system's format. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "megatron.h"
#include "store.h"
#include "util.h"
#include "version.h"

int tfs_cmd_export(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "megatron", required_argument, NULL, 'M' },
		{ "ref", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	const char *ref = "main", *prefix = NULL;
	struct tfs_version *v = NULL;
	struct tfs_cache *cache = NULL;
	struct tfs_store *s = NULL;
	struct tfs_id id;
	char *ds = NULL;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt == 'M')
			prefix = optarg;
		else if (opt == 'r')
			ref = optarg;
		else
			return tfs_cli_usage(2);
	}
	if (argc - optind != 2 || !prefix) {
		tfs_err("export: URL COLUMN --megatron PREFIX [--ref REF]");
		return 2;
	}
	if (tfs_cli_open_dataset(argv[optind], 0, &s, &ds))
		return 1;
	rc = tfs_cli_resolve(s, argv[optind], ds, ref, &id);
	if (!rc)
		rc = tfs_version_open(s, ds, &id, &v);
	if (!rc)
		rc = tfs_cache_create(256ull << 20, &cache);
	if (!rc)
		rc = tfs_export_megatron(v, cache, argv[optind + 1], prefix);
	if (!rc)
		printf("exported %s of %s@%s as %s.bin and %s.idx\n", argv[optind + 1], ds, ref,
		       prefix, prefix);
	tfs_version_put(v);
	tfs_cache_destroy(cache);
	free(ds);
	tfs_store_close(s);
	return rc ? 1 : 0;
}
