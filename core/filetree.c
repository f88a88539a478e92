/* SPDX-License-Identifier: MIT */
/* filetree: a tree listed directory by directory through its store, then sorted once. */
#include "filetree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "source.h"
#include "util.h"

struct walk {
	struct tfs_store *tree;
	const char *top; /* as the user named it, for messages */
	int (*want)(const char *name, const void *arg);
	const void *arg;
	struct tfs_filetree_file *f;
	size_t n, cap;
	/* The directory being listed and its label, for the callback. */
	const char *rel;
	int64_t label;
	char **subdirs; /* its subdirectories, walked after the listing */
	size_t nsub, subcap;
};

/* "rel/name", or name at the top. */
static char *join(const char *rel, const char *name)
{
	char *p = NULL;

	return asprintf(&p, "%s%s%s", rel, *rel ? "/" : "", name) < 0 ? NULL : p;
}

static int push(char ***v, size_t *n, size_t *cap, char *p)
{
	if (!p)
		return -ENOMEM;
	if (TFS_GROW(*v, cap, *n + 1)) {
		free(p);
		return -ENOMEM;
	}
	(*v)[(*n)++] = p;
	return 0;
}

/* One child of the directory being walked. */
static int walk_entry(void *arg, const char *name, int is_dir)
{
	struct walk *w = arg;
	char *rel;

	if (name[0] == '.')
		return 0;
	if (is_dir)
		return push(&w->subdirs, &w->nsub, &w->subcap, join(w->rel, name));
	if (!w->want(name, w->arg))
		return 0;
	if (TFS_GROW(w->f, &w->cap, w->n + 1) || !(rel = join(w->rel, name)))
		return -ENOMEM;
	w->f[w->n++] = (struct tfs_filetree_file){ rel, w->label };
	return 0;
}

/* Every wanted file under rel (a directory relative to the top), recursively. */
static int walk_dir(struct walk *w, const char *rel, int64_t label)
{
	char **sub;
	size_t nsub;
	int rc;

	w->rel = rel;
	w->label = label;
	w->subdirs = NULL;
	w->nsub = w->subcap = 0;
	rc = tfs_store_list(w->tree, rel, walk_entry, w);
	if (rc && rc != -ENOMEM)
		tfs_err("%s%s%s: cannot list: %s", w->top, *rel ? "/" : "", rel, strerror(-rc));
	sub = w->subdirs;
	nsub = w->nsub;
	for (size_t i = 0; !rc && i < nsub; i++)
		rc = walk_dir(w, sub[i], label);
	for (size_t i = 0; i < nsub; i++)
		free(sub[i]);
	free(sub);
	return rc;
}

/* The length of rel's directory ("" at the top), and its name. */
static size_t split(const char *rel, const char **name)
{
	const char *slash = strrchr(rel, '/');

	*name = slash ? slash + 1 : rel;
	return slash ? (size_t)(slash - rel) : 0;
}

/* os.walk's directories in sorted order, files sorted within each: by (label, dir, name), the
 * directories compared as strcmp compares them. */
static int by_dir_then_name(const void *a, const void *b)
{
	const struct tfs_filetree_file *x = a, *y = b;
	const char *xn, *yn;
	const size_t xd = split(x->rel, &xn), yd = split(y->rel, &yn);
	int c = x->label < y->label ? -1 : x->label > y->label;

	if (!c)
		c = memcmp(x->rel, y->rel, xd < yd ? xd : yd);
	if (!c)
		c = xd < yd ? -1 : xd > yd;
	if (!c)
		c = strcmp(xn, yn);
	return c;
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct classes {
	char **c;
	size_t n, cap;
};

static int class_entry(void *arg, const char *name, int is_dir)
{
	struct classes *cl = arg;

	if (name[0] == '.' || !is_dir)
		return 0;
	return push(&cl->c, &cl->n, &cl->cap, strdup(name));
}

/* The class directories of the tree, sorted: label i is classes[i]. */
static int list_classes(struct walk *w, struct tfs_filetree *out)
{
	struct classes cl = { 0 };
	int rc = tfs_store_list(w->tree, "", class_entry, &cl);

	if (rc && rc != -ENOMEM)
		tfs_err("%s: cannot list: %s", w->top, strerror(-rc));
	if (cl.n)
		qsort(cl.c, cl.n, sizeof(*cl.c), by_str);
	out->classes = cl.c;
	out->nclasses = cl.n;
	return rc;
}

int tfs_filetree_list(const char *top, int classes, int (*want)(const char *name, const void *arg),
		      const void *arg, struct tfs_filetree *out)
{
	struct walk w = { .top = top, .want = want, .arg = arg };
	int rc;

	memset(out, 0, sizeof(*out));
	rc = tfs_source_open_tree(top, &w.tree);
	if (rc)
		return rc;
	out->tree = w.tree;
	if (classes) {
		rc = list_classes(&w, out);
		for (size_t i = 0; !rc && i < out->nclasses; i++)
			rc = walk_dir(&w, out->classes[i], (int64_t)i);
	} else {
		rc = walk_dir(&w, "", 0);
	}
	if (!rc && w.n)
		qsort(w.f, w.n, sizeof(*w.f), by_dir_then_name);
	out->f = w.f; /* freed with it, whatever rc */
	out->n = w.n;
	return rc;
}

int tfs_filetree_shuffle(struct tfs_filetree *t, uint64_t seed)
{
	struct tfs_filetree_file *f = malloc(t->n * sizeof(*f) + 1);
	uint64_t *order = malloc(t->n * sizeof(*order) + 1);
	struct tfs_rng r;

	if (!f || !order) {
		free(f);
		free(order);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->n; i++)
		order[i] = i;
	tfs_rng_seed(&r, seed, 0);
	tfs_rng_shuffle(&r, order, t->n);
	for (size_t i = 0; i < t->n; i++)
		f[i] = t->f[order[i]];
	free(t->f);
	free(order);
	t->f = f;
	return 0;
}

void tfs_filetree_free(struct tfs_filetree *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->f[i].rel);
	free(t->f);
	for (size_t i = 0; i < t->nclasses; i++)
		free(t->classes[i]);
	free(t->classes);
	tfs_store_close(t->tree);
	memset(t, 0, sizeof(*t));
}
