#include "runtime/model_files/gguf/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace troupe::gguf::detail {

namespace {
std::string errno_text(int err) { return std::strerror(err); }
}  // namespace

Status MappedFile::release_pages() const {
  if (madvise(const_cast<uint8_t*>(data_), static_cast<size_t>(size_), MADV_DONTNEED) != 0)
    return internal_error("cannot release the pages of a mapped model file: " + errno_text(errno));
  return {};
}

MappedFile::~MappedFile() {
  munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
}

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is then refused as not a
  // regular file); it changes nothing for a regular file's reads.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return not_found(path + ": no such file");
    return invalid_argument(path + ": cannot open: " + errno_text(err));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return invalid_argument(path + ": cannot stat: " + errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument(path + (S_ISDIR(st.st_mode) ? ": a directory, not a file"
                                                        : ": not a regular file (a device, FIFO or socket)"));
  }
  if (st.st_size <= 0) {
    ::close(fd);
    return data_loss(path + ": file is empty");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  void* p = mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (p == MAP_FAILED) return invalid_argument(path + ": cannot mmap: " + errno_text(err));
  return std::unique_ptr<MappedFile>(new MappedFile(static_cast<const uint8_t*>(p), size));
}

}  // namespace troupe::gguf::detail
