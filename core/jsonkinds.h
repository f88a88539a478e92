/* SPDX-License-Identifier: MIT */
/* jsonkinds: what the fields of a JSON Lines file's rows hold, for import_json.c: the fields of
 * the first object, the kind each value is and how a field's kind widens, the file's lines and
 * megabyte blocks of them, and the kinds every row widens the fields to (the import's pass 1). */
#ifndef TFS_JSONKINDS_H
#define TFS_JSONKINDS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "rowcol.h"
#include "workpool.h"

#define TFS_JSONL_MAX_FIELDS 64

/* What a field holds, as its column will. */
enum tfs_jkind {
	TFS_JK_INT,
	TFS_JK_FLOAT,
	TFS_JK_BOOL,
	TFS_JK_TEXT,
	TFS_JK_LIST_INT,
	TFS_JK_LIST_FLOAT,
	TFS_JK_JSON
};

struct tfs_jfield {
	const char *name; /* the first object's key (kept alive by it) */
	enum tfs_jkind kind;
	int fixed; /* --fixed: a list column of one length */
	/* --tokens: a list of token ids, stored as uint16 when every id fits, else uint32 */
	int tokens;
	unsigned tsize; /* 2 or 4, once the ids are known */
	char media;	/* --media: 'i', 'v' or 'a': a path to a file decoded into the row */
	size_t len;	/* that length (lists), set by the first row */
	size_t col;	/* its column in the manifest */
	struct tfs_rowcol *w;
};

enum tfs_jkind tfs_jkind_of(const json_t *v);
/* May a value of kind k go into a field of kind f? (Integers go where floats go.) */
int tfs_jkind_fits(enum tfs_jkind f, enum tfs_jkind k);
/* Widen f to take a value of kind k where a column can (integers to floats): 1, or 0 when it
 * cannot. Only integers and lists of integers ever widen. */
int tfs_jfield_widen(struct tfs_jfield *f, enum tfs_jkind k);

/* The lines of a mapped file, one at a time. */
struct tfs_jlines {
	const char *p, *end;
	uint64_t lineno;
};

/* The next line of l: 1, or 0 at its end. */
int tfs_jlines_next(struct tfs_jlines *l, const char **line, size_t *len);
/* Spaces, tabs and carriage returns only. */
int tfs_jline_blank(const char *p, size_t n);
/* The line's value (JSON_DECODE_ANY), or NULL with jansson's reason in why. */
json_t *tfs_jline_parse(const char *line, size_t len, char *why, size_t cap);
/* The next block of [*at, end) into [*bp, *be): TFS_JLINES_BLOCK bytes, to the end of its last
 * line. 0 at the end. */
#define TFS_JLINES_BLOCK (1u << 20)
int tfs_jlines_block(const char **at, const char *end, const char **bp, const char **be);
/* The same, blocks of `size` bytes. */
int tfs_jlines_block_of(const char **at, const char *end, size_t size, const char **bp,
			const char **be);

/* The kinds a run of rows widens fields to, and the range of the --tokens field's ids: a row
 * counts when it is an object, for each field it has, whatever else makes it a bad row. */
struct tfs_jtally {
	struct tfs_jfield f[TFS_JSONL_MAX_FIELDS]; /* a copy of the fields, widened */
	size_t nf;
	int64_t tok_min, tok_max; /* INT64_MAX, INT64_MIN: no id seen */
};

void tfs_jtally_init(struct tfs_jtally *t, const struct tfs_jfield *f, size_t nf);
/* Count row o (any value; NULL too). */
void tfs_jtally_row(struct tfs_jtally *t, const json_t *o);
/* Widen f to t's kinds. */
void tfs_jtally_widen(const struct tfs_jtally *t, struct tfs_jfield *f);
/* t takes in what u counted (of the same fields): kinds widened further, the ids' range. */
void tfs_jtally_merge(struct tfs_jtally *t, const struct tfs_jtally *u);

/* The first line that holds an object with fields: its fields and kinds in f (*nf of them),
 * the object in *first (the field names live in it), its --tokens ids counted in t (initialised
 * here), and in *rest where the lines after it start. -EINVAL (not logged) when no line holds
 * one. */
int tfs_jsonl_first(const char *data, size_t len, const char *tokens, struct tfs_jfield *f,
		    size_t *nf, json_t **first, struct tfs_jtally *t, const char **rest);
/* Pass 1: the rows of [from, end) counted into t, a megabyte block at a time on the pool. */
int tfs_jsonl_scan(struct tfs_workpool *pool, const char *from, const char *end,
		   struct tfs_jtally *t);
/* The fields as columns will take them, from what t counted: kinds widened to t's, the
 * --tokens field's size (tsize, 2 or 4; 0: the smallest that holds every id) and the --fixed
 * fields' lengths (the first object's). -EINVAL, logged, when an option does not fit the
 * rows. */
int tfs_jsonl_settle(struct tfs_jfield *f, size_t nf, const json_t *first,
		     const struct tfs_jtally *t, const char *tokens, unsigned tsize,
		     const char *const *fixed, size_t nfixed);

#endif
