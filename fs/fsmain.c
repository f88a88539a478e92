/* SPDX-License-Identifier: MIT */
/* fsmain: the FUSE session: mount, daemonise, start the lake and the control file, serve with
 * fuseops.c's handlers until unmounted, then free what the kernel left open. */
#include "fsnode.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

/* Become a daemon as fuse_daemonize does (fork, setsid, cd /, stdio on /dev/null), except that
 * the parent, the command the user ran, exits only when the daemon says how its start went:
 * 0 once it serves (the lake started, the control file set up, stale slot files removed), 1 when
 * it failed or died first. Returns the pipe to report on (-1 on a failed fork). */
static int daemon_start(void)
{
	int pipefd[2], nullfd;
	pid_t pid;

	if (pipe(pipefd))
		return -1;
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return -1;
	}
	if (pid > 0) {
		char status = 1;

		close(pipefd[1]);
		while (read(pipefd[0], &status, 1) < 0 && errno == EINTR)
			;
		_exit(status ? 1 : 0); /* EOF (the daemon died) leaves status 1 */
	}
	close(pipefd[0]);
	if (setsid() < 0) {
		close(pipefd[1]);
		return -1;
	}
	if (chdir("/")) {
		/* The mount point is absolute; nothing depends on the working directory. */
	}
	nullfd = open("/dev/null", O_RDWR);
	if (nullfd >= 0) {
		dup2(nullfd, 0);
		dup2(nullfd, 1);
		dup2(nullfd, 2);
		if (nullfd > 2)
			close(nullfd);
	}
	return pipefd[1];
}

/* Tell the command that started the daemon how the start went, once. */
static void daemon_ready(int *fd, int ok)
{
	char status = ok ? 0 : 1;

	if (*fd < 0)
		return;
	if (write(*fd, &status, 1) != 1) {
		/* The command is gone (killed): there is nobody to tell. */
	}
	close(*fd);
	*fd = -1;
}

static void fs_free(struct tfs_fs *fs)
{
	/* What the kernel never released: control sessions first, while their staging lives. */
	while (fs->open_files.next && fs->open_files.next != &fs->open_files) {
		struct tfs_fs_handle *h = (struct tfs_fs_handle *)fs->open_files.next;

		tfs_fs_link_del(fs, &h->link);
		tfs_fs_handle_free(fs, h);
	}
	while (fs->open_dirs.next && fs->open_dirs.next != &fs->open_dirs) {
		struct tfs_fs_dir *d = (struct tfs_fs_dir *)fs->open_dirs.next;

		tfs_fs_link_del(fs, &d->link);
		tfs_fs_dir_free(d);
	}
	/* Staging rings hold versions and read through the cache. */
	if (fs->ctl)
		fs->cfg->control->destroy(fs->ctl);
	tfs_fs_mixviews_free(fs);
	/* Loaders reference versions and the cache: stop them first, without letting them wait out
	 * retries against a remote store (the unmount already happened). */
	tfs_lake_stop(fs->lake);
	tfs_fs_nodes_free(fs);
	tfs_fs_stats_destroy(fs->stats);
	pthread_mutex_destroy(&fs->lock);
}

static void log_stats(struct tfs_fs *fs)
{
	struct tfs_buf b = { 0 };

	if (tfs_fs_stats_text(fs, &b))
		return;
	/* One line: the JSON of .tensorfs/stats without its newlines. */
	for (size_t i = 0; i < b.len; i++)
		if (b.data[i] == '\n')
			b.data[i] = ' ';
	tfs_info("stats at exit: %s", (char *)b.data);
	tfs_buf_free(&b);
}

/* The kernel reads ahead at most the mount's bdi read_ahead_kb (128 by default for FUSE),
 * whatever max_readahead says. Raise it when we may (root); found through mountinfo, since a
 * stat of the mount point would wait for the INIT we have not answered yet. */
static void set_readahead(const char *mountpoint, unsigned kb)
{
	struct tfs_mountinfo mi;
	char path[128];
	FILE *f;

	if (!tfs_mountinfo_find(mountpoint, &mi) || !mi.dev[0])
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", mi.dev);
	f = fopen(path, "we");
	if (!f) {
		tfs_debug("cannot set %s: %s", path, strerror(errno));
		return;
	}
	fprintf(f, "%u\n", kb);
	if (fclose(f))
		tfs_debug("cannot set %s: %s", path, strerror(errno));
}

/* Whether a comma-separated option list holds opt. */
static int has_option(const char *list, const char *opt)
{
	const size_t n = strlen(opt);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, opt, n) && (p[n] == ',' || !p[n]))
			return 1;
	return 0;
}

/* When the session ends (unmount), requests still running may be waiting on chunk loads that
 * wait on a remote store: cancel its requests so that they, and the loop, end now rather than
 * after the store's retries. */
struct exit_watch {
	struct fuse_session *se;
	struct tfs_store *store;
	int done; /* atomic: the loop returned */
};

static void *watch_exit(void *arg)
{
	struct exit_watch *w = arg;
	const struct timespec tick = { 0, 100 * 1000 * 1000 };

	while (!__atomic_load_n(&w->done, __ATOMIC_ACQUIRE)) {
		if (fuse_session_exited(w->se)) {
			tfs_store_cancel(w->store);
			break;
		}
		nanosleep(&tick, NULL);
	}
	return NULL;
}

int tfs_fs_main(const struct tfs_fs_config *cfg)
{
	struct exit_watch watch = { 0 };
	pthread_t watcher;
	int watching = 0, loop_rc;
	struct tfs_fs fs = { .cfg = cfg, .lake = cfg->lake };
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se = NULL;
	struct fuse_loop_config *loop = NULL;
	char opts[4096];
	int rc = 1, mounted = 0, handlers = 0, ready_fd = -1;

	/* Chunk buffers are MiB-sized and short-lived. With glibc's adaptive threshold they would
	 * come from per-thread heaps that keep freed memory; mapped, they go back to the system
	 * when freed and the daemon's RSS follows the cache budget. */
	mallopt(M_MMAP_THRESHOLD, 256 << 10);
	pthread_mutex_init(&fs.lock, NULL);
	fs.open_files.next = fs.open_files.prev = &fs.open_files;
	fs.open_dirs.next = fs.open_dirs.prev = &fs.open_dirs;
	fs.uid = getuid();
	fs.allow_other = has_option(cfg->fuse_opts, "allow_other");
	fs.gid = getgid();
	fs.started = time(NULL);
	fs.started_ns = tfs_now_ns();
	if (tfs_fs_nodes_init(&fs) || tfs_fs_stats_create(&fs.stats) || tfs_fs_mixviews_init(&fs)) {
		tfs_err("out of memory");
		goto out;
	}
	/* fsname shows the lake in mount(8) and df; commas would split the option list. */
	snprintf(opts, sizeof(opts), "default_permissions,fsname=%s,subtype=tensorfs%s%s",
		 strchr(cfg->lake_url, ',') ? "tensorfs" : cfg->lake_url, cfg->fuse_opts ? "," : "",
		 cfg->fuse_opts ? cfg->fuse_opts : "");
	if (fuse_opt_add_arg(&args, "tensorfs") || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, opts) || (cfg->debug && fuse_opt_add_arg(&args, "-d"))) {
		tfs_err("out of memory");
		goto out;
	}
	se = fuse_session_new(&args, &tfs_fs_fuse_ops, sizeof(tfs_fs_fuse_ops), &fs);
	if (!se) {
		tfs_err("cannot set up the FUSE session (bad mount options: %s?)", opts);
		goto out;
	}
	if (fuse_set_signal_handlers(se)) {
		tfs_err("cannot install signal handlers");
		goto out;
	}
	handlers = 1;
	if (fuse_session_mount(se, cfg->mountpoint)) {
		tfs_err("cannot mount %s on %s (see the message above)", cfg->lake_url,
			cfg->mountpoint);
		goto out;
	}
	mounted = 1;
	if (cfg->readahead_kb)
		set_readahead(cfg->mountpoint, cfg->readahead_kb);
	if (!cfg->foreground) {
		if (!cfg->log_path)
			tfs_log_use_syslog(1);
		ready_fd = daemon_start();
		if (ready_fd < 0) {
			tfs_err("cannot become a daemon: %s", strerror(errno));
			goto out;
		}
	}
	tfs_info("mounted %s on %s", cfg->lake_url, cfg->mountpoint);
	/* After the fork: it would not carry the loader threads along. */
	if (tfs_lake_start(fs.lake))
		goto out;
	/* After the fork: slot files are named after the daemon's pid. */
	if (cfg->control && cfg->control->create(fs.lake, cfg->mountpoint, &fs.ctl)) {
		tfs_err("cannot set up the control file");
		goto out;
	}
	loop = fuse_loop_cfg_create();
	if (!loop) {
		tfs_err("out of memory");
		goto out;
	}
	fuse_loop_cfg_set_clone_fd(loop, 1);
	fuse_loop_cfg_set_max_threads(loop, cfg->max_threads ? cfg->max_threads : 16);
	watch.se = se;
	watch.store = tfs_lake_store(fs.lake);
	watching = !pthread_create(&watcher, NULL, watch_exit, &watch);
	daemon_ready(&ready_fd, 1);
	loop_rc = fuse_session_loop_mt(se, loop);
	/* libfuse reports the signal that ended the loop; stopping on SIGTERM/INT/HUP is a clean
	 * shutdown, not a failure. */
	rc = loop_rc == 0 || loop_rc == SIGTERM || loop_rc == SIGINT || loop_rc == SIGHUP ? 0 : 1;
	if (watching) {
		__atomic_store_n(&watch.done, 1, __ATOMIC_RELEASE);
		pthread_join(watcher, NULL);
	}
	log_stats(&fs);
	tfs_info("unmounted %s", cfg->mountpoint);
out:
	daemon_ready(&ready_fd, 0);
	if (loop)
		fuse_loop_cfg_destroy(loop);
	if (mounted)
		fuse_session_unmount(se);
	if (handlers)
		fuse_remove_signal_handlers(se);
	if (se)
		fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	fs_free(&fs);
	return rc;
}
