#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "system_shims.h"

int ingest_start_writeback(int fd, int64_t offset, int64_t length) {
    return sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE);
}

int ingest_wait_writeback(int fd, int64_t offset, int64_t length) {
    return sync_file_range(fd, offset, length,
                           SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
}

int ingest_fallocate(int fd, int64_t offset, int64_t length) {
    return fallocate(fd, 0, offset, length);
}

int ingest_syncfs(int fd) {
    return syncfs(fd);
}

int ingest_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

int ingest_set_direct_io(int fd, int on) {
    int flags = fcntl(fd, F_GETFL);
    if (flags == -1) return -1;
    return fcntl(fd, F_SETFL, on ? (flags | O_DIRECT) : (flags & ~O_DIRECT));
}

int ingest_name_this_thread(const char *name) {
    return pthread_setname_np(pthread_self(), name);
}

int ingest_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
}

int ingest_has_effective_capability(int capability) {
    if (capability < 0 || capability >= 64) { errno = EINVAL; return -1; }
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {{0}};
    if (syscall(SYS_capget, &header, data) != 0) return -1;
    return (data[capability / 32].effective >> (capability % 32)) & 1;
}

int ingest_statx_mount(int dirfd, const char *name, uint64_t *device, uint64_t *mount_id, int *has_mount_id) {
    struct statx info;
    int flags = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | (name[0] == '\0' ? AT_EMPTY_PATH : 0);
    if (statx(dirfd, name, flags, STATX_MNT_ID, &info) != 0) return -1;
    *device = makedev(info.stx_dev_major, info.stx_dev_minor);
    *has_mount_id = (info.stx_mask & STATX_MNT_ID) != 0;
    *mount_id = *has_mount_id ? info.stx_mnt_id : 0;
    return 0;
}

int ingest_lstat_mount(int dirfd, const char *name, struct stat *st, uint64_t *mount_id, int *has_mount_id) {
    struct statx x;
    *has_mount_id = 0;
    *mount_id = 0;
    int flags = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | (name[0] == '\0' ? AT_EMPTY_PATH : 0);
    if (statx(dirfd, name, flags, STATX_BASIC_STATS | STATX_MNT_ID, &x) != 0) {
        if (errno != ENOSYS && errno != EPERM) return -1;
        return fstatat(dirfd, name, st, flags & ~AT_NO_AUTOMOUNT);
    }
    memset(st, 0, sizeof *st);
    st->st_dev = makedev(x.stx_dev_major, x.stx_dev_minor);
    st->st_ino = x.stx_ino;
    st->st_mode = x.stx_mode;
    st->st_nlink = x.stx_nlink;
    st->st_uid = x.stx_uid;
    st->st_gid = x.stx_gid;
    st->st_rdev = makedev(x.stx_rdev_major, x.stx_rdev_minor);
    st->st_size = (off_t)x.stx_size;
    st->st_blksize = (blksize_t)x.stx_blksize;
    st->st_blocks = (blkcnt_t)x.stx_blocks;
    st->st_atim.tv_sec = x.stx_atime.tv_sec;
    st->st_atim.tv_nsec = x.stx_atime.tv_nsec;
    st->st_mtim.tv_sec = x.stx_mtime.tv_sec;
    st->st_mtim.tv_nsec = x.stx_mtime.tv_nsec;
    st->st_ctim.tv_sec = x.stx_ctime.tv_sec;
    st->st_ctim.tv_nsec = x.stx_ctime.tv_nsec;
    if (x.stx_mask & STATX_MNT_ID) {
        *has_mount_id = 1;
        *mount_id = x.stx_mnt_id;
    }
    return 0;
}

int ingest_mincore_cached(int fd, int64_t length) {
    if (length <= 0) { errno = EINVAL; return -1; }
    size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = ((size_t)length + page - 1) / page;
    char *map = mmap(NULL, (size_t)length, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) return -1;
    unsigned char resident[256];
    int cached = 1;
    for (size_t first = 0; cached == 1 && first < pages; first += sizeof resident) {
        size_t count = pages - first < sizeof resident ? pages - first : sizeof resident;
        if (mincore(map + first * page, count * page, resident) != 0) { cached = -1; break; }
        for (size_t i = 0; i < count; i++) if (!(resident[i] & 1)) { cached = 0; break; }
    }
    int saved = errno;
    munmap(map, (size_t)length);
    errno = saved;
    return cached;
}

int ingest_unlink_detached(const char *path) {
    // _Fork, not fork: no atfork handlers, no allocator locks. The children of a
    // multi-threaded process may call only async-signal-safe functions, and do.
    pid_t child = _Fork();
    if (child < 0) return -1;
    if (child == 0) {
        pid_t deleter = _Fork();
        if (deleter == 0) {
            close_range(0, ~0U, 0);
            unlink(path);
        }
        _exit(deleter < 0 ? 1 : 0);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0) {
        if (errno != EINTR) return -1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        errno = EAGAIN;
        return -1;
    }
    return 0;
}
