#ifndef INGEST_SYSTEM_SHIMS_H
#define INGEST_SYSTEM_SHIMS_H

#include <spawn.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/stat.h>

/// Linux calls that glibc declares only under _GNU_SOURCE, which Swift's Glibc module does
/// not define. Each returns what the call returns (-1 with errno set on failure).

/// Starts asynchronous writeback of a byte range (sync_file_range with
/// SYNC_FILE_RANGE_WRITE), so dirty pages never pile up behind a long copy.
int ingest_start_writeback(int fd, int64_t offset, int64_t length);

/// Waits until a byte range that is being written back has reached the device
/// (sync_file_range with WAIT_BEFORE | WRITE | WAIT_AFTER), so its pages are clean and can
/// be dropped. Not a durability point: it flushes no metadata and no device cache.
int ingest_wait_writeback(int fd, int64_t offset, int64_t length);

/// Reserves blocks for a file without writing them (fallocate mode 0).
int ingest_fallocate(int fd, int64_t offset, int64_t length);

/// Flushes everything written to the file system that holds `fd` (syncfs).
int ingest_syncfs(int fd);

/// A pipe whose both ends are close-on-exec from the start (pipe2 with O_CLOEXEC), so a
/// child another thread spawns at the same moment cannot inherit them.
int ingest_pipe_cloexec(int fds[2]);

/// Turns direct I/O (O_DIRECT) on or off for an open file (fcntl F_SETFL), keeping its other
/// flags: reads and writes then go between the device and the caller's buffer, past the page
/// cache, and buffer addresses, file offsets and lengths must be aligned to what the file
/// system asks (statx STATX_DIOALIGN; 4096 satisfies every local one). Turning it on fails
/// (EINVAL) on file systems without direct I/O.
int ingest_set_direct_io(int fd, int on);

/// lstat(2) of `name` in the directory `dirfd` (of the open file `dirfd` itself when `name`
/// is empty) and the mount it is on, in one statx call (a symbolic link not followed, no
/// automount triggered): `*st` as fstatat with
/// AT_SYMLINK_NOFOLLOW fills it, `*mount_id` and `*has_mount_id` as ingest_statx_mount sets
/// them. Where statx is missing or refused (ENOSYS, EPERM: an old kernel, a seccomp filter)
/// it is fstatat, without a mount id. Returns 0, or -1 with errno set.
int ingest_lstat_mount(int dirfd, const char *name, struct stat *st, uint64_t *mount_id, int *has_mount_id);

/// Whether every page of the first `length` bytes of the open file `fd` is in the page cache,
/// asked without reading a byte or waiting for any I/O: 1 if so, 0 if not, -1 with errno set.
/// It maps the range read-only (nothing is read: the mapping is never touched) and asks
/// mincore(2). Fails where the file system refuses mmap (some FUSE file systems).
int ingest_mincore_cached(int fd, int64_t length);

/// Names the calling thread for the kernel (pthread_setname_np), as `top -H`, `ps -L` and
/// `perf` show it: at most 15 bytes, or it fails with ERANGE. Returns 0 or an error number.
int ingest_name_this_thread(const char *name);

/// Makes a posix_spawn(3) child close every descriptor from `lowest` up before it runs
/// (posix_spawn_file_actions_addclosefrom_np, glibc 2.34): nothing of the parent leaks in.
int ingest_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest);

/// Whether the calling thread holds `capability` (a CAP_* number) in its effective set
/// (capget): 1 if it does, 0 if not, -1 with errno set when the kernel cannot say.
int ingest_has_effective_capability(int capability);

/// The mount and file system of `name` in the directory `dirfd` (statx, not following a last
/// symbolic link nor triggering an automount), or of the open file `dirfd` itself when `name` is
/// "" (AT_EMPTY_PATH). Sets `*device` to the file system's device (as `st_dev`) and `*mount_id`
/// to the mount's id (`stx_mnt_id`, Linux 5.8), which tells a bind mount of a file system apart
/// from the file system itself where the device cannot; `*has_mount_id` is 0 where the kernel
/// does not report it. Returns 0, or -1 with errno set.
int ingest_statx_mount(int dirfd, const char *name, uint64_t *device, uint64_t *mount_id, int *has_mount_id);

/// Deletes the file at `path` in a process of its own, which the caller neither waits for nor
/// outlives the need of: the caller forks a child that forks the deleting process and exits at
/// once (reaped here), so the deleting process belongs to no one. Freeing a large file's
/// blocks holds unlink(2) for as long as the file system takes (long, for a large file on a
/// file system mounted `discard`), and a process cannot exit while one of its threads is in
/// such a call: this is how a caller lets a file go without waiting. The deleting process closes every
/// descriptor first (none of the caller's pipes, sockets or locks stays open in it) and calls
/// nothing but system calls. Returns 0 once it is started, -1 with errno set if it could not
/// be (then nothing was deleted).
int ingest_unlink_detached(const char *path);

#endif
