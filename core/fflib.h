/* SPDX-License-Identifier: MIT */
/* fflib: FFmpeg's libraries (libavformat, libavcodec, libswscale, libswresample, libavutil, from
 * Debian) opened when media is first decoded, not when the program starts. With their own
 * dependencies they are about 130 shared objects, which the dynamic loader took 30 ms of every
 * start to map and relocate (every command, the daemon, an import of images) for the few
 * commands that decode video or audio. media.c calls FFmpeg through the table below, so the
 * program has no link-time dependency on them: a function used without its entry here fails to
 * link. */
#ifndef TFS_FFLIB_H
#define TFS_FFLIB_H

#include <stddef.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/display.h>
#include <libavutil/pixdesc.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>

/* FFmpeg 6.1 moved a stream's side data into its codec parameters (1), from the stream (0). */
#define TFS_FF_CODECPAR_SIDE_DATA (LIBAVCODEC_VERSION_INT >= AV_VERSION_INT(60, 31, 100))
#if TFS_FF_CODECPAR_SIDE_DATA
#define TFS_FF_SIDE_DATA(X) X(avcodec, av_packet_side_data_get)
#else
#define TFS_FF_SIDE_DATA(X) X(avformat, av_stream_get_side_data)
#endif

/* Every FFmpeg function media.c calls, with the library it is in. */
#define TFS_FF_FUNCS(X)                           \
	X(avutil, av_channel_layout_copy)         \
	X(avutil, av_channel_layout_default)      \
	X(avutil, av_channel_layout_uninit)       \
	X(avutil, av_d2q)                         \
	X(avutil, av_display_rotation_get)        \
	X(avutil, av_frame_alloc)                 \
	X(avutil, av_frame_free)                  \
	X(avutil, av_frame_get_buffer)            \
	X(avutil, av_frame_unref)                 \
	X(avutil, av_free)                        \
	X(avutil, av_log_set_level)               \
	X(avutil, av_malloc)                      \
	X(avutil, av_pix_fmt_desc_get)            \
	X(avutil, av_rescale_q)                   \
	X(avutil, av_rescale_q_rnd)               \
	X(avutil, av_strerror)                    \
	X(swresample, swr_alloc_set_opts2)        \
	X(swresample, swr_convert)                \
	X(swresample, swr_free)                   \
	X(swresample, swr_get_out_samples)        \
	X(swresample, swr_init)                   \
	X(swscale, sws_freeContext)               \
	X(swscale, sws_getCachedContext)          \
	X(swscale, sws_scale)                     \
	X(avcodec, av_packet_alloc)               \
	X(avcodec, av_packet_free)                \
	X(avcodec, av_packet_unref)               \
	X(avcodec, avcodec_alloc_context3)        \
	X(avcodec, avcodec_free_context)          \
	X(avcodec, avcodec_open2)                 \
	X(avcodec, avcodec_parameters_to_context) \
	X(avcodec, avcodec_receive_frame)         \
	X(avcodec, avcodec_send_packet)           \
	X(avformat, av_find_best_stream)          \
	X(avformat, av_read_frame)                \
	X(avformat, avformat_alloc_context)       \
	X(avformat, avformat_close_input)         \
	X(avformat, avformat_find_stream_info)    \
	X(avformat, avformat_open_input)          \
	X(avformat, avio_alloc_context)           \
	X(avformat, avio_context_free)            \
	TFS_FF_SIDE_DATA(X)

struct tfs_fflib {
#define TFS_FF_MEMBER(lib, fn) __typeof__(fn) *fn;
	TFS_FF_FUNCS(TFS_FF_MEMBER)
#undef TFS_FF_MEMBER
};

/* The functions, once tfs_fflib_load has returned 0. */
extern struct tfs_fflib tfs_ff;

/* Open the libraries of the major versions this program was built against (their sonames, as
 * the headers give them) and find every function, once for the process; FFmpeg's own log is
 * silenced (problems are reported by the caller, naming the file). 0, or -ELIBACC with the
 * reason (the library, the loader's message) in err and logged once: the command cannot decode
 * media at all, which no file is to blame for. Thread-safe. */
int tfs_fflib_load(char *err, size_t err_cap);

#endif
