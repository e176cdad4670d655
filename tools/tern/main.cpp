// tern: run, inspect and convert models from the command line.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/tern/commands.h"

// The usage text, one section per command: `tern` alone or `tern --help` prints them all,
// `tern COMMAND --help` its own.
struct Section {
  const char* command;
  const char* text;
};
const Section kSections[] = {
    {"--version",
     "  tern --version\n"
     "      Prints the version, then the build configuration on one line.\n"},
    {"run",
     "  tern run MODEL [--input NAME=FILE.npy ...] [--shape NAME=1x3x48x192 ...]\n"
     "                 [--backends LIST] [--threads N] [--interop N] [--cpus LIST]\n"
     "                 [--runs N] [--zeros] [--seed N] [--timeout MS] [--output-dir DIR]\n"
     "                 [--flag NAME=VALUE ...] [--run-flag NAME=VALUE ...]\n"
     "      Runs MODEL (.tern or .onnx). Inputs not given are random (or zero with\n"
     "      --zeros) of the --shape given, else of the declared shape with dynamic\n"
     "      dims set to 1. Prints each output, then the latency of --runs runs\n"
     "      after one warm-up run, the busy cores and the peak RSS. --output-dir\n"
     "      writes DIR/<output>.npy. --flag sets a flag for the session,\n"
     "      --run-flag a run-scoped flag (sdp.*, onednn.verbose) for the runs.\n"
     "      --cpus pins the intra-op threads to a CPU list like 0-3,8 (the\n"
     "      cpu.affinity flag). --timeout MS stops any run (warm-up included) that\n"
     "      takes longer than MS milliseconds: TERN_ERR_DEADLINE_EXCEEDED, exit 124.\n"},
    {"bench",
     "  tern bench MODEL [--threads N[,N...]] [--interop N[,N...]]\n"
     "                   [--concurrency N[,N...]] [--format md|csv|json]\n"
     "                   [--runs R] [--warmup W] [--cpus LIST]\n"
     "                   [--input NAME=FILE.npy ...] [--shape NAME=1x3x48x192 ...]\n"
     "                   [--json] [--profile FILE.json] [--no-progress]\n"
     "                   [--backends LIST] [--flag NAME=VALUE ...] [--run-flag ...]\n"
     "      Creates a session (timed from the file to a ready session), runs W warm-up\n"
     "      and R timed runs, prints min/p50/p90 latency, throughput, planned\n"
     "      activation and packed-weight bytes and peak RSS; --json prints one JSON\n"
     "      object instead; --profile writes a Chrome trace with one event per node.\n"
     "      Lists (--threads 1,2 --interop 1,2 --concurrency 1,4,8), a concurrency\n"
     "      other than 1 or --format make a sweep: every combination, N application\n"
     "      threads running one session in a loop (W + R runs each), one row each:\n"
     "      p50, p90, p99, runs/s, busy cores (process CPU time / wall), peak RSS; as a\n"
     "      markdown table (default), csv or json (--json = --format json).\n"},
    {"inspect",
     "  tern inspect MODEL [--json] [--dot FILE] [--shape NAME=1x3x48x192 ...]\n"
     "      Inputs and outputs, op histogram, parameters (count and bytes by dtype),\n"
     "      approximate FLOPs (2 per multiply-add of Conv, ConvTranspose, MatMul, Gemm\n"
     "      and attention, on the shapes of one run on zero inputs with dynamic dims 1\n"
     "      or --shape's), opset and producer. --json prints one JSON object; --dot\n"
     "      writes a Graphviz graph of the nodes. .onnx and .tern alike.\n"},
    {"check",
     "  tern check MODEL DIR [--atol A] [--rtol R] [--backends LIST] [--threads N]\n"
     "      Runs MODEL on DIR's reference inputs and compares with its outputs. DIR is\n"
     "      an ONNX test data set (input_N.pb, output_N.pb), a folder of test_data_set_*\n"
     "      sets, or .npy pairs (input_NAME.npy per input, expected_NAME.npy per output).\n"
     "      Prints per output the max abs and rel error and the worst element. Exit 0\n"
     "      when |got - want| <= atol + rtol * |want| everywhere (defaults atol 1e-4,\n"
     "      rtol 1e-3), 1 otherwise, 2 on errors.\n"},
    {"info",
     "  tern info [MODEL | --flags | --parallel]\n"
     "      Version, build configuration, backends, CPU capability; with MODEL its\n"
     "      inputs and outputs; --flags lists every flag (value, source, scope,\n"
     "      default, env var, doc); --parallel prints the threading report.\n"},
    {"convert",
     "  tern convert IN OUT.tern [--optimize [--threads N] [--flag NAME=VALUE ...]\n"
     "                           [--input NAME=FILE.npy | --shape NAME=1x3x8x8 ...]\n"
     "                           [--no-progress]]\n"
     "      Converts a model (ONNX or .tern) to .tern. --optimize stores the graph\n"
     "      after Tern's optimizations with the weights packed for this CPU's kernels,\n"
     "      so sessions start without optimizing or packing; models with dynamic\n"
     "      input shapes pack for the shapes of --input/--shape (one run). A bar on\n"
     "      stderr shows folding, rewrites and kernel preparation when stderr is a\n"
     "      terminal; --no-progress turns it off.\n"},
};

static void usage(FILE* to, const char* command = nullptr) {
  std::fputs("usage:\n", to);
  for (const Section& s : kSections) {
    if (!command || !std::strcmp(command, s.command)) std::fputs(s.text, to);
  }
}

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  if (cmd == "--version") return tern_cli::print_version();
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const std::string& a : args) {
    if (a != "--help" && a != "-h") continue;
    for (const Section& s : kSections) {
      if (cmd == s.command) {
        usage(stdout, s.command);
        return 0;
      }
    }
  }
  if (cmd == "run") return tern_cli::cmd_run(args);
  if (cmd == "info") return tern_cli::cmd_info(args);
  if (cmd == "convert") return tern_cli::cmd_convert(args);
  if (cmd == "bench") return tern_cli::cmd_bench(args);
  if (cmd == "inspect") return tern_cli::cmd_inspect(args);
  if (cmd == "check") return tern_cli::cmd_check(args);
  std::fprintf(stderr, "tern: unknown command '%s'\n", cmd.c_str());
  usage(stderr);
  return 2;
}
