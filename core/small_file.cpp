#include "core/small_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace tern {

std::string read_small_file(const char* path, size_t limit) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  char buf[16384];
  while (text.size() < limit) {
    const size_t want = limit - text.size() < sizeof buf ? limit - text.size() : sizeof buf;
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace tern
