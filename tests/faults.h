/*
 * faults.h: make the library's k-th mutating file-system call fail.
 * Counts pwrite, pwritev, fdatasync, fsync, ftruncate, renameat and
 * unlinkat made through the zr_io table (lib/io.h).
 */
#ifndef ZR_TEST_FAULTS_H
#define ZR_TEST_FAULTS_H

/* Pseudo error numbers for zt_faults_arm. ZT_SHORT makes a write
 * (pwrite or pwritev) write only part of its bytes and return the short
 * count. Both ZT_SHORT and EINTR apply to the two write calls only, where
 * the library must retry them; an armed call of another kind passes. */
#define ZT_SHORT (-1)

/* Which kind of call the armed fault fired on (zt_faults_fired_call). */
enum zt_call {
    ZT_CALL_NONE,
    ZT_CALL_WRITE,    /* pwrite, pwritev */
    ZT_CALL_SYNC,     /* fdatasync, fsync */
    ZT_CALL_TRUNCATE, /* ftruncate */
    ZT_CALL_NAME,     /* renameat, unlinkat */
};

/* From now on, call number k (1-based) fails with errno err (or ZT_SHORT);
 * with persistent set, every later call fails too. A persistent EINTR
 * interrupts every later write once (its retry goes through) and a
 * persistent ZT_SHORT makes every later write short, so both still let
 * the work finish. k = 0 only counts. */
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
/* The kind of call the armed fault first fired on, ZT_CALL_NONE if none. */
enum zt_call zt_faults_fired_call(void);

#endif
