/*
 * loop.h: the single-threaded request loop of zrecordfs, shared with the
 * benchmark's fuse_ceiling so that both pay FUSE the same way.
 */
#ifndef ZFS_LOOP_H
#define ZFS_LOOP_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>
#include <stdatomic.h>

/* Microseconds the loop keeps asking for the next request before it
 * sleeps (-o spin=USEC), and the largest value accepted. */
#define ZFS_SPIN_DEFAULT_US 300u
#define ZFS_SPIN_MAX_US 100000u

/* The daemon's other threads count themselves here while they use a CPU
 * (the read-ahead thread decoding a large record, the reply threads
 * copying): the loop does not poll meanwhile, as it would take that CPU
 * from them. */
extern atomic_uint zfs_loop_helpers;

/* Serve se on the calling thread until it is unmounted or told to exit,
 * as fuse_session_loop does. After each request the loop keeps polling
 * the device for up to spin_us microseconds before it sleeps, and stops
 * doing so for a while whenever another task had to preempt it. spin_us
 * 0 is fuse_session_loop itself. 0 on a clean exit. */
int zfs_loop(struct fuse_session *se, unsigned spin_us);

#endif
