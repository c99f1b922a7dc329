// tpplan entry point: dispatches to the command table, maps errors to exit codes
// (0 success, 1 no plan fits, 2 bad input or usage).
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "util/error.h"

namespace {

void printHelp(std::ostream& out)
{
    out << "tpplan: plan tensor parallelism from the command line\n\nCommands:\n";
    for (const auto& c : tp::cli::commands()) out << "  " << c.synopsis << "\n";
    out << "\nCommon options: --mesh 8|2x8  --hardware NAME|FILE.json  --batch B  --micro-batch auto|M  --seq S\n"
           "                --mode train|infer  --memory-limit 80GiB  --set key=value  --lock 'GLOB=STRATEGY'\n"
           "                --overlap N (chunks)  --intra-node-bw GBps  --inter-node-bw GBps\n"
           "                --baseline megatron|megatron-sp|dp|flat  --threads N  --json  -o FILE\n"
           "                --recompute auto|none|selective|full|op  --grad-overlap on|off  --grad-bucket MiB\n"
           "                --tp-overlap on|off  --scatter-gather on|off (pipeline sends)\n"
           "                --set flash_attention=false  --set fused_kernels=false\n"
           "                --set fused_cross_entropy=true  --zero auto|0|1|2|3  --zero-shard auto|all|node\n"
           "                --reshard-after-forward auto|on|off  --grad-dtype bf16|fp32  --optimizer-dtype fp32|bf16\n"
           "                --dtype bf16|fp8 (the Linear layers' matmuls, as Transformer Engine runs fp8)\n"
           "                --pipeline auto|P  --schedule auto|1f1b|interleaved:V  --stage-layers auto|even|F,L\n"
           "                (all auto by default; --pipeline 1: none; F,L: the first and last stage's layers)\n";
}

} // namespace

int main(int argc, char** argv)
{
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
        printHelp(std::cout);
        return args.empty() ? 2 : 0;
    }
    try {
        const auto options = tp::cli::parseArguments(args);
        for (const auto& c : tp::cli::commands())
            if (options.command == c.name) return c.run(options, std::cout);
        throw tp::cli::UsageError("unknown command '" + options.command + "'; try 'tpplan --help'");
    } catch (const tp::cli::UsageError& e) {
        std::cerr << "tpplan: " << e.what() << "\n";
        return 2;
    } catch (const tp::InputError& e) {
        std::cerr << "tpplan: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "tpplan: internal error: " << e.what() << "\n";
        return 3;
    }
}
