// Small text files of the kernel (/proc, /sys): read with plain system calls. A C++ stream costs
// its process ~0.15 ms the first time one is opened (the locale's set-up), and these files are read
// while the first model loads.
#pragma once

#include <cstddef>
#include <string>

namespace tern {

// The first `limit` bytes of the file at `path` ("" when it cannot be opened or read).
std::string read_small_file(const char* path, size_t limit = 4096);

}  // namespace tern
