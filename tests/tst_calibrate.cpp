// tpplan calibrate: the script runs for real (the dry run), its results import into a hardware
// file that plans; the fit of the matmul model; malformed results give one line naming the field.
#include <QtTest>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "mesh/calibration.h"
#include "util/error.h"
#include "processrun.h"

namespace {

using nlohmann::json;

// A results file whose figures follow known formulas (docs/formats.md, "Calibration results").
json syntheticResults()
{
    // a100-80g-dgx: 312 TFLOP/s bf16. Rates follow 0.8 * 312 * K / (K + 40): K 64 gives
    // 0.8 * 312 * 64 / 104 = 153.6, K 8192 gives 249.6 * 8192 / 8232 = 248.387...
    json gemm = json::array();
    auto add = [&](const char* kind, int m, int n, int k, double tflops) {
        gemm.push_back(
            {{"kind", kind}, {"m", m}, {"n", n}, {"k", k}, {"seconds", 2.0 * m * n * k / tflops / 1e12}, {"tflops", tflops}});
    };
    for (int k : {4096, 8192}) add("large", k, k, k, 0.8 * 312 * k / (k + 40.0));
    for (int k : {32, 64, 96, 128, 256}) add("small_k", 8192, 8192, k, 0.8 * 312 * k / (k + 40.0));
    add("tp", 8192, 1536, 4096, 50); // recorded, not fitted: far off the curve on purpose
    auto point = [](double bytes, double busbw) { return json{{"bytes", bytes}, {"seconds", 1e-3}, {"busbw_gbps", busbw}}; };
    return {
        {"format", "tpstudio.calibration"},
        {"version", 1},
        {"dry_run", false},
        {"device", "NVIDIA A100-SXM4-80GB"},
        {"device_memory_bytes", 85899345920.0},
        {"backend", "nccl"},
        {"world_size", 8},
        {"ranks_per_node", 8},
        {"dtype", "bf16"},
        {"gemm", gemm},
        {"hbm", {{"bytes", 2147483648.0}, {"seconds", 2147483648.0 / 1.8e12}, {"gbps", 1800}}},
        {"elementwise", {{"elements", 1024}, {"seconds", 6e-6}}},
        {"collectives",
         {{"intra_node",
           {{"group_size", 8}, {"emulated", json::array()}, {"all-reduce", {point(1048576, 100), point(1073741824, 230)}}}}}}};
}

using Run = ProcessRun;
Run tpplan(const QStringList& args) { return runTpplan(args); }

void writeText(const QString& path, const std::string& text) { std::ofstream(path.toStdString(), std::ios::binary) << text; }

std::string readText(const QString& path)
{
    std::ifstream in(path.toStdString(), std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// Debian's python3-torch (scripts/bootstrap.sh) installs for the system python, which a
// python3 earlier on PATH (pyenv, a venv) may not see.
QString pythonWithTorch()
{
    for (const QString& python : {QStringLiteral("python3"), QStringLiteral("/usr/bin/python3")})
        if (runProcess(python, {"-c", "import torch, torch.distributed"}, 60000).code == 0) return python;
    return {};
}

} // namespace

class TestCalibrate : public QObject {
    Q_OBJECT
private slots:
    // What `tpplan calibrate` writes is the script in resources/ byte for byte (the embedding of
    // resources/CMakeLists.txt must not alter it).
    void scriptIsTheResource()
    {
        const Run r = tpplan({"calibrate"});
        QCOMPARE(r.code, 0);
        const std::string source = readText(QStringLiteral(TP_TEST_DATA "/../../resources/calibrate/calibrate.py"));
        QVERIFY(!source.empty());
        QVERIFY(r.out.toStdString() == source);
        QVERIFY(tp::calibrationScript() == source);
    }

    // The script for real: two gloo processes on CPU, then import and plan.
    void dryRunImportsAndPlans()
    {
        const QString python = pythonWithTorch();
        if (python.isEmpty()) QSKIP("no python3 with torch (scripts/bootstrap.sh installs python3-torch)");
        QTemporaryDir dir;
        const QString script = dir.filePath("calibrate.py"), results = dir.filePath("r.json"), hw = dir.filePath("hw.json");
        QCOMPARE(tpplan({"calibrate", "-o", script}).code, 0);
        QElapsedTimer timer;
        timer.start();
        const Run dry = runProcess(python, {script, "--dry-run", "--out", results}, 240000);
        QVERIFY2(dry.code == 0, dry.err.constData());
        qInfo("dry run: %.1f s", timer.elapsed() / 1e3);
        const json doc = json::parse(readText(results));
        QCOMPARE(doc["dry_run"].get<bool>(), true);
        QCOMPARE(doc["world_size"].get<int>(), 2);
        QCOMPARE(doc["backend"].get<std::string>(), std::string("gloo"));
        // nccl-tests' bus bandwidth for g = 2: algbw * 2(g-1)/g = algbw for all-reduce, algbw / 2
        // for the others (algbw = bytes / seconds).
        const json& link = doc["collectives"]["intra_node"];
        QCOMPARE(link["group_size"].get<int>(), 2);
        for (const char* kind : {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"}) {
            const double factor = std::string(kind) == "all-reduce" ? 1.0 : 0.5;
            QVERIFY(!link[kind].empty());
            for (const auto& p : link[kind]) {
                const double algbw = p["bytes"].get<double>() / p["seconds"].get<double>() / 1e9;
                QVERIFY2(std::abs(p["busbw_gbps"].get<double>() - algbw * factor) <= 1e-9 * algbw, kind);
            }
        }

        const Run imported = tpplan({"calibrate", "--import", results, "-o", hw});
        QVERIFY2(imported.code == 0, imported.err.constData());
        QVERIFY2(imported.err.contains("no preset matches device"), imported.err.constData()); // a CPU
        const tp::Hardware h = tp::loadHardware(hw.toStdString());
        const std::vector<std::string> expected{"matmul",
                                                "hbm",
                                                "min_kernel_us",
                                                "intra_node/all-reduce",
                                                "intra_node/all-gather",
                                                "intra_node/reduce-scatter",
                                                "intra_node/all-to-all"};
        QVERIFY(h.calibrated == expected);
        QVERIFY(h.description.find("dry run") != std::string::npos);

        const Run plan = tpplan({"plan", "gpt2", "--set", "layers=2", "--batch", "8", "--hardware", hw});
        QVERIFY2(plan.code == 0, plan.err.constData());
        QVERIFY2(plan.out.contains("\n  hardware        calibrated: matmul, hbm, min_kernel_us, intra_node/all-reduce"),
                 plan.out.constData());
        QVERIFY2(plan.out.contains("; from the preset: inter_node, peak"), plan.out.constData());
    }

    // Hand arithmetic: the synthetic rates follow 0.8 * peak * K / (K + 40) exactly, so the fit
    // gives efficiency 0.8 and half_efficiency_k 40; the "tp" row (off the curve) is not fitted.
    void fitRecoversEfficiencyAndHalfK()
    {
        const tp::Hardware base = tp::loadHardware("a100-80g-dgx");
        const tp::Hardware h = tp::hardwareFromCalibration(syntheticResults().dump(), base, "r.json");
        QVERIFY2(std::abs(h.matmulEfficiency - 0.8) < 0.8 * 0.02, qPrintable(QString::number(h.matmulEfficiency)));
        QVERIFY2(std::abs(h.gemm.halfEfficiencyK - 40) < 40 * 0.02, qPrintable(QString::number(h.gemm.halfEfficiencyK)));
        QCOMPARE(h.gemm.smCount, base.gemm.smCount); // kept from the base
        QCOMPARE(h.gemm.tileN, base.gemm.tileN);
        // 1800 GB/s measured of 2039: 0.88279; one elementwise kernel 6 us.
        QVERIFY(std::abs(h.hbmEfficiency - 1800.0 / 2039) < 1e-12);
        QVERIFY(std::abs(h.minKernelSeconds - 6e-6) < 1e-15);
        // The all-reduce curve as measured; the link bandwidth is its largest message's busbw.
        const auto& curve = h.intraNode.busbw.at("all-reduce");
        QCOMPARE(curve.points.size(), size_t(2));
        QCOMPARE(curve.at(1048576), 100e9);
        QCOMPARE(h.intraNode.bandwidth, 230e9);
        QCOMPARE(h.interNode, base.interNode); // not measured: the preset's
        const std::vector<std::string> calibrated{"matmul", "hbm", "min_kernel_us", "intra_node/all-reduce"};
        QVERIFY(h.calibrated == calibrated);
        QCOMPARE(h.name, std::string("a100-80g-dgx-calibrated"));
        QVERIFY(h.sources.find("r.json") != std::string::npos && h.sources.find("A100-SXM4-80GB") != std::string::npos);
        // The written file reads back to the same hardware, the curve point included.
        const tp::Hardware again = tp::hardwareFromJson(tp::hardwareToJsonText(h), "hw.json");
        QCOMPARE(again.intraNode.busbw.at("all-reduce").at(1048576), 100e9);
        QVERIFY(again.calibrated == calibrated);
        QVERIFY(std::abs(again.gemm.halfEfficiencyK - h.gemm.halfEfficiencyK) < 1e-9);
    }

    // Without small-K shapes the base's half_efficiency_k stays and the large rate absorbs it:
    // both large rates 0.8 * 312 * K / (K + 32) (the preset's 32) fit 0.8 exactly.
    void fitKeepsBaseHalfKWithoutSmallK()
    {
        json doc = syntheticResults();
        json gemm = json::array();
        for (const auto& g : doc["gemm"])
            if (g["kind"] == "large") {
                json e = g;
                const double k = e["k"].get<double>();
                e["tflops"] = 0.8 * 312 * k / (k + 32);
                gemm.push_back(e);
            }
        doc["gemm"] = gemm;
        const tp::Hardware h = tp::hardwareFromCalibration(doc.dump(), tp::loadHardware("a100-80g-dgx"), "r.json");
        QCOMPARE(h.gemm.halfEfficiencyK, 32.0);
        QVERIFY(std::abs(h.matmulEfficiency - 0.8) < 1e-9);
    }

    // A rate above the base's peak means a wrong base: capped at 1 and said so.
    void rateAbovePeakIsCapped()
    {
        json doc = syntheticResults();
        for (auto& g : doc["gemm"]) g["tflops"] = 400;
        const tp::Hardware h = tp::hardwareFromCalibration(doc.dump(), tp::loadHardware("a100-80g-dgx"), "r.json");
        QCOMPARE(h.matmulEfficiency, 1.0);
        QVERIFY(h.description.find("capped") != std::string::npos);
    }

    void presetForDevice_data()
    {
        QTest::addColumn<QString>("device");
        QTest::addColumn<double>("memoryGiB");
        QTest::addColumn<QString>("preset");
        QTest::newRow("A100 80GB SXM") << "NVIDIA A100-SXM4-80GB" << 80.0 << "a100-80g-dgx";
        QTest::newRow("A100 40GB SXM") << "NVIDIA A100-SXM4-40GB" << 40.0 << "a100-40g-dgx";
        QTest::newRow("A100 by memory") << "NVIDIA A100" << 39.4 << "a100-40g-dgx";
        QTest::newRow("A100 PCIe") << "NVIDIA A100-PCIE-40GB" << 40.0 << "a100-pcie";
        QTest::newRow("H100") << "NVIDIA H100 80GB HBM3" << 79.6 << "h100-dgx";
        QTest::newRow("H100 96GB HBM2e") << "NVIDIA H100" << 95.0 << "h100-96g-hbm2e";
        QTest::newRow("H100 NVL") << "NVIDIA H100 NVL" << 93.6 << "h100-dgx";
        QTest::newRow("H100 PCIe") << "NVIDIA H100 PCIe" << 79.6 << "h100-pcie";
        QTest::newRow("H200") << "NVIDIA H200" << 140.0 << "h200-dgx";
        QTest::newRow("V100") << "Tesla V100-SXM3-32GB" << 32.0 << "v100-dgx2";
        QTest::newRow("CPU") << "cpu x86_64" << 0.0 << "";
    }

    void presetForDevice()
    {
        QFETCH(QString, device);
        QFETCH(double, memoryGiB);
        QFETCH(QString, preset);
        const auto found = tp::presetForDevice(device.toStdString(), memoryGiB * 1024 * 1024 * 1024);
        QCOMPARE(QString::fromStdString(found.value_or("")), preset);
        if (found) QCOMPARE(tp::loadHardware(*found).name, *found); // a preset that exists
    }

    // The CLI end to end on the synthetic file: the preset from the device name, the plan line
    // and the plan's JSON lists.
    void importedFilePlansAndSaysWhatIsCalibrated()
    {
        QTemporaryDir dir;
        const QString results = dir.filePath("r.json"), hw = dir.filePath("hw.json");
        writeText(results, syntheticResults().dump());
        const Run imported = tpplan({"calibrate", "--import", results, "-o", hw});
        QVERIFY2(imported.code == 0, imported.err.constData());
        QVERIFY(imported.err.isEmpty()); // the device matched a preset: no note
        QCOMPARE(tp::loadHardware(hw.toStdString()).name, std::string("a100-80g-dgx-calibrated"));
        const QStringList plan{"plan", "gpt2", "--set", "layers=2", "--batch", "8", "--hardware", hw};
        const Run text = tpplan(plan);
        QVERIFY2(text.code == 0, text.err.constData());
        const QString line = "  hardware        calibrated: matmul, hbm, min_kernel_us, intra_node/all-reduce; from the preset: "
                             "intra_node/all-gather, intra_node/reduce-scatter, intra_node/all-to-all, inter_node, peak, "
                             "hbm_gib, latency_us\n";
        QVERIFY2(QString::fromUtf8(text.out).contains(line), text.out.constData());
        const Run js = tpplan(plan + QStringList{"--json"});
        QCOMPARE(js.code, 0);
        const json doc = json::parse(js.out.toStdString());
        QCOMPARE(doc["hardware"]["calibrated"].size(), size_t(4));
        QCOMPARE(doc["hardware"]["from_preset"][3].get<std::string>(), std::string("inter_node"));
        // A plan made with it is saved with the hardware embedded and re-checks unchanged.
        const QString planFile = dir.filePath("p.tpplan.json");
        QCOMPARE(tpplan(plan + QStringList{"-o", planFile}).code, 0);
        const Run check = tpplan({"check", planFile});
        QVERIFY2(check.code == 0 && check.out.contains("no differences"), check.out.constData());
        // --base overrides the preset the device name picks.
        const Run based = tpplan({"calibrate", "--import", results, "--base", "h100-dgx"});
        QCOMPARE(based.code, 0);
        QVERIFY(tp::hardwareFromJson(based.out.toStdString(), "stdout").name == "h100-dgx-calibrated");
    }

    // Each malformed results file: exit 2, one line naming the field, and the -o file untouched.
    void malformedResults_data()
    {
        QTest::addColumn<QString>("pointer"); // the field changed ("" with text: the whole file)
        QTest::addColumn<QString>("value");   // JSON; empty: the field is removed
        QTest::addColumn<QString>("message");
        QTest::newRow("not JSON") << ""
                                  << "{ nope"
                                  << "not valid JSON";
        QTest::newRow("missing tflops") << "/gemm/3/tflops"
                                        << ""
                                        << "/gemm/3/tflops: is missing";
        QTest::newRow("tflops a string") << "/gemm/3/tflops"
                                         << "\"fast\""
                                         << "/gemm/3/tflops: must be a positive number";
        QTest::newRow("negative bandwidth") << "/hbm/gbps"
                                            << "-5"
                                            << "/hbm/gbps: must be a positive number, not -5";
        QTest::newRow("zero kernel time") << "/elementwise/seconds"
                                          << "0"
                                          << "/elementwise/seconds: must be a positive number";
        QTest::newRow("empty gemm list") << "/gemm"
                                         << "[]"
                                         << "/gemm: is an empty list";
        QTest::newRow("empty curve") << "/collectives/intra_node/all-reduce"
                                     << "[]"
                                     << "/collectives/intra_node/all-reduce: is an empty list";
        QTest::newRow("sizes not increasing") << "/collectives/intra_node/all-reduce/1/bytes"
                                              << "1024"
                                              << "/collectives/intra_node/all-reduce/1/bytes: sizes must increase";
        QTest::newRow("busbw implausible") << "/collectives/intra_node/all-reduce/0/busbw_gbps"
                                           << "1e9"
                                           << "/collectives/intra_node/all-reduce/0/busbw_gbps: is 1000000000.0, above";
        QTest::newRow("unknown link") << "/collectives/cross_node"
                                      << "{}"
                                      << "/collectives/cross_node: is not a link";
        QTest::newRow("link without curves") << "/collectives/intra_node/all-reduce"
                                             << ""
                                             << "/collectives/intra_node: holds no collective";
        QTest::newRow("missing group size") << "/collectives/intra_node/group_size"
                                            << ""
                                            << "/collectives/intra_node/group_size: is missing";
        QTest::newRow("m not an integer") << "/gemm/0/m"
                                          << "4096.5"
                                          << "/gemm/0/m: must be an integer";
        QTest::newRow("unknown gemm kind") << "/gemm/0/kind"
                                           << "\"huge\""
                                           << "/gemm/0/kind: is 'huge'";
        QTest::newRow("no large shape") << "/gemm/0/kind"
                                        << "\"tp\""
                                        << "/gemm: holds no shape of kind 'large'";
        QTest::newRow("missing device") << "/device"
                                        << ""
                                        << "/device: is missing";
        QTest::newRow("world size zero") << "/world_size"
                                         << "0"
                                         << "/world_size: is 0, must be at least 1";
        QTest::newRow("nodes do not divide") << "/ranks_per_node"
                                             << "3"
                                             << "/ranks_per_node: is 3, which does not divide";
        QTest::newRow("unknown dtype") << "/dtype"
                                       << "\"bf17\""
                                       << "/dtype: 'bf17' is not a dtype";
        QTest::newRow("dry_run a string") << "/dry_run"
                                          << "\"no\""
                                          << "/dry_run: must be true or false";
        QTest::newRow("another format") << "/format"
                                        << "\"tpstudio.plan\""
                                        << "/format: is 'tpstudio.plan'";
        QTest::newRow("newer version") << "/version"
                                       << "2"
                                       << "/version: is 2, newer";
    }

    void malformedResults()
    {
        QFETCH(QString, pointer);
        QFETCH(QString, value);
        QFETCH(QString, message);
        std::string text;
        if (pointer.isEmpty()) {
            text = value.toStdString();
        } else {
            json doc = syntheticResults();
            const json::json_pointer at(pointer.toStdString());
            if (value.isEmpty())
                doc[at.parent_pointer()].erase(at.back());
            else
                doc[at] = json::parse(value.toStdString());
            if (QString(QTest::currentDataTag()) == "no large shape") doc["gemm"][1]["kind"] = "small_k"; // both large ones
            text = doc.dump();
        }
        QTemporaryDir dir;
        const QString results = dir.filePath("results.json"), hw = dir.filePath("hw.json");
        writeText(results, text);
        writeText(hw, "keep me");
        const Run r = tpplan({"calibrate", "--import", results, "-o", hw});
        QCOMPARE(r.code, 2);
        const QString err = QString::fromUtf8(r.err).trimmed();
        QVERIFY2(err.contains(results + ": "), qPrintable(err));
        QVERIFY2(err.contains(message), qPrintable(err));
        QCOMPARE(err.count('\n'), 0);
        QCOMPARE(readText(hw), std::string("keep me"));
    }

    void badFlags_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        QTest::newRow("planning flag") << QStringList{"calibrate", "--mesh", "2x8"}
                                       << "--mesh does not apply to tpplan calibrate";
        QTest::newRow("base without import") << QStringList{"calibrate", "--base", "h100-dgx"} << "--base needs --import";
        QTest::newRow("argument") << QStringList{"calibrate", "results.json"} << "takes no argument 'results.json'";
        QTest::newRow("missing results") << QStringList{"calibrate", "--import", "/nonexistent/r.json"}
                                         << "/nonexistent/r.json: cannot open the file";
        QTest::newRow("import without value") << QStringList{"calibrate", "--import"} << "--import needs a value";
        QTest::newRow("unwritable output") << QStringList{"calibrate", "-o", "/nonexistent/dir/calibrate.py"}
                                           << "/nonexistent/dir/calibrate.py: cannot write the file";
    }

    void badFlags()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        const Run r = tpplan(args);
        QCOMPARE(r.code, 2);
        const QString err = QString::fromUtf8(r.err).trimmed();
        QVERIFY2(err.contains(message), qPrintable(err));
        QCOMPARE(err.count('\n'), 0);
    }

    void unknownBaseNamesTheFlag()
    {
        QTemporaryDir dir;
        const QString results = dir.filePath("r.json");
        writeText(results, syntheticResults().dump());
        const Run r = tpplan({"calibrate", "--import", results, "--base", "nope"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.startsWith("tpplan: --base: hardware 'nope'"), r.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestCalibrate)
#include "tst_calibrate.moc"
