/*
 * faults.h: make the library's k-th mutating file-system call fail.
 * Counts pwrite, pwritev, fdatasync, fsync, ftruncate, renameat and
 * unlinkat made through the zr_io table (lib/io.h).
 */
#ifndef ZR_TEST_FAULTS_H
#define ZR_TEST_FAULTS_H

/* From now on, call number k (1-based) fails with errno err; with
 * persistent set, every later call fails too. k = 0 only counts. */
void zt_faults_arm(long k, int err, int persistent);
/* Restore the real calls; returns how many calls were counted. */
long zt_faults_disarm(void);
/* Make fsync and fdatasync return success without syncing (on = 1), or
 * restore the real calls (on = 0). For tests of behaviour under process
 * death and failed calls, where durability against power loss is not what
 * is checked, this removes milliseconds per sync. */
void zt_nosync(int on);
/* Whether the armed fault has fired. */
int zt_faults_fired(void);

#endif
