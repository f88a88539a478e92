/* SPDX-License-Identifier: MIT */
/* Fuzz target for video and audio decoding from memory (core/media.c over FFmpeg's libraries,
 * through its AVIOContext over given bytes: how an importer decodes a file it fetched ahead).
 * The first byte picks video or audio and the name the demuxer's probe is given; the rest is
 * the file. */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <libavutil/version.h>

#include "fuzz_common.h"
#include "media.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

#define STR_(x) #x
#define STR(x) STR_(x)

/* FFmpeg's own allocations are capped the way ASan caps the others (fuzz_common.h), and lower:
 * a decoder keeps several frames of the size a header claims, and the run's RSS limit is for
 * all of them together. */
static void cap_ffmpeg_allocations(void)
{
	static int done;
	void *h;
	void (*max_alloc)(size_t);

	if (done)
		return;
	done = 1;
	h = dlopen("libavutil.so." STR(LIBAVUTIL_VERSION_MAJOR), RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		return;
	*(void **)&max_alloc = dlsym(h, "av_max_alloc");
	if (max_alloc)
		max_alloc(32u << 20);
	dlclose(h);
}

static const char *const names[8] = { "f.mp4", "f.wav", "f.mkv", "f.webm",
				      "f.avi", "f.mp3", "f.ogg", "f.flac" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct tfs_buf file;
	char err[256] = "";
	int rc;

	if (len < 1)
		return 0;
	file = (struct tfs_buf){ .data = (uint8_t *)data + 1, .len = len - 1, .cap = len - 1 };
	if (!(data[0] & 1)) {
		const struct tfs_video_opts o = { .w = 8, .h = 6, .fit = TFS_FIT_CROP, .fps = 4 };
		struct tfs_video v = { 0 };

		rc = tfs_video_decode(names[(data[0] >> 1) & 7], &file, &o, &v, err, sizeof(err));
		cap_ffmpeg_allocations(); /* loaded by the first decode */
		FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ELIBACC || rc == -ENOMEM);
		FUZZ_CHECK(memchr(err, 0, sizeof(err)) != NULL);
		if (rc) {
			FUZZ_CHECK(err[0] != 0); /* a refusal says why */
			return 0;
		}
		FUZZ_CHECK(v.n > 0 && v.w == 8 && v.h == 6 && v.px && v.t);
		{
			unsigned sum = 0;

			for (size_t i = 0; i < v.n * 8 * 6 * 3; i++) /* every frame is there */
				sum += v.px[i];
			(void)sum;
		}
		for (uint64_t i = 1; i < v.n; i++)
			FUZZ_CHECK(v.t[i] >= v.t[i - 1]);
		tfs_video_free(&v);
	} else {
		const struct tfs_audio_opts o = { .rate = 8000, .mono = 1 };
		struct tfs_audio a = { 0 };

		rc = tfs_audio_decode(names[(data[0] >> 1) & 7], &file, &o, &a, err, sizeof(err));
		cap_ffmpeg_allocations();
		FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ELIBACC || rc == -ENOMEM);
		FUZZ_CHECK(memchr(err, 0, sizeof(err)) != NULL);
		if (rc) {
			FUZZ_CHECK(err[0] != 0);
			return 0;
		}
		FUZZ_CHECK(a.n > 0 && a.rate == 8000 && a.channels == 1 && a.s);
		{
			float sum = 0;

			for (size_t i = 0; i < a.n; i++) /* every sample is there */
				sum += fabsf(a.s[i]);
			(void)sum;
		}
		tfs_audio_free(&a);
	}
	return 0;
}
