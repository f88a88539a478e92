/* SPDX-License-Identifier: MIT */
/* jsonalloc: jansson's allocations, for values parsed and dropped on one thread within a scope,
 * from a bump arena of the thread's: a JSON Lines import parses every line twice, and a malloc
 * and a free for each value and key were an eighth of its time. Everything else jansson makes
 * (values that outlive a scope, other threads' values) is plain malloc as before. */
#ifndef TFS_JSONALLOC_H
#define TFS_JSONALLOC_H

/* Make jansson allocate through this module: once, before any thread is inside a scope (values
 * jansson made earlier are freed with free() as they were made with malloc()). */
void tfs_jsonalloc_install(void);
/* On this thread, from now until tfs_jsonalloc_end: values come from its arena (those that do
 * not fit, from malloc; all of them, before tfs_jsonalloc_install). Scopes do not nest. */
void tfs_jsonalloc_begin(void);
/* Every value made in the scope has been dropped (json_decref): the arena is empty again. */
void tfs_jsonalloc_end(void);
/* Whether p lies in the arena of this thread's open scope (tests, assertions). */
int tfs_jsonalloc_holds(const void *p);

#endif
