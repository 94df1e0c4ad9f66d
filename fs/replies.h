/* replies.h: the threads that send .gather's data replies (replies.c). */
#ifndef ZFS_REPLIES_H
#define ZFS_REPLIES_H

#include "fs/zrfs.h"

/* Start n threads (at most 8) that send .gather's data replies for the
 * single-threaded loop; call after the process has daemonized. Returns 0
 * or a negative errno (the threads started before it still run). */
int zfs_replies_start(unsigned n);
/* Send what is queued, then stop the threads. Safe when none runs. */
void zfs_replies_stop(void);
/* Reply to req with iov[0..cnt) on a reply thread, or at once if none
 * runs, then call done(arg); what iov points to must stay valid until
 * done runs. Thread-safe. */
void zfs_reply_iov(fuse_req_t req, const struct iovec *iov, int cnt, void (*done)(void *),
                   void *arg);

#endif
