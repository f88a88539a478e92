/* SPDX-License-Identifier: MIT */
/* workpool: the engine's one pool of worker threads. Tasks wait in a queue per priority and are
 * served highest priority first, in submission order within one: a chunk a reader waits for goes
 * before read-ahead. Tasks are intrusive (the caller embeds struct tfs_work in its own job), so
 * submitting never allocates and never fails; each producer bounds what it queues (the
 * prefetcher by bytes ahead, an import by chunks in flight, staging by its slots).
 *
 * A group gathers the tasks of one piece of work: its owner waits for them (running queued ones
 * itself meanwhile, so that a task may wait on a group of its own without deadlocking a busy
 * pool), learns the first error, or cancels what has not started. */
#ifndef TFS_WORKPOOL_H
#define TFS_WORKPOOL_H

#include <pthread.h>
#include <stddef.h>

enum tfs_work_prio {
	TFS_WORK_WAITED, /* a reader is blocked on it */
	TFS_WORK_NORMAL, /* asked for: staging gathers, import chunks, ranged parts */
	TFS_WORK_AHEAD,	 /* read-ahead: only when nothing else waits */
	TFS_WORK_NPRIO
};

struct tfs_workgroup;

struct tfs_work {
	/* Runs on a worker (or on the thread waiting for its group); its return value is the
	 * group's error when it is the first non-zero one. */
	int (*run)(struct tfs_work *w);
	/* Called instead of run for a task cancelled before it started; may be NULL. */
	void (*drop)(struct tfs_work *w);
	/* The pool's: */
	struct tfs_work *next;
	struct tfs_workgroup *group;
};

struct tfs_workpool;

/* A group: zero-initialise, then tfs_workgroup_init. Fields are the pool's (under its lock). */
struct tfs_workgroup {
	struct tfs_workpool *pool;
	unsigned pending; /* submitted, not finished */
	int err;	  /* the first task error */
	int prio;	  /* its tasks' priority: the last submitted */
	pthread_cond_t changed;
};

/* nthreads workers (at least 1). */
int tfs_workpool_create(unsigned nthreads, struct tfs_workpool **out);
/* A pool whose owner is one of its nthreads threads (an import's --threads N): nthreads - 1
 * workers, and a thread waiting for one of its groups runs other queued tasks meanwhile, not only
 * the group's, so that N threads are busy while the owner waits: tasks as urgent as the group's
 * (its last submitted priority) or more. An owner waiting for the item it reads next
 * (TFS_WORK_WAITED) thus runs other items, not a chunk's encoding (TFS_WORK_NORMAL), which would
 * keep it from making items while the workers run out of them. With nthreads 1 there are no
 * workers: every task runs in its owner's waits. Tasks must not wait for anything but groups. */
int tfs_workpool_create_with_caller(unsigned nthreads, struct tfs_workpool **out);
/* Stop and join the workers. Every group must be finished or cancelled first. */
void tfs_workpool_destroy(struct tfs_workpool *p);
/* Threads that run tasks: the workers, and the owner of a pool made with_caller. */
unsigned tfs_workpool_threads(const struct tfs_workpool *p);
/* The most tasks that ran at once so far (the owner's included). */
unsigned tfs_workpool_busy_peak(struct tfs_workpool *p);
/* Tasks queued (not running) now, of every priority. */
size_t tfs_workpool_queued(struct tfs_workpool *p);

void tfs_workgroup_init(struct tfs_workgroup *g, struct tfs_workpool *p);
void tfs_workgroup_destroy(struct tfs_workgroup *g);
/* Queue w, of g, at prio. */
void tfs_workgroup_submit(struct tfs_workgroup *g, struct tfs_work *w, enum tfs_work_prio prio);
/* Wait until at most `left` of g's tasks are pending, running g's queued tasks on this thread
 * while none of the workers has them. Returns g's first error so far (0: none). */
int tfs_workgroup_wait_below(struct tfs_workgroup *g, unsigned left);
/* tfs_workgroup_wait_below(g, 0): every task done. */
int tfs_workgroup_wait(struct tfs_workgroup *g);
/* Every task of g done, running only g's queued tasks on this thread, never another group's:
 * for a short wait on a step others wait for in turn (an importer adding a block's rows), which
 * a long task of another group run meanwhile would hold up. */
int tfs_workgroup_wait_own(struct tfs_workgroup *g);
/* Drop g's tasks that have not started (their drop is called) and wait for the running ones. */
void tfs_workgroup_cancel(struct tfs_workgroup *g);

/* Run fn(arg, i) for every i in [0, n), up to `parallel` (at most 64) at a time, the caller
 * among them: the others are tasks of priority prio on pool (NULL: threads of their own), which
 * a busy pool leaves to the caller. After a failure no further task starts. Returns 0 or the
 * first failure's -errno. */
int tfs_parallel(struct tfs_workpool *pool, enum tfs_work_prio prio, size_t n, unsigned parallel,
		 int (*fn)(void *arg, size_t i), void *arg);

#endif
