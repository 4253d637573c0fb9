#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>
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
