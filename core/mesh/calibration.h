#pragma once
// Calibration results (what resources/calibrate/calibrate.py measures on a cluster; the format
// is docs/formats.md, "Calibration results") turned into a hardware file: the measured figures
// replace a base preset's, the rest stay the preset's and Hardware::calibrated says which.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mesh.h"

namespace tp {

inline constexpr const char* kCalibrationFormat = "tpstudio.calibration";
inline constexpr int kCalibrationFormatVersion = 1;

/// The calibration script (resources/calibrate/calibrate.py) as built into the binary.
std::string_view calibrationScript();

/// One measured matmul: C[m,n] = A[m,k] B[k,n] at this rate.
struct GemmMeasurement {
    std::string kind; ///< "large", "small_k" (both fitted), "tp", "small_n" (recorded)
    double m = 0, n = 0, k = 0;
    double tflops = 0;
};

/// A results file as read: every figure checked, in the file's units.
struct CalibrationResults {
    std::string device;
    double deviceMemoryBytes = 0; ///< 0 when unknown (the dry run)
    bool dryRun = false;
    std::string backend;
    std::int64_t worldSize = 1, ranksPerNode = 1;
    DType dtype = DType::BF16;
    std::vector<GemmMeasurement> gemm;                                  ///< empty: not measured
    std::optional<double> hbmGBps;                                      ///< streaming copy, bytes read plus written per second
    std::optional<double> kernelSeconds;                                ///< one tiny elementwise kernel
    std::map<std::string, std::map<std::string, BandwidthCurve>> links; ///< "intra_node" -> kind -> busbw
};

/// Reads a results file. Throws InputError "<origin>: <JSON pointer>: <reason>" naming the field.
CalibrationResults readCalibrationResults(const std::string& text, const std::string& origin);

/// The matmul fit: the large-K rate (TFLOP/s) and the contraction of half that rate.
struct GemmFit {
    double largeTflops = 0;
    double halfEfficiencyK = 0;
};

/// Least-squares fit (relative errors) of rate = large * K / (K + half) to the "large" and
/// "small_k" shapes; `half` comes from a 1-D search unless no small-K shape was measured, when
/// `fallbackHalfK` is kept.
GemmFit fitGemm(const std::vector<GemmMeasurement>& gemm, double fallbackHalfK);

/// The base hardware with the results' figures in place (docs/formats.md lists which).
Hardware hardwareFromCalibration(const CalibrationResults& results, const Hardware& base, const std::string& origin);
Hardware hardwareFromCalibration(const std::string& resultsText, const Hardware& base, const std::string& origin);

/// The preset for a device name as CUDA reports it ("NVIDIA A100-SXM4-80GB" -> a100-80g-dgx);
/// nullopt when none matches.
std::optional<std::string> presetForDevice(const std::string& device, double memoryBytes);

/// The figures of a calibrated hardware file that were not measured: "peak", "hbm_gib", link
/// latencies, and whatever of matmul, hbm, min_kernel_us and the link curves is not in
/// Hardware::calibrated (a link none of whose curves was measured is named whole).
std::vector<std::string> figuresFromPreset(const Hardware& hardware);
/// "calibrated: matmul, hbm, intra_node/all-reduce; from the preset: inter_node, peak, ..." (the
/// line tpplan plan prints for a calibrated hardware file); empty when nothing is calibrated.
std::string calibrationSummary(const Hardware& hardware);

} // namespace tp
