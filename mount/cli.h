/* SPDX-License-Identifier: MIT */
/* cli: what the tensorfs command's files share: the usage text, opening a dataset, and the
 * commands that live in files of their own (mount, import, upkeep). */
#ifndef TFS_CLI_H
#define TFS_CLI_H

#include <stddef.h>
#include <stdint.h>

/* help.c: print the usage text, or the command's lines of it once one is known (to stdout for
 * rc 0, else stderr); returns rc. */
int tfs_cli_usage(int rc);
/* The command being run (its name as the usage text spells it): tfs_cli_usage prints its lines
 * alone from then on. */
void tfs_cli_command(const char *name);
/* `tensorfs help [COMMAND]`, `tensorfs COMMAND --help`: the command's lines of the usage text,
 * an example, and the notes for every command. */
int tfs_cmd_help(const char *name);
/* The usage text as the man page's COMMANDS section (roff), with the examples:
 * `tensorfs help --man`, which the build puts into tensorfs.1. */
void tfs_cmd_help_man(FILE *out);

/* `tensorfs mount LAKE_URL MOUNTPOINT ...`, also as mount.tensorfs and as mount.fuse runs it;
 * argv[0] is the command's name. Returns the exit status. */
int tfs_cmd_mount(int argc, char **argv);

#define TFS_EXIT_RETRY                                                            \
	75 /* EX_TEMPFAIL: another writer moved the branch; running again is safe \
	    */

struct tfs_store;

/* Keep freed memory for reuse rather than unmapping it (commands that churn through chunk
 * and sample buffers). */
void tfs_cli_keep_freed_memory(void);

/* Open URL = LAKE_URL/DATASET: the store (*s) and the dataset's name (*ds, handed over); logs
 * and returns non-zero when it cannot. */
int tfs_cli_open_dataset(const char *url, unsigned flags, struct tfs_store **s, char **ds);

/* An import (or update) that failed because a source's bytes were damaged on the way
 * (tfs_source_verify's -EBADMSG) left the dataset unchanged: it is run once more, from the
 * start, before it is given up. Whether to run it again: *tries counts the runs again; p, the
 * progress (may be NULL), starts over. */
struct tfs_progress;
int tfs_cli_again_if_damaged(int rc, unsigned *tries, const char *url, struct tfs_progress *p);

/* The commit ref names in dataset ds (url: for messages, which it logs). */
struct tfs_id;
int tfs_cli_resolve(struct tfs_store *s, const char *url, const char *ds, const char *ref,
		    struct tfs_id *id);

/* `tensorfs import URL ...`. Returns the exit status. */
int tfs_cmd_import(int argc, char **argv);
/* sql_cmd.c: `tensorfs sql URL[@REF] "SELECT ..." [--csv | --json] [--stats]`. */
int tfs_cmd_sql(int argc, char **argv);
/* vector_cmd.c: `tensorfs vector index|ls URL ...`, and the search sql --nprobe makes. */
int tfs_cmd_vector(int argc, char **argv);
struct tfs_version;
struct tfs_knn_hit;
enum tfs_knn_metric;
int tfs_cli_vindex_search(struct tfs_store *s, const char *ds, struct tfs_version *v,
			  const char *col, const float *q, size_t nq, size_t d,
			  enum tfs_knn_metric metric, size_t k, size_t nprobe, const uint64_t *rows,
			  uint64_t n, struct tfs_knn_hit *out, size_t *found);
/* query_cmd.c: `tensorfs query save|ls|show|log|rm URL ...`. */
int tfs_cmd_query(int argc, char **argv);
/* mix_cmd.c: `tensorfs mix create|update|ls|show|log LAKE_URL ...`. */
int tfs_cmd_mix(int argc, char **argv);
/* export_cmd.c: `tensorfs export URL COLUMN --megatron PREFIX [--ref REF]`. */
int tfs_cmd_export(int argc, char **argv);

/* maint_cmd.c: `tensorfs verify URL`, `gc LAKE_URL|URL`, `index LAKE_URL`. Exit statuses. */
int tfs_cmd_verify(int argc, char **argv);
int tfs_cmd_gc(int argc, char **argv);
int tfs_cmd_index(int argc, char **argv);

/* session_cmd.c: `tensorfs commit URL --session ID ...`, `session ls|abort URL`. */
int tfs_cmd_commit(int argc, char **argv);
int tfs_cmd_session(int argc, char **argv);

#endif
