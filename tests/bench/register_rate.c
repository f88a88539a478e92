/* SPDX-License-Identifier: MIT */
/* register_rate: what registering the chunk cache's arena with the CUDA driver costs, the way
 * staging does it (gpu/cudareg.c: 128 MiB a call), for an arena whose pages the driver faults in
 * itself against one whose pages tfs_arena_populate commits first, on up to 16 threads; and how
 * long a 1 MiB pinned copy made meanwhile on another thread (a batch's) waits for the driver
 * (copies: the number made while the registration ran).
 * Rounds alternate the two. Not run by the tests: tests/gpu/device_run.sh's register step.
 * Usage: register_rate [GIB [ROUNDS]] (default 4 and 3); says SKIP without a device. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "arena.h"
#include "cudareg.h"
#include "util.h"

#define COPY_BYTES (1u << 20)
#define MAX_ROUNDS 16

/* 1 MiB copies from pinned memory to the device, one after another until stop. */
struct copier {
	void *host, *dev;
	int stop; /* atomic */
	uint64_t copies, worst_ns;
};

static void *copy_on(void *arg)
{
	struct copier *c = arg;

	(void)cudaSetDevice(0);
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		const uint64_t t0 = tfs_now_ns();

		if (cudaMemcpy(c->dev, c->host, COPY_BYTES, cudaMemcpyHostToDevice) != cudaSuccess)
			break;
		c->copies++;
		if (tfs_now_ns() - t0 > c->worst_ns)
			c->worst_ns = tfs_now_ns() - t0;
	}
	return NULL;
}

/* One registration of a fresh arena of len bytes, staging's (cudareg.h); its seconds in *took (the
 * commit's share in *commit), the copies' slowest in *worst. 0, or -1 (said why). */
static int one(uint64_t len, unsigned threads, struct copier *c, double *took, double *commit,
	       double *worst)
{
	struct tfs_cuda_reg r = { .threads = threads };
	struct tfs_arena *a;
	pthread_t t;
	uint8_t *base;
	uint64_t bytes, t0;
	int rc;

	if (tfs_arena_create(len, &a)) {
		fprintf(stderr, "register_rate: no arena of %llu MiB\n",
			(unsigned long long)(len >> 20));
		return -1;
	}
	tfs_arena_span(a, &base, &bytes);
	c->copies = c->worst_ns = 0;
	__atomic_store_n(&c->stop, 0, __ATOMIC_RELEASE);
	if (pthread_create(&t, NULL, copy_on, c)) {
		tfs_arena_destroy(a);
		return -1;
	}
	t0 = tfs_now_ns();
	rc = tfs_cuda_register(base, bytes, &r);
	*took = (double)(tfs_now_ns() - t0) / 1e9;
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	*commit = (double)r.commit_ns / 1e9;
	*worst = (double)c->worst_ns / 1e9;
	if (rc)
		fprintf(stderr, "register_rate: the driver refuses: %s\n",
			cudaGetErrorString((cudaError_t)rc));
	else
		tfs_cuda_unregister(base, bytes, &r);
	if (r.commit_rc)
		fprintf(stderr, "register_rate: pages not committed ahead: %s\n",
			strerror(-r.commit_rc));
	tfs_arena_destroy(a);
	return rc ? -1 : 0;
}

static int by_value(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), by_value);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	const uint64_t gib = argc > 1 ? strtoull(argv[1], NULL, 10) : 4;
	const int rounds = argc > 2 ? atoi(argv[2]) : 3;
	const unsigned threads = tfs_cuda_commit_threads();
	double took[2][MAX_ROUNDS], commit[MAX_ROUNDS], worst[2][MAX_ROUNDS];
	struct copier c = { 0 };
	int n = 0;

	if (!gib || rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: register_rate [GIB [ROUNDS (1-%d)]]\n", MAX_ROUNDS);
		return 2;
	}
	if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1 || cudaSetDevice(0) != cudaSuccess) {
		printf("SKIP: no CUDA device\n");
		return 0;
	}
	if (cudaMallocHost(&c.host, COPY_BYTES) != cudaSuccess ||
	    cudaMalloc(&c.dev, COPY_BYTES) != cudaSuccess) {
		fprintf(stderr, "register_rate: no pinned or device buffer for the copies\n");
		return 1;
	}
	printf("registering %llu GiB in %llu MiB calls; %d rounds, alternating\n",
	       (unsigned long long)gib, (unsigned long long)(TFS_CUDA_REG_SEGMENT >> 20), rounds);
	for (int r = 0; r < rounds; r++) {
		double ignored;

		if (one(gib << 30, 0, &c, &took[0][r], &ignored, &worst[0][r]))
			return 1;
		printf("  untouched: %.3f s (%llu copies meanwhile, the slowest %.1f ms)\n",
		       took[0][r], (unsigned long long)c.copies, worst[0][r] * 1e3);
		if (one(gib << 30, threads, &c, &took[1][r], &commit[r], &worst[1][r]))
			return 1;
		printf("  committed on %u threads first: %.3f s, %.3f s of it committing "
		       "(%llu copies, the slowest %.1f ms)\n",
		       threads, took[1][r], commit[r], (unsigned long long)c.copies,
		       worst[1][r] * 1e3);
	}
	{
		const double u = median(took[0], rounds), m = median(took[1], rounds);

		printf("median: untouched %.3f s (%.3f s a GiB), committed first %.3f s (%.3f s a "
		       "GiB): %.2fx the time; the slowest copy %.1f against %.1f ms\n",
		       u, u / (double)gib, m, m / (double)gib, m / u,
		       median(worst[1], rounds) * 1e3, median(worst[0], rounds) * 1e3);
	}
	return 0;
}
