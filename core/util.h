/* SPDX-License-Identifier: MIT */
/* util: growable buffers, logging, size parsing and name rules shared by every module. */
#ifndef TFS_UTIL_H
#define TFS_UTIL_H

#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A growable byte buffer. Zero-initialise, then tfs_buf_free() when done. */
struct tfs_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

/* An array p of *cap elements of size bytes with room for need (at least 1): p itself when they
 * fit, else p reallocated to twice its capacity (16 at first) until they do, *cap updated. NULL
 * when out of memory or past SIZE_MAX bytes: p and *cap are then as they were (p still the
 * caller's to free). */
void *tfs_grow(void *p, size_t *cap, size_t need, size_t size);
/* tfs_grow on the array lvalue p: 0 with p grown, or -ENOMEM with p as it was. */
#define TFS_GROW(p, cap, need)                                                         \
	__extension__({                                                                \
		__typeof__(p) tfs_grown_ = tfs_grow((p), (cap), (need), sizeof(*(p))); \
		tfs_grown_ ? ((p) = tfs_grown_, 0) : -ENOMEM;                          \
	})

/* Make room for at least `extra` more bytes after len. Returns 0 or -ENOMEM. */
int tfs_buf_reserve(struct tfs_buf *b, size_t extra);
int tfs_buf_append(struct tfs_buf *b, const void *p, size_t n);
/* printf-style append; the buffer stays NUL-terminated (the NUL is not counted in len). */
int tfs_buf_printf(struct tfs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hand the data over to the caller (who frees it) and reset the buffer. */
uint8_t *tfs_buf_take(struct tfs_buf *b, size_t *len);
void tfs_buf_free(struct tfs_buf *b);

enum tfs_log_level { TFS_LOG_ERROR = 0, TFS_LOG_WARN = 1, TFS_LOG_INFO = 2, TFS_LOG_DEBUG = 3 };

/* Log sink: stderr by default. tfs_log_open() appends to a file instead; with use_syslog the
 * daemon logs to syslog. Safe to call from any thread. */
int tfs_log_open(const char *path);
void tfs_log_use_syslog(int on);
/* With on, errors logged to a file or syslog also go to stderr: a command that has not become a
 * daemon yet tells the user why it fails, not only where the log is. */
void tfs_log_errors_to_stderr(int on);
void tfs_log_set_level(enum tfs_log_level lvl);
void tfs_log(enum tfs_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define tfs_err(...) tfs_log(TFS_LOG_ERROR, __VA_ARGS__)
#define tfs_warn(...) tfs_log(TFS_LOG_WARN, __VA_ARGS__)
#define tfs_info(...) tfs_log(TFS_LOG_INFO, __VA_ARGS__)
#define tfs_debug(...) tfs_log(TFS_LOG_DEBUG, __VA_ARGS__)

/* Parse "123", "4k", "8M", "1G", "2GiB" (powers of 1024). Returns 0 or -EINVAL. */
int tfs_parse_size(const char *s, uint64_t *out);
/* The reverse, for people: bytes in binary units with one decimal ("12.3 MiB", "512 B") into
 * buf; returns buf. */
const char *tfs_size_str(double bytes, char *buf, size_t cap);

/* The value of hex digit c (0-9, a-f, A-F), or -1. */
int tfs_hex_digit(int c);

/* Decode the %XX escapes of s[0..n) into dst (room for n + 1 bytes; NUL-terminated); a '%' not
 * followed by two hex digits stays as it is. Returns the decoded length. */
size_t tfs_percent_decode(const char *s, size_t n, char *dst);

/* Names of datasets, columns and refs: 1..128 chars of [A-Za-z0-9_.-], not starting with '.'
 * or '-'. They become file names in the mount, so nothing else is allowed. */
int tfs_name_valid(const char *name);
/* Open directory path relative to dirfd for readdir (closedir closes its descriptor). */
int tfs_opendirat(int dirfd, const char *path, DIR **out);
/* Whether the n bytes at p are well-formed UTF-8 (no overlong forms, surrogates or code points
 * past U+10FFFF). */
int tfs_utf8_valid(const void *p, size_t n);
/* Whether the n bytes at p are all lowercase hex digits. */
int tfs_is_lower_hex(const char *p, size_t n);

/* Read exactly n bytes at off (retries on EINTR/short reads). Returns 0, -EIO on EOF, or -errno. */
int tfs_pread_full(int fd, void *buf, size_t n, uint64_t off);
/* Write exactly n bytes at off (retries on EINTR/short writes). Returns 0 or -errno. */
int tfs_pwrite_full(int fd, const void *buf, size_t n, uint64_t off);
int tfs_write_full(int fd, const void *buf, size_t n);
/* Read the whole regular file open as fd into out (reset first; NUL-terminated). -EISDIR for
 * anything but a regular file, -EIO when it is shorter than fstat said, or -errno. */
int tfs_read_fd(int fd, struct tfs_buf *out);

/* Format seconds since the epoch as UTC with strftime's fmt. A time gmtime cannot represent
 * (a damaged commit may hold any number) is written as "@<seconds>" instead. */
void tfs_format_utc(int64_t seconds, const char *fmt, char *out, size_t cap);

/* Monotonic clock in nanoseconds. */
uint64_t tfs_now_ns(void);
/* A condition variable whose timed waits run on tfs_now_ns's clock (a wall-clock step neither
 * shortens nor stretches them). */
void tfs_cond_init_monotonic(pthread_cond_t *c);
/* Wait on c (m held, as pthread_cond_wait) until tfs_now_ns() reaches at_ns, a signal, or a
 * spurious wake-up. c from tfs_cond_init_monotonic. */
void tfs_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, uint64_t at_ns);

/* Overflow-checked multiply: returns 0 and stores a*b, or -EOVERFLOW. */
static inline int tfs_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	if (__builtin_mul_overflow(a, b, out))
		return -75; /* EOVERFLOW; avoid <errno.h> in every includer */
	return 0;
}

/* Progress of long work (import, verify, gc), for a progress line: the worker adds with
 * tfs_progress_add from any thread; a watcher loads the fields with __atomic_load_n. */
struct tfs_progress {
	uint64_t done;	      /* bytes done */
	uint64_t total;	      /* bytes in all; 0: not known */
	uint64_t items;	      /* rows or objects done */
	uint64_t total_items; /* 0: not known */
};

static inline void tfs_progress_add(struct tfs_progress *p, uint64_t bytes, uint64_t items)
{
	if (!p)
		return;
	__atomic_add_fetch(&p->done, bytes, __ATOMIC_RELAXED);
	__atomic_add_fetch(&p->items, items, __ATOMIC_RELAXED);
}

/* The topmost mount at path (absolute, symlinks resolved), from /proc/self/mountinfo, with its
 * escapes undone. Returns 1 when path is a mount point, 0 when not. */
struct tfs_mountinfo {
	char dev[32];	   /* "major:minor" */
	char fstype[64];   /* "fuse.tensorfs" */
	char source[4096]; /* the lake URL for a tensorfs mount */
};
int tfs_mountinfo_find(const char *path, struct tfs_mountinfo *out);

#endif
