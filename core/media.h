/* SPDX-License-Identifier: MIT */
/* media: video and audio decoded with FFmpeg's libraries (libavformat, libavcodec, libswscale,
 * libswresample, from Debian, loaded on first use): a video's frames as RGB24, sampled by
 * presentation time, sized as images are (image.h's fits); an audio stream as float32 samples,
 * resampled. */
#ifndef TFS_MEDIA_H
#define TFS_MEDIA_H

#include <stddef.h>
#include <stdint.h>

#include "image.h"
#include "spool.h"
#include "util.h"

struct tfs_video_opts {
	uint32_t w, h;		/* 0: the video's own size */
	enum tfs_image_fit fit; /* with w: resize (swscale bilinear), crop or pad */
	double fps;		/* frames a second by presentation time (ffmpeg's fps filter); 0:
				   every frame */
};

/* What a decoded file's samples are held in: memory up to this, a spool file (spool.h) past it,
 * so that a long video or recording does not have to fit in memory while it is imported. */
#define TFS_MEDIA_HOLD (16u << 20)

struct tfs_video {
	uint32_t w, h;
	uint64_t n;	       /* frames */
	const uint8_t *px;     /* n x h x w x 3: in held */
	double *t;	       /* each frame's time from the first, in seconds */
	double fps;	       /* the rate asked for, or the stream's average */
	struct tfs_spool held; /* tfs_spool_done(&held, p): the frames before p were read */
};

/* Decode path's best video stream. path may be a URL (source.h): its object is fetched, its
 * last parts first (an mp4's index may be at its end), and demuxed as it arrives. Or its bytes
 * were read already (file; NULL: not), and path only names it (a raw stream's extension tells
 * the demuxer's probe what it is). -EINVAL with
 * the reason in err: the file is to blame (not a video, an unknown codec, damaged or cut short,
 * a frame the decoder refuses, no frame at all, too many). -ELIBACC when FFmpeg's libraries
 * cannot be loaded (fflib.h), for every file alike. Another -errno, the reason in err, when
 * reading or holding it failed, not the file: its fetch, no room for its frames, memory. */
int tfs_video_decode(const char *path, const struct tfs_buf *file, const struct tfs_video_opts *o,
		     struct tfs_video *out, char *err, size_t err_cap);
void tfs_video_free(struct tfs_video *v);

struct tfs_audio_opts {
	uint32_t rate; /* 0: the stream's */
	int mono;
};

struct tfs_audio {
	uint32_t rate, channels;
	uint64_t n;	       /* samples (frames of channels values) */
	const float *s;	       /* n x channels, interleaved: in held */
	struct tfs_spool held; /* as tfs_video's */
};

/* Decode path's best audio stream; errors as tfs_video_decode's. */
int tfs_audio_decode(const char *path, const struct tfs_buf *file, const struct tfs_audio_opts *o,
		     struct tfs_audio *out, char *err, size_t err_cap);
void tfs_audio_free(struct tfs_audio *a);

#endif
