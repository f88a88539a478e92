/* SPDX-License-Identifier: MIT */
/* mount_cmd: `tensorfs mount` and mount.tensorfs: options, mount-point checks, the daemon's log,
 * the lake, and the control file plugged into fs/ from gpu/. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "ctlfile.h"
#include "fs.h"
#include "lake.h"
#include "logfile.h"
#include "mountpoint.h"
#include "util.h"

/* Options mount(8) hands every helper that mean nothing to a FUSE mount. */
static int mount8_option(const char *o)
{
	static const char *const ignored[] = { "rw",	 "ro",	     "auto",  "noauto",
					       "user",	 "nouser",   "users", "_netdev",
					       "nofail", "defaults", NULL };

	for (int i = 0; ignored[i]; i++)
		if (!strcmp(o, ignored[i]))
			return 1;
	return !strncmp(o, "x-", 2);
}

/* Mount-point checks the mount command makes itself (see mountpoint.h). */
struct mount_flags {
	int force;    /* --force: clean up a dead mount first */
	int nonempty; /* -o nonempty: mount over files */
};

/* The control file's limits, from the mount options (0: the defaults). */
static struct tfs_ctlfile_config ctl_limits;

/* -o NAME=VAL, a whole number from lo to hi, into *n; else a message and -EINVAL. */
static int opt_count(const char *name, const char *val, long lo, long hi, long *n)
{
	char *end;

	*n = strtol(val, &end, 10);
	if (end == val || *end || *n < lo || *n > hi) {
		tfs_err("-o %s=%s: expected %ld..%ld", name, val, lo, hi);
		return -EINVAL;
	}
	return 0;
}

static int parse_mount_opts(char *list, struct tfs_fs_config *cfg, struct tfs_lake_config *lc,
			    struct tfs_buf *fuse_opts, struct mount_flags *mf)
{
	char *save, *o;

	for (o = strtok_r(list, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		char *val = strchr(o, '=');

		if (val)
			*val++ = 0;
		if (!strcmp(o, "cache_mem") && val) {
			if (tfs_parse_size(val, &lc->cache_mem)) {
				tfs_err("-o cache_mem=%s: expected a size like 512M", val);
				return -EINVAL;
			}
		} else if (!strcmp(o, "view_mem") && val) {
			if (tfs_parse_size(val, &lc->view_mem) || !lc->view_mem) {
				tfs_err("-o view_mem=%s: expected a size like 256M", val);
				return -EINVAL;
			}
		} else if (!strcmp(o, "ref_ttl") && val) {
			char *end;

			cfg->ref_ttl = strtod(val, &end);
			if (*end || cfg->ref_ttl < 0) {
				tfs_err("-o ref_ttl=%s: expected seconds", val);
				return -EINVAL;
			}
		} else if (!strcmp(o, "log") && val) {
			cfg->log_path = val;
		} else if (!strcmp(o, "cache_dir") && val) {
			lc->cache_dir = val;
		} else if ((!strcmp(o, "staging_sessions") || !strcmp(o, "staging_streams")) &&
			   val) {
			long n;

			if (opt_count(o, val, 1, 1000000, &n))
				return -EINVAL;
			if (!strcmp(o, "staging_sessions"))
				ctl_limits.max_sessions = (unsigned)n;
			else
				ctl_limits.max_streams = (unsigned)n;
		} else if (!strcmp(o, "staging_mem") && val) {
			if (tfs_parse_size(val, &ctl_limits.max_staging) ||
			    !ctl_limits.max_staging) {
				tfs_err("-o staging_mem=%s: expected a size like 16G", val);
				return -EINVAL;
			}
		} else if (!strcmp(o, "staging_keep") && val) {
			if (tfs_parse_size(val, &ctl_limits.max_keep)) {
				tfs_err("-o staging_keep=%s: expected a size like 1G, or 0", val);
				return -EINVAL;
			}
			ctl_limits.keep_given = 1;
		} else if (!strcmp(o, "cache_gpu") && val) {
			if (tfs_parse_size(val, &ctl_limits.cache_gpu)) {
				tfs_err("-o cache_gpu=%s: expected a size like 40G", val);
				return -EINVAL;
			}
		} else if (!strcmp(o, "cache_gpu_headroom") && val) {
			if (tfs_parse_size(val, &ctl_limits.cache_gpu_headroom) ||
			    !ctl_limits.cache_gpu_headroom) {
				tfs_err("-o cache_gpu_headroom=%s: expected a size like 4G", val);
				return -EINVAL;
			}
		} else if (!strcmp(o, "cuda_init") && val) {
			long n;

			if (opt_count(o, val, 0, 1024, &n))
				return -EINVAL;
			ctl_limits.cuda_init = (int)n + 1;
		} else if (!strcmp(o, "cache_tier") && val) {
			lc->cache_tier = val;
		} else if (!strcmp(o, "cache_tier_queue") && val) {
			if (tfs_parse_size(val, &lc->cache_tier_queue) || !lc->cache_tier_queue) {
				tfs_err("-o cache_tier_queue=%s: expected a size like 256M", val);
				return -EINVAL;
			}
		} else if (!strcmp(o, "config") && val) {
			/* Resolved now: a daemon changes directory to /. */
			char path[PATH_MAX];

			if (!realpath(val, path) || tfs_config_set_path(path)) {
				tfs_err("-o config=%s: %s", val, strerror(errno));
				return -EINVAL;
			}
		} else if (!strcmp(o, "cache_disk") && val) {
			if (tfs_parse_size(val, &lc->cache_disk)) {
				tfs_err("-o cache_disk=%s: expected a size like 20G", val);
				return -EINVAL;
			}
		} else if (!strcmp(o, "threads") && val) {
			cfg->max_threads = (unsigned)atoi(val);
		} else if (!strcmp(o, "evict") && val) {
			if (strcmp(val, "lru") && strcmp(val, "min")) {
				tfs_err("-o evict=%s: expected lru or min", val);
				return -EINVAL;
			}
			lc->evict_min = !strcmp(val, "min");
		} else if (!strcmp(o, "epoch_warm") && val) {
			if (strcmp(val, "0") && strcmp(val, "1")) {
				tfs_err("-o epoch_warm=%s: expected 0 or 1", val);
				return -EINVAL;
			}
			lc->epoch_warm = val[0] == '1';
		} else if (!strcmp(o, "splice") && !val) {
			cfg->splice = 1;
		} else if (!strcmp(o, "readahead_kb") && val) {
			cfg->readahead_kb = (unsigned)strtoul(val, NULL, 10);
		} else if (!strcmp(o, "prefetch_threads") && val) {
			long n;

			if (opt_count(o, val, 0, 256, &n))
				return -EINVAL;
			lc->prefetch_threads = (unsigned)n;
		} else if (!strcmp(o, "gather_threads") && val) {
			long n;

			if (opt_count(o, val, 1, 256, &n))
				return -EINVAL;
			lc->gather_threads = (unsigned)n;
		} else if (!strcmp(o, "max_inflight") && val) {
			long n;

			/* [http] max_inflight for this mount: the environment override the store
			 * reads when it opens (core/config.h). */
			if (opt_count(o, val, 1, 4096, &n))
				return -EINVAL;
			if (setenv("TENSORFS_HTTP_MAX_INFLIGHT", val, 1)) {
				tfs_err("-o max_inflight=%s: %s", val, strerror(errno));
				return -EINVAL;
			}
		} else if (!strcmp(o, "debug") && !val) {
			cfg->debug = 1;
		} else if (!strcmp(o, "nonempty") && !val) {
			mf->nonempty = 1;
		} else if (mount8_option(o)) {
			continue;
		} else {
			if (fuse_opts->len)
				tfs_buf_append(fuse_opts, ",", 1);
			if (val)
				tfs_buf_printf(fuse_opts, "%s=%s", o, val);
			else
				tfs_buf_printf(fuse_opts, "%s", o);
		}
	}
	return 0;
}

/* The control file is the staging engine's (gpu/), reached through fs/'s control table. */
static int ctl_create(struct tfs_lake *lake, const char *mountpoint, void **obj)
{
	struct tfs_ctlfile_config cc = ctl_limits;

	cc.lake = lake;
	cc.mountpoint = mountpoint;
	return tfs_ctlfile_create(&cc, (struct tfs_ctlfile **)obj);
}

static void ctl_destroy(void *obj)
{
	tfs_ctlfile_destroy(obj);
}

static int ctl_open(void *obj, uid_t uid, gid_t gid, void **session)
{
	return tfs_ctlfile_session_open(obj, uid, gid, (struct tfs_ctlfile_session **)session);
}

static void ctl_close(void *session)
{
	tfs_ctlfile_session_close(session);
}

static ssize_t ctl_write(void *session, const char *buf, size_t len)
{
	return tfs_ctlfile_write(session, buf, len);
}

static ssize_t ctl_read(void *session, char *buf, size_t len)
{
	return tfs_ctlfile_read(session, buf, len);
}

static int ctl_ioctl(void *session, unsigned cmd, const void *in, size_t in_len, void *out,
		     size_t out_len)
{
	return tfs_ctlfile_ioctl(session, cmd, in, in_len, out, out_len);
}

static int ctl_stats(void *obj, struct tfs_buf *out)
{
	return tfs_ctlfile_stats_json(obj, out);
}

static int ctl_metrics(void *obj, struct tfs_buf *out)
{
	return tfs_ctlfile_metrics(obj, out);
}

static const struct tfs_fs_control staging_control = {
	.create = ctl_create,
	.destroy = ctl_destroy,
	.open = ctl_open,
	.close = ctl_close,
	.write = ctl_write,
	.read = ctl_read,
	.ioctl = ctl_ioctl,
	.stats_json = ctl_stats,
	.metrics = ctl_metrics,
};

/* Option strings are parsed in place (and the config keeps pointers into them): parse copies,
 * so the command line the daemon shows in ps stays as it was typed. */
struct kept {
	char **s;
	int n;
};

static char *keep_opt(struct kept *k, const char *opt)
{
	char **v = realloc(k->s, (size_t)(k->n + 1) * sizeof(*v));
	char *copy = strdup(opt);

	if (!v || !copy) {
		free(copy);
		if (v)
			k->s = v;
		tfs_err("out of memory");
		exit(1);
	}
	k->s = v;
	k->s[k->n++] = copy;
	return copy;
}

/* Chunk loads from a local lake are CPU work (one loader per CPU); from a remote one they wait on
 * the network: with a round trip of tens of milliseconds, and TCP's slow start on every new
 * connection, a stream of 4 MiB chunks needs many requests in flight to fill the link. So three
 * loaders for every four connections the HTTP pool allows ([http] max_inflight): the last quarter
 * stays free for chunks a reader waits on (another file, a random read), which would otherwise
 * queue behind read-ahead. The ahead budget (half the cache) still bounds what loaders hold. */
static unsigned default_prefetch_threads(const char *lake_url)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = (unsigned)(ncpu > 0 ? ncpu : 1), loaders;
	struct tfs_config_http http;

	if (lake_url[0] == '/' || !strncmp(lake_url, "file://", 7))
		return n;
	/* A bad [http] section is reported when the store opens; 8 until then. */
	if (tfs_config_http(&http))
		return n > 8 ? n : 8;
	loaders = http.max_inflight - http.max_inflight / 4;
	return n > loaders ? n : loaders;
}

int tfs_cmd_mount(int argc, char **argv)
{
	struct tfs_fs_config cfg = {
		.control = &staging_control,
		.ref_ttl = TFS_FS_DEFAULT_REF_TTL,
		.readahead_kb = TFS_FS_DEFAULT_READAHEAD_KB,
	};
	struct tfs_lake_config lc = {
		.cache_mem = TFS_FS_DEFAULT_CACHE_MEM,
		.cache_disk = TFS_FS_DEFAULT_CACHE_DISK,
		.prefetch_threads = UINT_MAX, /* not given: chosen by the lake's scheme */
		.evict_min = 1,		      /* -o evict=lru for the cache without plans */
	};
	struct kept kept = { 0 };
	struct tfs_buf fuse_opts = { 0 };
	struct mount_flags mf = { 0 };
	char *pos[2], mnt[PATH_MAX], logpath[PATH_MAX];
	int npos = 0, rc = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-f")) {
			cfg.foreground = 1;
		} else if (!strcmp(argv[i], "-d")) {
			cfg.foreground = 1;
			cfg.debug = 1;
		} else if (!strcmp(argv[i], "--force")) {
			mf.force = 1;
		} else if (!strcmp(argv[i], "-n") || !strcmp(argv[i], "-s") ||
			   !strcmp(argv[i], "-v")) {
			/* mount(8)'s no-mtab, sloppy and verbose flags to its helpers: nothing to
			 * do */
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			if (parse_mount_opts(keep_opt(&kept, argv[++i]), &cfg, &lc, &fuse_opts,
					     &mf))
				goto out;
		} else if (!strncmp(argv[i], "-o", 2) && argv[i][2]) {
			if (parse_mount_opts(keep_opt(&kept, argv[i] + 2), &cfg, &lc, &fuse_opts,
					     &mf))
				goto out;
		} else if (argv[i][0] == '-' || npos == 2) {
			rc = tfs_cli_usage(2);
			goto out;
		} else {
			pos[npos++] = argv[i];
		}
	}
	if (npos != 2) {
		rc = tfs_cli_usage(2);
		goto out;
	}
	/* A daemon changes directory to /: make paths absolute first. */
	if (tfs_mountpoint_prepare(pos[1], mf.force, mf.nonempty, mnt))
		goto out;
	if (cfg.log_path) {
		if (cfg.log_path[0] != '/' && getcwd(logpath, sizeof(logpath) - 1) &&
		    strlen(logpath) + strlen(cfg.log_path) + 2 < sizeof(logpath)) {
			strcat(logpath, "/");
			strcat(logpath, cfg.log_path);
			cfg.log_path = logpath;
		}
		if (tfs_log_open(cfg.log_path)) {
			tfs_err("-o log=%s: cannot open: %s", cfg.log_path, strerror(errno));
			goto out;
		}
	}
	if (lc.cache_dir && lc.cache_dir[0] != '/') {
		static char dirpath[PATH_MAX];

		if (!getcwd(dirpath, sizeof(dirpath) - 1) ||
		    strlen(dirpath) + strlen(lc.cache_dir) + 2 >= sizeof(dirpath)) {
			tfs_err("-o cache_dir=%s: path too long", lc.cache_dir);
			goto out;
		}
		strcat(dirpath, "/");
		strcat(dirpath, lc.cache_dir);
		lc.cache_dir = dirpath;
	}
	if (!cfg.foreground && !cfg.log_path) {
		int fb = tfs_logfile_fallback(mnt, logpath, sizeof(logpath));

		if (fb == 0 && tfs_log_open(logpath) == 0) {
			cfg.log_path = logpath;
			fprintf(stderr,
				"tensorfs: no syslog here (/dev/log); the daemon logs to %s\n",
				logpath);
		} else if (fb < 0) {
			tfs_warn("no syslog here, and no file for the log: %s; the daemon's log is "
				 "lost "
				 "(give -o log=FILE)",
				 strerror(-fb));
		}
	}
	/* Until the daemon detaches (its stderr is /dev/null then), the terminal sees errors. */
	tfs_log_errors_to_stderr(1);
	cfg.lake_url = lc.url = pos[0];
	lc.ref_ttl = cfg.ref_ttl;
	cfg.mountpoint = mnt;
	cfg.fuse_opts = fuse_opts.len ? (const char *)fuse_opts.data : NULL;
	if (lc.prefetch_threads == UINT_MAX)
		lc.prefetch_threads = default_prefetch_threads(lc.url);
	/* The engine: opened here (before the daemon forks), started by fs/ once it has. */
	if (tfs_lake_open(&lc, &cfg.lake))
		goto out;
	rc = tfs_fs_main(&cfg);
	tfs_lake_close(cfg.lake);
out:
	for (int i = 0; i < kept.n; i++)
		free(kept.s[i]);
	free(kept.s);
	tfs_buf_free(&fuse_opts);
	return rc;
}
