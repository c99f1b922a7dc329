// tpplan bench's children and machine description (bench_child.h).
#include "bench_child.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <thread>

#ifndef TP_BUILD_TYPE
#define TP_BUILD_TYPE "unknown"
#endif
#ifndef TP_ALLOCATOR
#define TP_ALLOCATOR "unknown"
#endif

namespace tp::cli {

std::filesystem::path selfExecutable() { return std::filesystem::read_symlink("/proc/self/exe"); }

ChildResult runChild(const std::vector<std::string>& argv, const std::vector<std::string>& extraEnv, unsigned timeoutSeconds)
{
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("bench: pipe failed");
    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("bench: fork failed");
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        for (const auto& kv : extraEnv) putenv(const_cast<char*>(kv.c_str()));
        if (timeoutSeconds > 0) alarm(timeoutSeconds);
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        execv(args[0], args.data());
        _exit(127);
    }
    close(fds[1]);
    ChildResult result;
    char buffer[65536];
    ssize_t got = 0;
    while ((got = read(fds[0], buffer, sizeof buffer)) > 0) result.output.append(buffer, static_cast<size_t>(got));
    close(fds[0]);
    int status = 0;
    rusage usage{};
    wait4(pid, &status, 0, &usage);
    result.wallMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    result.peakRssKiB = usage.ru_maxrss; // KiB on Linux
    auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3; };
    result.cpuMs = ms(usage.ru_utime) + ms(usage.ru_stime);
    result.timedOut = timeoutSeconds > 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM;
    return result;
}

namespace {

std::string firstMatch(const char* file, const std::string& key)
{
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
        if (key.empty()) return line; // a one-line file such as /proc/sys/kernel/osrelease
        if (line.rfind(key, 0) == 0) {
            const auto colon = line.find(':');
            std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
            value.erase(0, value.find_first_not_of(" \t"));
            return value;
        }
    }
    return "";
}

} // namespace

std::vector<double> loadAverage()
{
    std::ifstream in("/proc/loadavg");
    double a = 0, b = 0, c = 0;
    in >> a >> b >> c;
    return {a, b, c};
}

nlohmann::json machineJson()
{
    const std::string memKiB = firstMatch("/proc/meminfo", "MemTotal");
#if defined(__clang__)
    const std::string compiler = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
    const std::string compiler = std::string("gcc ") + __VERSION__;
#else
    const std::string compiler = "unknown";
#endif
    return {{"cpu", firstMatch("/proc/cpuinfo", "model name")},
            {"cores", std::thread::hardware_concurrency()},
            {"ram_bytes", std::atof(memKiB.c_str()) * 1024.0},
            {"kernel", firstMatch("/proc/sys/kernel/osrelease", "")},
            {"compiler", compiler},
            {"build_type", TP_BUILD_TYPE},
            {"allocator", TP_ALLOCATOR},
            {"load_average_start", loadAverage()}};
}

} // namespace tp::cli
