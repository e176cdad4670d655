// The `tern` subcommands. Each returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace tern_cli {

int cmd_run(const std::vector<std::string>& args);
int cmd_info(const std::vector<std::string>& args);
int cmd_convert(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);

}  // namespace tern_cli
