#pragma once
// What `tpplan bench` and `tpplan bench sweep` share: running one case in a child process of
// this executable (its own peak RSS, no heap or caches from another case, a time limit), and
// the description of the machine the figures were taken on.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tp::cli {

/// This executable (/proc/self/exe).
std::filesystem::path selfExecutable();

/// A child's stdout, exit status (128 + signal when killed), peak RSS and times.
struct ChildResult {
    std::string output;
    int exitCode = -1;
    long peakRssKiB = 0;
    double wallMs = 0;
    double cpuMs = 0;      ///< user + system time of the child, all its threads
    bool timedOut = false; ///< killed at its time limit
};

/// Runs `argv` (argv[0] a path) with `extraEnv` ("NAME=value") added; `timeoutSeconds` > 0 ends
/// it with SIGALRM after that long (an alarm survives exec, so nothing watches it).
ChildResult runChild(const std::vector<std::string>& argv, const std::vector<std::string>& extraEnv = {},
                     unsigned timeoutSeconds = 0);

/// The 1, 5 and 15 minute load averages.
std::vector<double> loadAverage();
/// CPU, cores, RAM, kernel, compiler, build type and the load average now.
nlohmann::json machineJson();

} // namespace tp::cli
