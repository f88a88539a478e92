/* SPDX-License-Identifier: MIT */
/* ctl_client: drives the staging ioctls through libtensorfs-client, for test_control.py.
 *
 * usage: ctl_client MOUNT TARGET COL[,COL...] DEVICE OUTDIR OP...
 *   rows:I,J,K  range:A:B  next:B  all:B (next until the end)  seek:P  stats  release:S
 *   each:B (next until the end, each batch given back in the call for the next: one
 *   TFS_CTL_IOC_NEXT a batch)  after:B:K (one such call giving back slot K)
 *   text:LINE (one text request, its reply printed)
 *        ctl_client rows COLDIR
 *   prints each row of a ragged, text or bytes column (tfs_client_rows_open): "I LEN HEX [D...]"
 * Every batch's columns are written to OUTDIR/<n>_<col>.bin, a line "batch n slot S rows R
 * pos P" is printed, and the slot is released. A refused request prints "error CODE MSG". */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensorfs/client.h>

static int nbatch;

/* A column of rows of any size: OUTDIR/N_COL.rows, a line per row: its bytes in hex, then its
 * shape (ragged), read with tfs_client_batch_row. */
static void dump_rows(const char *outdir, const struct tfs_ctl_batch *b, const void *base,
		      size_t len, uint32_t c)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d_%s.rows", outdir, nbatch, b->cols[c].name);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	for (uint64_t i = 0; i < b->rows; i++) {
		const int64_t *shape;
		const void *data;
		size_t n;
		int rc = tfs_client_batch_row(b, base, len, c, i, &data, &n, &shape);

		if (rc) {
			fprintf(f, "error %d\n", rc);
			break;
		}
		for (size_t k = 0; k < n; k++)
			fprintf(f, "%02x", ((const uint8_t *)data)[k]);
		for (uint32_t d = 0; shape && d < b->cols[c].ndim; d++)
			fprintf(f, " %lld", (long long)shape[d]);
		fprintf(f, "\n");
	}
	fclose(f);
}

static int dump(const char *outdir, const struct tfs_ctl_batch *b)
{
	const void *base;
	size_t len;
	int rc = tfs_client_map(b, &base, &len);

	if (rc) {
		printf("error %d cannot map %s\n", rc, b->path);
		return rc;
	}
	for (uint32_t c = 0; c < b->ncols; c++) {
		char path[4096];
		FILE *f;

		if (b->cols[c].kind != TFS_CTL_FIXED) {
			dump_rows(outdir, b, base, len, c);
			continue;
		}
		snprintf(path, sizeof(path), "%s/%d_%s.bin", outdir, nbatch, b->cols[c].name);
		f = fopen(path, "wb");
		if (!f || fwrite((const char *)base + b->cols[c].offset, 1, b->cols[c].bytes, f) !=
				  b->cols[c].bytes) {
			perror(path);
			exit(1);
		}
		fclose(f);
	}
	tfs_client_unmap(base, len);
	printf("batch %d slot %u rows %llu pos %llu dtype %s ndim %u\n", nbatch, b->slot,
	       (unsigned long long)b->rows, (unsigned long long)b->pos, b->cols[0].dtype,
	       b->cols[0].ndim);
	nbatch++;
	return 0;
}

static int print_rows(const char *dir)
{
	struct tfs_client_rows r;
	int rc = tfs_client_rows_open(dir, &r);

	if (rc) {
		printf("error %d %s\n", rc, strerror(-rc));
		return 3;
	}
	printf("rows %llu ndim %u\n", (unsigned long long)r.rows, r.ndim);
	for (uint64_t i = 0; i < r.rows; i++) {
		const int64_t *shape;
		const void *data;
		size_t len;

		rc = tfs_client_row(&r, i, &data, &len, &shape);
		if (rc)
			break;
		printf("%llu %zu ", (unsigned long long)i, len);
		for (size_t k = 0; k < len; k++)
			printf("%02x", ((const uint8_t *)data)[k]);
		for (unsigned d = 0; shape && d < r.ndim; d++)
			printf(" %lld", (long long)shape[d]);
		printf("\n");
	}
	printf("%s\n",
	       tfs_client_row(&r, r.rows, &(const void *){ NULL }, &(size_t){ 0 }, NULL) == -ERANGE
		       ? "end"
		       : "no end");
	tfs_client_rows_close(&r);
	return rc ? 3 : 0;
}

int main(int argc, char **argv)
{
	static struct tfs_ctl_stage io;
	const char *cols[TFS_CTL_MAX_COLS];
	struct tfs_ctl_open o;
	size_t ncols = 0;
	char *colspec;
	int fd, rc;

	if (argc == 3 && !strcmp(argv[1], "rows"))
		return print_rows(argv[2]);
	if (argc < 6) {
		fprintf(stderr, "usage: ctl_client MOUNT TARGET COLS DEVICE OUTDIR OP...\n");
		return 2;
	}
	fd = tfs_client_connect(argv[1]);
	if (fd < 0) {
		printf("error %d cannot open the control file: %s\n", fd, strerror(-fd));
		return 3;
	}
	colspec = strdup(argv[3]);
	for (char *c = strtok(colspec, ","); c && ncols < TFS_CTL_MAX_COLS; c = strtok(NULL, ","))
		cols[ncols++] = c;
	rc = tfs_client_open(fd, argv[2], cols, ncols, argv[4], 0, 0, &o);
	if (rc) {
		printf("error %d %s\n", rc, o.st.msg);
		return 3;
	}
	printf("stream %u rows %llu slots %u batch %llu\n", o.stream, (unsigned long long)o.rows,
	       o.slots, (unsigned long long)o.max_batch);
	for (int i = 6; i < argc; i++) {
		const char *op = argv[i];

		if (!strncmp(op, "rows:", 5)) {
			uint64_t rows[TFS_CTL_MAX_ROWS];
			size_t n = 0;
			char *copy = strdup(op + 5);

			for (char *t = strtok(copy, ","); t && n < TFS_CTL_MAX_ROWS;
			     t = strtok(NULL, ","))
				rows[n++] = strtoull(t, NULL, 10);
			free(copy);
			rc = tfs_client_stage_rows(fd, o.stream, rows, n, &io);
		} else if (!strncmp(op, "range:", 6)) {
			unsigned long long a, b;

			if (sscanf(op + 6, "%llu:%llu", &a, &b) != 2)
				return 2;
			rc = tfs_client_stage_range(fd, o.stream, a, b - a, &io);
		} else if (!strncmp(op, "next:", 5)) {
			rc = tfs_client_next(fd, o.stream, strtoull(op + 5, NULL, 10), &io);
		} else if (!strncmp(op, "all:", 4)) {
			const uint64_t b = strtoull(op + 4, NULL, 10);

			while (!(rc = tfs_client_next(fd, o.stream, b, &io))) {
				dump(argv[5], &io.u.batch);
				tfs_client_release(fd, o.stream, (int32_t)io.u.batch.slot);
			}
			printf("end %d %s\n", rc, io.st.msg);
			continue;
		} else if (!strncmp(op, "each:", 5)) {
			const uint64_t b = strtoull(op + 5, NULL, 10);
			struct tfs_ctl_next nx;
			int32_t give = -1;

			while (!(rc = tfs_client_next_release(fd, o.stream, b, give, &nx))) {
				dump(argv[5], &nx.out);
				give = (int32_t)nx.out.slot;
			}
			printf("end %d %s\n", rc, nx.st.msg);
			continue;
		} else if (!strncmp(op, "after:", 6)) {
			unsigned long long b;
			int k;
			struct tfs_ctl_next nx;

			if (sscanf(op + 6, "%llu:%d", &b, &k) != 2)
				return 2;
			rc = tfs_client_next_release(fd, o.stream, b, k, &nx);
			if (rc) {
				printf("error %d %s\n", rc, nx.st.msg);
				continue;
			}
			dump(argv[5], &nx.out);
			tfs_client_release(fd, o.stream, (int32_t)nx.out.slot);
			continue;
		} else if (!strncmp(op, "seek:", 5)) {
			rc = tfs_client_seek(fd, o.stream, strtoull(op + 5, NULL, 10));
			printf("seek %d\n", rc);
			continue;
		} else if (!strncmp(op, "release:", 8)) {
			rc = tfs_client_release(fd, o.stream, atoi(op + 8));
			printf("release %d\n", rc);
			continue;
		} else if (!strcmp(op, "stats")) {
			struct tfs_ctl_stats st;

			rc = tfs_client_stats(fd, &st);
			printf("stats %d sessions %llu streams %llu leased %llu session_leased "
			       "%llu\n",
			       rc, (unsigned long long)st.sessions, (unsigned long long)st.streams,
			       (unsigned long long)st.slots_leased,
			       (unsigned long long)st.session_leased);
			continue;
		} else if (!strncmp(op, "text:", 5)) {
			char reply[65536];
			ssize_t n = tfs_client_request(fd, op + 5, reply, sizeof(reply));

			printf("text %zd %s\n", n, n >= 0 ? reply : "");
			continue;
		} else {
			fprintf(stderr, "unknown op %s\n", op);
			return 2;
		}
		if (rc) {
			printf("error %d %s\n", rc, io.st.msg);
			continue;
		}
		dump(argv[5], &io.u.batch);
		tfs_client_release(fd, o.stream, (int32_t)io.u.batch.slot);
	}
	tfs_client_close_stream(fd, o.stream);
	tfs_client_disconnect(fd);
	free(colspec);
	return 0;
}
