// tpplan bench fidelity: the published runs predicted against their measured times
// (docs/FIDELITY.md), as a table, JSON, and a predicted-vs-measured plot.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "cli.h"
#include "plan/fidelity.h"
#include "util/error.h"

namespace tp::cli {

namespace {

struct Row {
    const PublishedRun* run = nullptr;
    RunPrediction predicted;
};

double relative(double predicted, double measured) { return predicted / measured - 1; }

std::string percent(double e)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * e);
    return buf;
}

// A square scatter of predicted against measured step times, on log-free linear axes from 0 to
// the largest time, with the y = x diagonal and +-10% bands.
std::string plotSvg(const std::vector<Row>& rows)
{
    double top = 0;
    for (const auto& r : rows)
        if (r.run->stepSeconds) top = std::max({top, *r.run->stepSeconds, r.predicted.stepSeconds});
    top = std::ceil(top * 1.1 * 4) / 4;
    const double size = 480, margin = 60, plot = size - 2 * margin;
    auto x = [&](double s) { return margin + s / top * plot; };
    auto y = [&](double s) { return size - margin - s / top * plot; };
    std::ostringstream svg;
    svg << std::fixed << std::setprecision(1);
    svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << size + 220 << "\" height=\"" << size
        << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    svg << "<polygon fill=\"#e8f0fb\" points=\"" << x(0) << "," << y(0) << " " << x(top) << "," << y(top * 1.1) << " " << x(top)
        << "," << y(top * 0.9) << "\"/>\n";
    svg << "<line x1=\"" << x(0) << "\" y1=\"" << y(0) << "\" x2=\"" << x(top) << "\" y2=\"" << y(top)
        << "\" stroke=\"#7a8ca5\" stroke-dasharray=\"4 3\"/>\n";
    svg << "<rect x=\"" << margin << "\" y=\"" << margin << "\" width=\"" << plot << "\" height=\"" << plot
        << "\" fill=\"none\" stroke=\"#333\"/>\n";
    for (double t = 0; t <= top + 1e-9; t += 0.25) {
        svg << "<text x=\"" << x(t) << "\" y=\"" << size - margin + 16 << "\" text-anchor=\"middle\">" << std::setprecision(2)
            << t << "</text>\n<text x=\"" << margin - 8 << "\" y=\"" << y(t) + 4 << "\" text-anchor=\"end\">" << t << "</text>\n"
            << std::setprecision(1);
    }
    svg << "<text x=\"" << size / 2 << "\" y=\"" << size - 18 << "\" text-anchor=\"middle\">measured step time (s)</text>\n";
    svg << "<text transform=\"translate(18," << size / 2
        << ") rotate(-90)\" text-anchor=\"middle\">predicted step time (s)</text>\n";
    svg << "<text x=\"" << margin << "\" y=\"" << margin - 14
        << "\">TP Studio cost model vs published runs (band: ±10%)</text>\n";
    int i = 0;
    for (const auto& r : rows) {
        if (!r.run->stepSeconds) continue;
        ++i;
        svg << "<circle cx=\"" << x(*r.run->stepSeconds) << "\" cy=\"" << y(r.predicted.stepSeconds)
            << "\" r=\"5\" fill=\"#2f6db5\"/>\n<text x=\"" << x(*r.run->stepSeconds) + 7 << "\" y=\""
            << y(r.predicted.stepSeconds) + 4 << "\">" << i << "</text>\n";
        svg << "<text x=\"" << size + 4 << "\" y=\"" << margin + 16 * i << "\">" << i << ": " << r.run->name << " ("
            << percent(relative(r.predicted.stepSeconds, *r.run->stepSeconds)) << ")</text>\n";
    }
    svg << "</svg>\n";
    return svg.str();
}

} // namespace

int runFidelity(const Options& o, std::ostream& out)
{
    if (o.positional.size() > 2)
        throw UsageError("usage: tpplan bench fidelity [RUNS.json] [--json] [--plot FILE.svg] [-o FILE]");
    std::vector<PublishedRun> runs;
    if (o.positional.size() == 2) {
        std::ifstream file(o.positional[1], std::ios::binary);
        if (!file) throw InputError(o.positional[1] + ": cannot read the file");
        std::ostringstream text;
        text << file.rdbuf();
        runs = readPublishedRuns(text.str(), o.positional[1]);
    } else {
        runs = builtinPublishedRuns();
    }
    std::vector<Row> rows;
    for (const auto& run : runs) rows.push_back({&run, predictRun(run)});

    nlohmann::json doc = {{"runs", nlohmann::json::array()}};
    double stepSum = 0, stepWorst = 0, layerSum = 0, layerWorst = 0;
    int steps = 0, layers = 0;
    std::ostringstream table;
    table << std::left << std::setw(44) << "run" << std::right << std::setw(16) << "measured" << std::setw(16) << "predicted"
          << std::setw(16) << "error"
          << "\n";
    for (const auto& r : rows) {
        nlohmann::json j = {{"name", r.run->name}, {"source", r.run->source}};
        std::ostringstream m, p, e;
        m << std::fixed;
        p << std::fixed;
        if (r.run->stepSeconds) {
            const double err = relative(r.predicted.stepSeconds, *r.run->stepSeconds);
            stepSum += std::abs(err);
            stepWorst = std::max(stepWorst, std::abs(err));
            ++steps;
            j["measured_step_s"] = *r.run->stepSeconds;
            j["predicted_step_s"] = r.predicted.stepSeconds;
            j["step_error"] = err;
            m << std::setprecision(3) << *r.run->stepSeconds << " s";
            p << std::setprecision(3) << r.predicted.stepSeconds << " s";
            e << percent(err);
        } else if (r.run->layerSeconds) {
            const auto [fm, bm] = *r.run->layerSeconds;
            const double ef = relative(r.predicted.layerForwardSeconds, fm), eb = relative(r.predicted.layerBackwardSeconds, bm);
            for (double err : {ef, eb}) {
                layerSum += std::abs(err);
                layerWorst = std::max(layerWorst, std::abs(err));
                ++layers;
            }
            j["measured_layer_ms"] = {fm * 1e3, bm * 1e3};
            j["predicted_layer_ms"] = {r.predicted.layerForwardSeconds * 1e3, r.predicted.layerBackwardSeconds * 1e3};
            j["layer_error"] = {ef, eb};
            m << std::setprecision(1) << fm * 1e3 << "/" << bm * 1e3 << " ms";
            p << std::setprecision(1) << r.predicted.layerForwardSeconds * 1e3 << "/" << r.predicted.layerBackwardSeconds * 1e3
              << " ms";
            e << percent(ef) << "/" << percent(eb);
        }
        table << std::left << std::setw(44) << r.run->name << std::right << std::setw(16) << m.str() << std::setw(16) << p.str()
              << std::setw(16) << e.str() << "\n";
        doc["runs"].push_back(std::move(j));
    }
    if (steps) {
        doc["step_mean_abs_error"] = stepSum / steps;
        doc["step_worst_abs_error"] = stepWorst;
    }
    if (layers) {
        doc["layer_mean_abs_error"] = layerSum / layers;
        doc["layer_worst_abs_error"] = layerWorst;
    }
    if (!o.plot.empty()) writeFileAtomically(o.plot, plotSvg(rows));
    if (!o.json) {
        out << table.str();
        if (steps)
            out << "step times: mean |error| " << percent(stepSum / steps).substr(1) << ", worst " << percent(stepWorst).substr(1)
                << " (" << steps << " runs)\n";
        if (layers)
            out << "layer forward/backward: mean |error| " << percent(layerSum / layers).substr(1) << ", worst "
                << percent(layerWorst).substr(1) << " (" << layers << " figures)\n";
    }
    emitJson(o, doc, out);
    return 0;
}

} // namespace tp::cli
