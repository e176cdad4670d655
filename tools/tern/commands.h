// The `tern` subcommands. Each returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace tern_cli {

int cmd_run(const std::vector<std::string>& args);
int cmd_info(const std::vector<std::string>& args);
int cmd_convert(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);
int cmd_inspect(const std::vector<std::string>& args);  // inspect.cpp
int print_version();                                    // version.cpp: `tern --version`
int cmd_check(const std::vector<std::string>& args);    // check.cpp

}  // namespace tern_cli
