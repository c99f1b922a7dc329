#include "kernels.h"

#include <algorithm>
#include <cmath>

namespace tp {

namespace {

// Of the tiles a (m x n) output needs on `sms` SMs, the fraction of tile-slots doing useful
// work: partial tiles at the edges (tile quantization) and the idle SMs of the last wave
// (wave quantization).
double tileUtilization(double batch, double m, double n, double tm, double tn, double sms)
{
    const double rows = std::ceil(m / tm), cols = std::ceil(n / tn);
    const double tiles = batch * rows * cols;
    const double waves = std::ceil(tiles / sms);
    const double useful = batch * m * n;
    return useful / (waves * sms * tm * tn);
}

} // namespace

double gemmEfficiency(const Hardware& hw, const GemmShape& s)
{
    const GemmModel& g = hw.gemm;
    double eff = hw.matmulEfficiency;
    if (g.smCount > 0) {
        const double tm = g.tileM, tn = g.tileN, sms = g.smCount;
        eff *= std::max(tileUtilization(s.batch, s.m, s.n, tm, tn, sms), tileUtilization(s.batch, s.m, s.n, tn, tm, sms));
    }
    if (g.halfEfficiencyK > 0) eff *= s.k / (s.k + g.halfEfficiencyK);
    return eff;
}

double streamSeconds(const Hardware& hw, double bytes)
{
    return hw.hbmBandwidth > 0 ? bytes / (hw.hbmBandwidth * hw.hbmEfficiency) : 0;
}

double gemmSeconds(const Hardware& hw, double peakFlops, double flops, double bytes, const GemmShape& shape)
{
    const double compute = flops / (peakFlops * gemmEfficiency(hw, shape));
    return std::max(compute, streamSeconds(hw, bytes));
}

double exposedAfterOverlap(double comm, double compute) { return std::max(0.0, comm - compute); }

} // namespace tp
