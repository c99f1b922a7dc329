// Meshes and hardware presets: parsing, the hierarchical link assignment (ATP), and the preset
// figures against the published ones each preset cites (resources/hardware/*.json, "sources").
#include <QtTest>

#include "mesh/mesh.h"
#include "util/error.h"

using namespace tp;

class TestMesh : public QObject {
    Q_OBJECT
private slots:
    void parse_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("shape");
        QTest::addColumn<int>("devices");
        QTest::addColumn<QString>("names");
        QTest::newRow("1d") << "8"
                            << "8" << 8 << "x";
        QTest::newRow("2d") << "2x8"
                            << "2x8" << 16 << "xy";
        QTest::newRow("3d") << "4x4x8"
                            << "4x4x8" << 128 << "xyz";
        QTest::newRow("capital X and spaces") << " 2 X 8 "
                                              << "2x8" << 16 << "xy";
        QTest::newRow("multiplication sign") << QString::fromUtf8("8\u00d78") << "8x8" << 64 << "xy";
    }
    void parse()
    {
        QFETCH(QString, text);
        QFETCH(QString, shape);
        QFETCH(int, devices);
        QFETCH(QString, names);
        const Mesh m = parseMesh(text.toStdString(), loadHardware("a100-80g-dgx"));
        QCOMPARE(QString::fromStdString(m.shapeText()), shape);
        QCOMPARE(m.devices(), devices);
        QString got;
        for (const auto& a : m.axes) got += QString::fromStdString(a.name);
        QCOMPARE(got, names);
    }

    void parseErrors_data()
    {
        QTest::addColumn<QString>("text");
        QTest::newRow("empty") << "";
        QTest::newRow("zero") << "0";
        QTest::newRow("trailing x") << "2x";
        QTest::newRow("letters") << "axb";
        QTest::newRow("negative") << "-2";
        QTest::newRow("too many axes") << "2x2x2x2x2";
        QTest::newRow("axis over 65536") << "100000";
        QTest::newRow("sign with nothing after") << QString::fromUtf8("8\u00d7");
    }
    void parseErrors()
    {
        QFETCH(QString, text);
        QVERIFY_THROWS_EXCEPTION(InputError, parseMesh(text.toStdString(), loadHardware("a100-80g-dgx")));
    }

    // ATP's hierarchical model: an axis whose groups stay inside a node gets NVLink, one whose
    // groups span nodes the per-GPU share of the inter-node network. DGX A100 (8 GPUs/node):
    // 2x8: y groups are 8 consecutive GPUs (one node) -> NVLink 235 GB/s; x groups are GPUs
    // 8 apart (two nodes) -> InfiniBand 20 GB/s. 16: one group of 16 spans two nodes -> IB.
    // 8x2: y (pairs) in a node; x spans 8 pairs = 16 GPUs -> IB. 4x2: everything in one node.
    void links_data()
    {
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<QString>("crosses"); // per axis: N (NVLink) or I (InfiniBand)
        QTest::newRow("2x8") << "2x8"
                             << "IN";
        QTest::newRow("16") << "16"
                            << "I";
        QTest::newRow("8") << "8"
                           << "N";
        QTest::newRow("8x2") << "8x2"
                             << "IN";
        QTest::newRow("4x2") << "4x2"
                             << "NN";
        QTest::newRow("4x4x8") << "4x4x8"
                               << "IIN";
    }
    void links()
    {
        QFETCH(QString, mesh);
        QFETCH(QString, crosses);
        const Hardware hw = loadHardware("a100-80g-dgx");
        const Mesh m = parseMesh(mesh.toStdString(), hw);
        for (int a = 0; a < m.rank(); ++a) {
            const bool ib = crosses[a] == 'I';
            const auto& axis = m.axes[static_cast<size_t>(a)];
            QCOMPARE(axis.crossesNodes, ib);
            QCOMPARE(axis.link.bandwidth, ib ? 20e9 : 235e9);
            QCOMPARE(axis.link.latency, ib ? hw.interNode.latency : hw.intraNode.latency);
        }
    }

    // Published figures (each preset's "sources"). HBM capacity: NVIDIA's marketed "GB" for HBM is the binary unit
    // (nvidia-smi shows an A100 80GB as 81920 MiB = 80 GiB; an H200 "141GB" as 143771 MiB =
    // 140.4 GiB), so capacities are compared in GiB. Link bandwidths are bus bandwidths:
    // the measured nccl busbw where one is published (DGX A100 235 GB/s; NVLink4 ring
    // 367 GB/s), else ~80% of the unidirectional link (stas00's rule): V100 NVLink2 150 -> 120;
    // per-GPU IB: A100 200 GB/s per node / 8 = 25 -> 20; H100/H200 400 / 8 = 50 -> 40;
    // DGX-2H 100 GB/s per 16-GPU server -> 6.25 -> 5; PCIe Gen4 31 -> 25.
    void presets_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<double>("bf16Tflops");
        QTest::addColumn<double>("hbmGiB");
        QTest::addColumn<double>("hbmGBps");
        QTest::addColumn<double>("nvlinkGBps");
        QTest::addColumn<double>("ibGBps");
        QTest::addColumn<int>("gpusPerNode");
        QTest::newRow("v100-dgx2") << "v100-dgx2" << 125.0 << 32.0 << 900.0 << 120.0 << 5.0 << 16;
        QTest::newRow("a100-40g-dgx") << "a100-40g-dgx" << 312.0 << 40.0 << 1555.0 << 235.0 << 20.0 << 8;
        QTest::newRow("a100-80g-dgx") << "a100-80g-dgx" << 312.0 << 80.0 << 2039.0 << 235.0 << 20.0 << 8;
        QTest::newRow("h100-dgx") << "h100-dgx" << 989.0 << 80.0 << 3350.0 << 367.0 << 40.0 << 8;
        // torchtitan's benchmark page (reference.md): H100 96 GB HBM2e at 2.4 TB/s, NVLink, 400 Gb/s per GPU.
        QTest::newRow("h100-96g-hbm2e") << "h100-96g-hbm2e" << 989.0 << 96.0 << 2400.0 << 367.0 << 40.0 << 8;
        QTest::newRow("h200-dgx") << "h200-dgx" << 989.0 << 141.0 << 4800.0 << 367.0 << 40.0 << 8;
        QTest::newRow("a100-pcie") << "a100-pcie" << 312.0 << 80.0 << 1935.0 << 25.0 << 1.25 << 8;
        // reference.md "Newer hardware" and the vendors' sheets: B200 2250 TF, 180 GB, ~8 TB/s,
        // the measured 8x B200 all-reduce busbw 846 GB/s, 400 Gb/s per GPU x 0.8; GB200 NVL72
        // 2500 TF, 186 GB, 72 GPUs in one NVLink domain; MI300X 1307 TF, 192 GB, 5.3 TB/s, one
        // Infinity Fabric link 64 GB/s x 0.8 = 51.2; TPU v5p 459 TF, 95 GB, 2.76 TB/s, an ICI axis
        // 2 x 100 GB/s x 0.8 = 160; H100 PCIe 756 TF, 2.0 TB/s, PCIe Gen5 63 x 0.8 = 50; L40S
        // 362 TF, 48 GB, 864 GB/s, PCIe Gen4 31 x 0.8 = 25.
        QTest::newRow("b200-dgx") << "b200-dgx" << 2250.0 << 180.0 << 8000.0 << 846.0 << 40.0 << 8;
        QTest::newRow("gb200-nvl72") << "gb200-nvl72" << 2500.0 << 186.0 << 8000.0 << 846.0 << 40.0 << 72;
        QTest::newRow("mi300x") << "mi300x" << 1307.0 << 192.0 << 5300.0 << 51.2 << 40.0 << 8;
        QTest::newRow("tpu-v5p") << "tpu-v5p" << 459.0 << 95.0 << 2765.0 << 160.0 << 6.25 << 8960;
        QTest::newRow("h100-pcie") << "h100-pcie" << 756.0 << 80.0 << 2000.0 << 50.0 << 5.0 << 8;
        QTest::newRow("l40s") << "l40s" << 362.0 << 48.0 << 864.0 << 25.0 << 2.5 << 8;
    }

    // A full mesh of peer links (MI300X): a group of m GPUs of a node uses its m - 1 links to its
    // peers, 51.2 GB/s each; a switch (B200) gives every group the same bandwidth. On 2x4 the y
    // groups (4 GPUs) get 3 x 51.2 = 153.6 GB/s and the x groups (2) 51.2; on 8, 7 x 51.2 =
    // 358.4; on 16 the axis crosses nodes at 40 GB/s and reduces inside each node over 358.4.
    void fullMeshLinksScaleWithTheGroup_data()
    {
        QTest::addColumn<QString>("hardware");
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<QList<double>>("axisGBps");
        QTest::addColumn<double>("nodeLinkGBps"); // the first axis's in-node part
        QTest::newRow("mi300x 2x4") << "mi300x" << "2x4" << QList<double>{51.2, 153.6} << 51.2;
        QTest::newRow("mi300x 8") << "mi300x" << "8" << QList<double>{358.4} << 358.4;
        QTest::newRow("mi300x 16") << "mi300x" << "16" << QList<double>{40.0} << 358.4;
        QTest::newRow("b200 2x4") << "b200-dgx" << "2x4" << QList<double>{846.0, 846.0} << 846.0;
        QTest::newRow("nvl72 9x8") << "gb200-nvl72" << "9x8" << QList<double>{846.0, 846.0} << 846.0;
    }
    void fullMeshLinksScaleWithTheGroup()
    {
        QFETCH(QString, hardware);
        QFETCH(QString, mesh);
        QFETCH(QList<double>, axisGBps);
        QFETCH(double, nodeLinkGBps);
        const Mesh m = parseMesh(mesh.toStdString(), loadHardware(hardware.toStdString()));
        QCOMPARE(m.rank(), int(axisGBps.size()));
        for (int a = 0; a < m.rank(); ++a)
            QVERIFY2(std::abs(m.axes[size_t(a)].link.bandwidth / (axisGBps[a] * 1e9) - 1) < 1e-12,
                     qPrintable(QString::number(m.axes[size_t(a)].link.bandwidth)));
        QVERIFY(std::abs(m.axes[0].nodeLink.bandwidth / (nodeLinkGBps * 1e9) - 1) < 1e-12);
        // The file round-trips with its topology.
        const Hardware hw = loadHardware(hardware.toStdString());
        QCOMPARE(hardwareFromJson(hardwareToJsonText(hw), "again").intraTopology, hw.intraTopology);
    }
    void presets()
    {
        QFETCH(QString, name);
        QFETCH(double, bf16Tflops);
        QFETCH(double, hbmGiB);
        QFETCH(double, hbmGBps);
        QFETCH(double, nvlinkGBps);
        QFETCH(double, ibGBps);
        QFETCH(int, gpusPerNode);
        const Hardware hw = loadHardware(name.toStdString());
        auto near = [](double a, double b) { return std::abs(a / b - 1) < 0.01; };
        QVERIFY(near(hw.peak(DType::BF16), bf16Tflops * 1e12));
        QVERIFY2(near(hw.hbmBytes, hbmGiB * 1024 * 1024 * 1024), qPrintable(QString::number(hw.hbmBytes)));
        QVERIFY(near(hw.hbmBandwidth, hbmGBps * 1e9));
        QVERIFY(near(hw.intraNode.bandwidth, nvlinkGBps * 1e9));
        QVERIFY(near(hw.interNode.bandwidth, ibGBps * 1e9));
        QCOMPARE(hw.gpusPerNode, gpusPerNode);
        QVERIFY(hw.matmulEfficiency > 0.5 && hw.matmulEfficiency <= 1);
    }

    void presetNames()
    {
        const auto names = hardwarePresetNames();
        for (const char* n : {"v100-dgx2", "a100-40g-dgx", "a100-80g-dgx", "h100-dgx", "h100-96g-hbm2e", "h200-dgx", "a100-pcie", "b200-dgx",
                              "gb200-nvl72", "mi300x", "tpu-v5p", "h100-pcie", "l40s"})
            QVERIFY2(std::find(names.begin(), names.end(), n) != names.end(), n);
        // MAMF (stas00): A100 271.2 of 312 TF/s = 86.9%; H100 794.5 of 989 = 80.3%.
        QCOMPARE(loadHardware("a100-80g-dgx").matmulEfficiency, 0.869);
        QCOMPARE(loadHardware("h100-dgx").matmulEfficiency, 0.803);
    }

    void hardwareErrors()
    {
        QVERIFY_THROWS_EXCEPTION(InputError, loadHardware("no-such-gpu"));
        try {
            hardwareFromJson(R"({"peak_tflops": {"bf16": 1}, "matmul_efficiency": 0.5})", "mine.json");
            QFAIL("expected an error");
        } catch (const InputError& e) {
            QVERIFY2(QString(e.what()).contains("hbm_gib"), e.what());
        }
    }
};

QTEST_APPLESS_MAIN(TestMesh)
#include "tst_mesh.moc"
