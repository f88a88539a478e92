/* SPDX-License-Identifier: MIT */
/* Fuzz target for the control file's requests (gpu/ctltext.c, gpu/ctlioctl.c), served against a
 * real lake with host staging: byte 0 even, the rest are text request lines; odd, a sequence of
 * ioctls, each a command byte then its struct's bytes. Every session is closed after its input;
 * no slot file may outlive it. */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tensorfs/control.h>

#include "ctlfile.h"
#include "format.h"
#include "fuzz_common.h"
#include "import.h"
#include "lake.h"

#define ROWS 300

static char tmpdir[64], shmdir[96];
static struct tfs_lake *lake;
static struct tfs_ctlfile *ctl;

static void cleanup(void)
{
	if (ctl)
		tfs_ctlfile_destroy(ctl);
	if (lake)
		tfs_lake_close(lake);
	if (tmpdir[0])
		fuzz_rm_tree(tmpdir);
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "fuzz_ctl: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
	abort();
}

/* An NPY 1.0 file: magic, header padded to 64 bytes, then the data. */
static void write_npy(const char *path, const char *descr, const char *shape, const void *data,
		      size_t nbytes)
{
	char hdr[128];
	int n = snprintf(hdr, sizeof(hdr), "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
			 descr, shape);
	const uint8_t magic[8] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0 };
	FILE *f = fopen(path, "wb");
	uint16_t hlen;

	while ((10 + n + 1) % 64)
		hdr[n++] = ' ';
	hdr[n++] = '\n';
	hlen = (uint16_t)n;
	if (!f || fwrite(magic, 1, 8, f) != 8 || fwrite(&hlen, 2, 1, f) != 1 ||
	    fwrite(hdr, 1, (size_t)n, f) != (size_t)n || fwrite(data, 1, nbytes, f) != nbytes)
		die(path, errno);
	fclose(f);
}

/* Columns x (float32 rows of 3), t (text) and r (ragged int16), in chunks of a few rows. */
static void make_lake(const char *url)
{
	struct tfs_import_opts o = { .message = "fuzz",
				     .chunk_bytes = 512,
				     .codec = TFS_CODEC_ZSTD,
				     .level = 1,
				     .threads = 1 };
	struct tfs_import_src src[3];
	char x[128], t[128], r[128];
	struct tfs_store *s;
	struct tfs_id id;
	FILE *f;
	int rc;

	snprintf(x, sizeof(x), "%s/x.npy", tmpdir);
	snprintf(t, sizeof(t), "%s/t.txt", tmpdir);
	snprintf(r, sizeof(r), "%s/r", tmpdir);
	{
		static float v[ROWS * 3];

		for (int i = 0; i < ROWS * 3; i++)
			v[i] = (float)i;
		write_npy(x, "<f4", "(300, 3)", v, sizeof(v));
	}
	f = fopen(t, "w");
	for (int i = 0; i < ROWS; i++)
		fprintf(f, "row %d %.*s\n", i, i % 9, "abcdefghi");
	fclose(f);
	mkdir(r, 0700);
	for (int i = 0; i < ROWS; i++) {
		char p[160];
		const int16_t v[4] = { (int16_t)i, 1, 2, 3 };

		snprintf(p, sizeof(p), "%s/%06d.npy", r, i);
		write_npy(p, "<i2", i % 2 ? "(1,)" : "(4,)", v, (i % 2 ? 1 : 4) * sizeof(int16_t));
	}
	src[0] = (struct tfs_import_src){ "x", x, TFS_SRC_NPY, 0 };
	src[1] = (struct tfs_import_src){ "t", t, TFS_SRC_TEXT, 0 };
	src[2] = (struct tfs_import_src){ "r", r, TFS_SRC_NPY_DIR, 0 };
	rc = tfs_store_open(url, TFS_STORE_CREATE, &s);
	if (!rc)
		rc = tfs_dataset_create(s, "d");
	if (!rc)
		rc = tfs_import(s, "d", src, 3, &o, &id);
	if (rc)
		die("building the lake", rc);
	tfs_store_close(s);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char url[128];
	struct tfs_lake_config lc = {
		.cache_mem = 8 << 20, .prefetch_threads = 0, .gather_threads = 1, .ref_ttl = 5
	};
	struct tfs_ctlfile_config cc = { 0 };
	int rc;

	(void)argc;
	(void)argv;
	tfs_log_open("/dev/null"); /* request errors are expected by the thousand */
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/tfs-fuzz-ctl-%d-XXXXXX", (int)getpid());
	if (!mkdtemp(tmpdir))
		die("mkdtemp", errno);
	atexit(cleanup);
	snprintf(url, sizeof(url), "file://%s/lake", tmpdir);
	snprintf(shmdir, sizeof(shmdir), "%s/shm", tmpdir);
	mkdir(shmdir, 0700);
	make_lake(url);
	lc.url = url;
	rc = tfs_lake_open(&lc, &lake);
	if (!rc)
		rc = tfs_lake_start(lake);
	if (rc)
		die("opening the lake", rc);
	cc.lake = lake;
	cc.shm_dir = shmdir;
	rc = tfs_ctlfile_create(&cc, &ctl);
	if (rc)
		die("the control file", rc);
	return 0;
}

/* Files of streams in dir (not those of slots kept after their streams closed: the control
 * file's, until a stream takes them or it frees them). */
static size_t files_in(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.' && !strstr(e->d_name, "-kept-");
	if (d)
		closedir(d);
	return n;
}

/* Every reply is whole lines of "ok ..." or "error NAME message". */
static void check_replies(struct tfs_ctlfile_session *se)
{
	static char buf[1 << 16];
	ssize_t n;

	while ((n = tfs_ctlfile_read(se, buf, sizeof(buf) - 1)) > 0) {
		buf[n] = 0;
		FUZZ_CHECK(buf[n - 1] == '\n');
		for (char *l = buf; *l; l = strchr(l, '\n') + 1)
			FUZZ_CHECK(!strncmp(l, "ok", 2) || !strncmp(l, "error E", 7));
	}
	FUZZ_CHECK(n == 0);
}

static void run_text(struct tfs_ctlfile_session *se, const uint8_t *data, size_t len)
{
	/* In two writes at a point the input picks: a request may span writes. */
	size_t cut = len ? data[0] % (len + 1) : 0;
	ssize_t w = tfs_ctlfile_write(se, (const char *)data, cut);

	FUZZ_CHECK(w == (ssize_t)cut || w == -ENOBUFS || w == -EINVAL);
	check_replies(se);
	w = tfs_ctlfile_write(se, (const char *)data + cut, len - cut);
	FUZZ_CHECK(w == (ssize_t)(len - cut) || w == -ENOBUFS || w == -EINVAL);
	check_replies(se);
}

static void run_ioctls(struct tfs_ctlfile_session *se, const uint8_t *data, size_t len)
{
	static const struct {
		unsigned cmd;
		size_t size;
	} cmds[] = {
		{ TFS_CTL_IOC_OPEN, sizeof(struct tfs_ctl_open) },
		{ TFS_CTL_IOC_STAGE, sizeof(struct tfs_ctl_stage) },
		{ TFS_CTL_IOC_RELEASE, sizeof(struct tfs_ctl_release) },
		{ TFS_CTL_IOC_CLOSE, sizeof(struct tfs_ctl_close) },
		{ TFS_CTL_IOC_STATS, sizeof(struct tfs_ctl_stats) },
		{ TFS_CTL_IOC_SEEK, sizeof(struct tfs_ctl_seek) },
		{ TFS_CTL_IOC_NEXT, sizeof(struct tfs_ctl_next) },
	};
	static uint8_t in[16384], out[16384];

	while (len > 1) {
		const size_t k = data[0] % (sizeof(cmds) / sizeof(cmds[0]));
		const size_t size = cmds[k].size, take = len - 1 < size ? len - 1 : size;
		struct tfs_ctl_status st;
		int rc;

		memset(in, 0, size);
		memcpy(in, data + 1, take);
		rc = tfs_ctlfile_ioctl(se, cmds[k].cmd, in, size, out, size);
		FUZZ_CHECK(rc == 0);
		memcpy(&st, out, sizeof(st));
		FUZZ_CHECK(st.status <= 0);
		FUZZ_CHECK(memchr(st.msg, 0, sizeof(st.msg)) != NULL);
		data += 1 + take;
		len -= 1 + take;
	}
	/* A size that does not match its command is refused. */
	FUZZ_CHECK(tfs_ctlfile_ioctl(se, TFS_CTL_IOC_STATS, in, 3, out, 3) == -EINVAL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct tfs_ctlfile_session *se;

	if (len < 1 || tfs_ctlfile_session_open(ctl, getuid(), getgid(), &se))
		return 0;
	if (data[0] & 1)
		run_ioctls(se, data + 1, len - 1);
	else
		run_text(se, data + 1, len - 1);
	tfs_ctlfile_session_close(se);
	FUZZ_CHECK(files_in(shmdir) == 0);
	return 0;
}
