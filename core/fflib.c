/* SPDX-License-Identifier: MIT */
/* fflib: FFmpeg's libraries opened with dlopen on first use, each function found with dlsym. */
#include "fflib.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "util.h"

#define STR_(x) #x
#define STR(x) STR_(x)

/* The libraries, named as TFS_FF_FUNCS names them, in the order of their dependencies. */
enum { avutil, swresample, swscale, avcodec, avformat, NLIBS };

static const char *const sonames[NLIBS] = {
	[avutil] = "libavutil.so." STR(LIBAVUTIL_VERSION_MAJOR),
	[swresample] = "libswresample.so." STR(LIBSWRESAMPLE_VERSION_MAJOR),
	[swscale] = "libswscale.so." STR(LIBSWSCALE_VERSION_MAJOR),
	[avcodec] = "libavcodec.so." STR(LIBAVCODEC_VERSION_MAJOR),
	[avformat] = "libavformat.so." STR(LIBAVFORMAT_VERSION_MAJOR),
};

struct tfs_fflib tfs_ff;

static struct {
	int rc;
	char why[512];
} loaded;

static void load(void)
{
	void *h[NLIBS];

	for (size_t i = 0; i < NLIBS; i++) {
		/* Never closed: the functions stay in tfs_ff for the process's life. */
		h[i] = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
		if (!h[i]) {
			snprintf(loaded.why, sizeof(loaded.why), "%s", dlerror());
			goto fail;
		}
	}
#define TFS_FF_FIND(lib, fn)                                                                 \
	*(void **)&tfs_ff.fn = dlsym(h[lib], #fn);                                           \
	if (!tfs_ff.fn) {                                                                    \
		snprintf(loaded.why, sizeof(loaded.why), "%s has no %s", sonames[lib], #fn); \
		goto fail;                                                                   \
	}
	TFS_FF_FUNCS(TFS_FF_FIND)
#undef TFS_FF_FIND
	tfs_ff.av_log_set_level(AV_LOG_QUIET);
	return;
fail:
	loaded.rc = -ELIBACC;
	tfs_err("video and audio are decoded with FFmpeg's libraries, which cannot be loaded: %s",
		loaded.why);
}

int tfs_fflib_load(char *err, size_t err_cap)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, load);
	if (loaded.rc)
		snprintf(err, err_cap, "FFmpeg's libraries cannot be loaded: %s", loaded.why);
	return loaded.rc;
}
