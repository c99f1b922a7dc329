// Plan exports: CSV, the annotated folded graph (DOT/SVG/PNG), PyTorch DTensor script, Megatron-LM
// arguments and the Hugging Face tp plan.
#include <QtTest>

#include <fstream>

#include "export/export_plan.h"
#include "export/export_styles.h"
#include "import/catalog.h"
#include "plan/plan_file.h"
#include "plan/planner.h"
#include "util/error.h"

using namespace tp;

namespace {

// A python3 that imports torch (the system one has PyTorch 1.13), or empty.
QString pythonWithTorch()
{
    for (const QString& candidate : {QStringLiteral("/usr/bin/python3"), QStandardPaths::findExecutable("python3")}) {
        if (candidate.isEmpty() || !QFileInfo::exists(candidate)) continue;
        QProcess probe;
        probe.start(candidate, {"-c", "import torch"});
        if (probe.waitForFinished(60000) && probe.exitCode() == 0) return candidate;
    }
    return {};
}

// A plan as a file would give it back: planned, written, read.
LoadedPlan planned(const std::string& model, const std::string& mesh, const std::string& baseline, int layers = 2,
                   std::int64_t batch = 8)
{
    PlanRequest request;
    request.model = model;
    request.mesh = mesh;
    request.baseline = baseline;
    request.modelOptions.batch = batch;
    if (layers > 0 && builtinModelConfig(model).contains("layers"))
        request.modelOptions.overrides.push_back("layers=" + std::to_string(layers));
    auto ws = preparePlan(request);
    const SearchResult r = runPlan(*ws, request);
    return readPlanFile(writePlanFile(planToJson(ws->context, *ws->costModel, ws->folded, r)), model);
}

std::string readAll(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll().toStdString() : std::string();
}

std::uint32_t bigEndian(const std::string& bytes, size_t at)
{
    std::uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
    return v;
}

/// Overrides that make a small model of `model`'s family: none for gpt2; Gemma-3 with two local
/// layers to one global; DeepSeek-V3 with 2 dense layers and 4 experts.
std::vector<std::string> smallOf(const std::string& model)
{
    if (model == "gemma3-27b")
        return {"hidden=256", "heads=4", "kv_heads=2",    "head_dim=64",       "ffn=1024",
                "vocab=1024", "seq=128", "positions=128", "sliding_window=32", "global_every=3"};
    if (model == "deepseek-v3")
        return {"dense_layers=2",
                "hidden=64",
                "heads=4",
                "kv_heads=4",
                "ffn=128",
                "vocab=256",
                "q_lora_rank=32",
                "kv_lora_rank=16",
                "qk_nope_head_dim=16",
                "qk_rope_head_dim=8",
                "v_head_dim=16",
                "experts=4",
                "experts_per_token=2",
                "expert_ffn=32",
                "shared_expert_ffn=32",
                "seq=32",
                "positions=32"};
    return {};
}

} // namespace

class TestExport : public QObject {
    Q_OBJECT
private slots:
    void csvHasARowPerOpAndPerClass()
    {
        const LoadedPlan plan = planned("gpt2", "2x4", "megatron");
        const std::string csv = exportCsv(*plan.workspace, plan.result);
        const QStringList lines = QString::fromStdString(csv).split('\n');
        const Graph& g = plan.workspace->model.graph;
        const auto& classes = plan.workspace->folded.classes;
        // header + ops, blank, header + classes, trailing newline
        QCOMPARE(lines.size(), int(1 + g.ops.size() + 1 + 1 + classes.size() + 1));
        QVERIFY(lines[0].startsWith("op,block,instance,kind,einsum,strategy,sharding,output_spec"));
        QVERIFY(lines[0].contains("param_bytes,grad_bytes,optimizer_bytes,activation_bytes,memory_bytes"));
        const int fc1 = lines.indexOf(QRegularExpression("^layers\\.0/mlp/fc1,.*"));
        QVERIFY(fc1 > 0);
        QVERIFY2(lines[fc1].contains(",\"b=x,f=y\",column-parallel,\"[x,-,y]\","), qPrintable(lines[fc1]));
        // Per-class memory totals add up to the ops' memory.
        double opsMemory = 0, classMemory = 0;
        for (int i = 1; i <= int(g.ops.size()); ++i) opsMemory += lines[i].split(',').last().toDouble();
        for (int i = int(g.ops.size()) + 3; i < lines.size() - 1; ++i) classMemory += lines[i].split(',').last().toDouble();
        QVERIFY(opsMemory > 0);
        QVERIFY(std::abs(opsMemory - classMemory) <= 1e-6 * opsMemory);
    }

    // The CSV's sharding column is the one classifier's answer (core/sharding/classify.h via
    // classifyOp) for every op; the GUI colours the same call (tst_gui
    // candidateColoursAreTheExportClass). Plain data parallelism on the loss reads as such.
    void csvShardingColumnIsTheClassifier()
    {
        const LoadedPlan plan = planned("gpt2", "2x4", "megatron");
        const PlanWorkspace& ws = *plan.workspace;
        const CostModel& model = *ws.costModel;
        const Graph& g = model.graph();
        const QStringList lines = QString::fromStdString(exportCsv(ws, plan.result)).split('\n');
        auto quoted = [](const std::string& t) {
            return t.find(',') == std::string::npos ? QString::fromStdString(t) : "\"" + QString::fromStdString(t) + "\"";
        };
        for (OpId op = 0; op < static_cast<OpId>(g.ops.size()); ++op) {
            const int s = plan.result.strategyOfOp[static_cast<size_t>(op)];
            const std::string strategy =
                strategyToString(model.strategies(op)[static_cast<size_t>(s)], model.signature(op), model.mesh());
            const QString expected = "," + quoted(strategy) + "," +
                                     QString::fromStdString(std::string(shardClassName(classifyOp(model, op, s).kind))) + ",";
            const int row = lines.indexOf(
                QRegularExpression("^" + QRegularExpression::escape(QString::fromStdString(g.op(op).name)) + ",.*"));
            QVERIFY(row > 0);
            QVERIFY2(lines[row].contains(expected), qPrintable(lines[row] + " lacks " + expected));
        }
        // Megatron puts the batch on x everywhere: the loss "b=x" is data parallel, not row-parallel.
        const int loss = lines.indexOf(QRegularExpression("^head/loss,.*"));
        QVERIFY(loss > 0);
        // (With the vocabulary padded for the mesh the head splits it over y, and the loss then
        // takes its batch over both axes: still data parallel.)
        QVERIFY2(lines[loss].contains(QRegularExpression(",b=x(\\*y)?,data-parallel,")), qPrintable(lines[loss]));
    }

    // The folded graph: one cluster per block class labelled with its repeat count, every
    // representative op once, sharding colours, collectives on edges.
    void foldedGraphDescription()
    {
        const LoadedPlan plan = planned("gpt2", "2x4", "megatron", 4);
        const LayoutInput in = foldedPlanGraph(*plan.workspace, plan.result);
        const FoldedGraph& folded = plan.workspace->folded;
        QCOMPARE(in.clusters.size(), folded.classes.size() + 1); // + legend
        bool layersCluster = false;
        for (const auto& c : in.clusters) layersCluster = layersCluster || c.label == "layers.*  ×4";
        QVERIFY(layersCluster);
        size_t opNodes = 0;
        for (const auto& n : in.nodes) opNodes += n.id.starts_with("op");
        QCOMPARE(opNodes, size_t(folded.searchedOps()));
        auto node = [&](const std::string& label) -> const LayoutNode* {
            for (const auto& n : in.nodes)
                if (n.label.starts_with(label + "\n")) return &n;
            return nullptr;
        };
        QVERIFY(node("mlp.fc1") && node("mlp.fc2") && node("ln1"));
        QCOMPARE(node("mlp.fc1")->fillColor, std::string(shardClassColor(ShardClass::Column)));
        QCOMPARE(node("mlp.fc2")->fillColor, std::string(shardClassColor(ShardClass::Row)));
        QCOMPARE(node("ln1")->fillColor, std::string(shardClassColor(ShardClass::Data)));
        // Row-parallel fc2 is followed by an all-reduce over y on its outgoing edge.
        bool allReduceAfterFc2 = false;
        for (const auto& e : in.edges)
            if (e.from == node("mlp.fc2")->id && e.label.starts_with("AR y")) allReduceAfterFc2 = true;
        QVERIFY(allReduceAfterFc2);
    }

    void imagesRender_data()
    {
        QTest::addColumn<QString>("format");
        QTest::newRow("svg") << "svg";
        QTest::newRow("png") << "png";
        QTest::newRow("dot") << "dot";
    }

    void imagesRender()
    {
        QFETCH(QString, format);
        const LoadedPlan plan = planned("gpt3-175b", "8x8", "megatron", 96, 64);
        const std::string bytes = exportPlan(*plan.workspace, plan.result, format.toStdString());
        QVERIFY(bytes.size() > 5000);
        if (format == "png") {
            QVERIFY(bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
            const std::uint32_t width = bigEndian(bytes, 16), height = bigEndian(bytes, 20);
            QVERIFY2(width > 400 && width < 6000 && height > 600 && height < 12000,
                     qPrintable(QStringLiteral("%1 x %2").arg(width).arg(height)));
        } else if (format == "svg") {
            QVERIFY(bytes.find("<svg") != std::string::npos);
            QVERIFY(bytes.find("layers.*") != std::string::npos && bytes.find("×96") != std::string::npos);
            QVERIFY(bytes.find("mlp.fc1") != std::string::npos);
        } else {
            QVERIFY(bytes.starts_with("digraph G {"));
            QVERIFY(bytes.find("\"cluster_c1\"") != std::string::npos);
        }
    }

    // Column/row choices map to the right styles on a Megatron plan of GPT.
    void pytorchStyles_data()
    {
        QTest::addColumn<QString>("module");
        QTest::addColumn<QString>("style");
        QTest::newRow("q") << "layers.*.attn.q"
                           << "ColwiseParallel()";
        QTest::newRow("k") << "layers.*.attn.k"
                           << "ColwiseParallel()";
        QTest::newRow("out") << "layers.*.attn.out"
                             << "RowwiseParallel()";
        QTest::newRow("fc1") << "layers.*.mlp.fc1"
                             << "ColwiseParallel()";
        QTest::newRow("fc2") << "layers.*.mlp.fc2"
                             << "RowwiseParallel()";
    }

    void pytorchStyles()
    {
        QFETCH(QString, module);
        QFETCH(QString, style);
        const LoadedPlan plan = planned("gpt3-1.3b", "8", "megatron");
        const QString py = QString::fromStdString(exportPytorch(*plan.workspace, plan.result));
        QVERIFY2(py.contains("    \"" + module + "\": " + style + ",\n"), qPrintable(py));
        QVERIFY(py.contains("init_device_mesh(device_type, MESH_SHAPE, mesh_dim_names=MESH_DIM_NAMES)"));
        QVERIFY(py.contains("MESH_SHAPE = (8,)"));
        // Layer norms stay replicated: no style for them.
        QVERIFY(!py.contains("\"layers.*.ln1\""));
    }

    // Sequence parallelism: norms get SequenceParallel, row-parallel outputs reduce-scatter.
    void pytorchSequenceParallel()
    {
        const LoadedPlan plan = planned("gpt3-1.3b", "8", "megatron-sp");
        const QString py = QString::fromStdString(exportPytorch(*plan.workspace, plan.result));
        QVERIFY2(py.contains("\"layers.*.ln1\": SequenceParallel(),"), qPrintable(py));
        QVERIFY(py.contains("\"layers.*.mlp.fc2\": RowwiseParallel(output_layouts=Shard(1)),"));
        QVERIFY(py.contains("\"layers.*.mlp.fc1\": ColwiseParallel(input_layouts=Shard(1)),"));
        QVERIFY(exportMegatron(*plan.workspace, plan.result).find("--sequence-parallel\n") != std::string::npos);
    }

    void pytorchCompiles_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<QString>("baseline");
        QTest::newRow("gpt3-175b searched") << "gpt3-175b"
                                            << "8x8"
                                            << "";
        QTest::newRow("gpt3-175b megatron") << "gpt3-175b"
                                            << "8x8"
                                            << "megatron";
        QTest::newRow("llama2-7b searched") << "llama2-7b"
                                            << "2x8"
                                            << "";
        QTest::newRow("llama3-8b megatron-sp") << "llama3-8b"
                                               << "8"
                                               << "megatron-sp";
        QTest::newRow("resnet50 dp") << "resnet50"
                                     << "8"
                                     << "dp";
    }

    void pytorchCompiles()
    {
        QFETCH(QString, model);
        QFETCH(QString, mesh);
        QFETCH(QString, baseline);
        const QString python = QStandardPaths::findExecutable("python3");
        if (python.isEmpty()) QSKIP("python3 is not installed");
        const LoadedPlan plan = planned(model.toStdString(), mesh.toStdString(), baseline.toStdString(), 4, 64);
        QTemporaryDir dir;
        const QString file = dir.filePath("plan.py");
        std::ofstream(file.toStdString()) << exportPytorch(*plan.workspace, plan.result);
        QProcess p;
        p.start(python, {"-m", "py_compile", file});
        QVERIFY(p.waitForFinished(60000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    }

    // An expert-parallel plan (Mixtral on 8 devices: the experts split 8 ways, everything else
    // data parallel) exports its expert modules and apply_expert_parallel, which keeps 1/8 of
    // every stacked expert parameter (dim 0) on each device and leaves the others whole. Run with
    // PyTorch 1.13 on a toy model, DTensor stubbed: distribute_tensor keeps rank 3's chunk.
    void pytorchExpertParallelSplitsExperts()
    {
        const QString python = pythonWithTorch();
        if (python.isEmpty()) QSKIP("no python3 with torch");
        PlanRequest request;
        request.model = "mixtral-8x7b";
        request.modelOptions.batch = 64;
        request.modelOptions.overrides = {"layers=2", "seq=1024"};
        request.mesh = "8";
        request.hardware = "h200-dgx";
        request.pipeline = 1;
        request.locks = {"*/moe/experts/*=e=x"};
        const PlannerResult planned = Planner().plan(request);
        const std::string script = exportPytorch(*planned.workspace, planned.result);
        QVERIFY(script.find("EP_DIMS = (\"x\",)") != std::string::npos);
        QVERIFY(script.find("EXPERT_MODULES = (\"layers.*.moe.experts\",)") != std::string::npos);
        QVERIFY2(script.find("inexpressible") == std::string::npos && script.find("cannot express") == std::string::npos,
                 script.c_str());
        // Megatron-Core's MoE arguments: 8 experts, top-2, expert-parallel over all 8 ranks.
        const std::string args = exportMegatron(*planned.workspace, planned.result);
        for (const char* line : {"--num-experts 8\n", "--moe-router-topk 2\n", "--expert-model-parallel-size 8\n"})
            QVERIFY2(args.find(line) != std::string::npos, args.c_str());
        QTemporaryDir dir;
        std::ofstream(dir.filePath("plan.py").toStdString()) << script;
        const std::string driver = R"PY(
import sys, types
import torch, torch.nn as nn
for name in ("torch.distributed.device_mesh", "torch.distributed.tensor", "torch.distributed.tensor.parallel"):
    stub = types.ModuleType(name)
    for attr in ("init_device_mesh", "Replicate", "Shard", "ColwiseParallel", "PrepareModuleInput",
                 "RowwiseParallel", "SequenceParallel", "parallelize_module"):
        setattr(stub, attr, lambda *a, **k: None)
    sys.modules[name] = stub
sys.modules["torch.distributed.tensor"].distribute_tensor = lambda t, m, p: t.chunk(m.size, 0)[m.rank].clone()
class Mesh:
    size, rank = 8, 3
plan = {}
exec(open(sys.argv[1]).read(), plan)
class Experts(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_up = nn.Module()
        self.gate_up.weight = nn.Parameter(torch.arange(8.0).view(8, 1, 1, 1).expand(8, 4, 2, 6).clone())
        self.down = nn.Module()
        self.down.weight = nn.Parameter(torch.zeros(8, 6, 4))
class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(4, 8)
        self.moe = nn.Module()
        self.moe.experts = Experts()
class Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Layer() for _ in range(2))
toy = Toy()
plan["apply_expert_parallel"](toy, {"x": Mesh()})
for name, p in toy.named_parameters():
    print(name, "x".join(str(d) for d in p.shape), int(p.flatten()[0]) if "gate_up" in name else "")
)PY";
        std::ofstream(dir.filePath("driver.py").toStdString()) << driver;
        QProcess p;
        p.start(python, {dir.filePath("driver.py"), dir.filePath("plan.py")});
        QVERIFY(p.waitForFinished(120000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
        const QString out = QString(p.readAllStandardOutput());
        for (const char* layer : {"layers.0", "layers.1"}) {
            QVERIFY2(out.contains(QString("%1.moe.experts.gate_up.weight 1x4x2x6 3").arg(layer)), qPrintable(out)); // expert 3 of 8
            QVERIFY2(out.contains(QString("%1.moe.experts.down.weight 1x6x4").arg(layer)), qPrintable(out));
            QVERIFY2(out.contains(QString("%1.router.weight 8x4").arg(layer)), qPrintable(out)); // not an expert: whole
        }
    }

    // The exported pipeline cuts the model as the plan does: every virtual stage its layers (k * P
    // + r on rank r), the first-stage modules on the first only, the last-stage ones on the last.
    // Run on a toy model with PyTorch 1.13 (the torch 2 imports the script needs are stubbed: only
    // pipeline_stage_module runs), for 1F1B with uneven stages and for interleaving.
    void pytorchPipelineCutsStages_data()
    {
        QTest::addColumn<int>("layers");
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<int>("stages");
        QTest::addColumn<QString>("schedule");
        QTest::addColumn<QString>("expected"); // layers of each virtual stage
        QTest::addColumn<QString>("stageLayers");
        QTest::addColumn<QString>("model"); // gpt2, or a small one of the model of that name (smallOf)
        // 10 layers over 4 stages: 2, 3, 3, 2 (the extra layers to the middle stages).
        QTest::newRow("1F1B, uneven") << 10 << "4x2" << 4 << "1f1b"
                                      << "2 3 3 2"
                                      << "even"
                                      << "gpt2";
        QTest::newRow("interleaved") << 8 << "2x2" << 2 << "interleaved:2"
                                     << "2 2 2 2"
                                     << "even"
                                     << "gpt2";
        // Boundaries given: 1 and 3 at the ends, 10 - 4 = 6 over the two middle stages.
        QTest::newRow("1F1B, ends given") << 10 << "4x2" << 4 << "1f1b"
                                          << "1 3 3 3"
                                          << "1,3"
                                          << "gpt2";
        // 12 layers as 6 + 2 + 4 over 3 stages of 2 chunks: rank r's chunk k is virtual
        // stage k * 3 + r, with half its layers.
        QTest::newRow("interleaved, ends given") << 12 << "6x1" << 3 << "interleaved:2"
                                                 << "3 1 2 3 1 2"
                                                 << "6,4"
                                                 << "gpt2";
        // Two local layers to one global, 14 layers: 4 patterns of 3 over 2 stages, the two
        // layers after the last whole pattern on the last stage: 6 and 6 + 2.
        QTest::newRow("layer kinds") << 14 << "2x2" << 2 << "1f1b"
                                     << "6 8"
                                     << "even"
                                     << "gemma3-27b";
        // Two dense layers before 6 MoE layers, which the stages split 3 and 3: 2 + 3 and 3.
        QTest::newRow("dense layers first") << 8 << "2x2" << 2 << "1f1b"
                                            << "5 3"
                                            << "even"
                                            << "deepseek-v3";
    }
    void pytorchPipelineCutsStages()
    {
        QFETCH(int, layers);
        QFETCH(QString, mesh);
        QFETCH(int, stages);
        QFETCH(QString, schedule);
        QFETCH(QString, expected);
        QFETCH(QString, stageLayers);
        QFETCH(QString, model);
        const QString python = pythonWithTorch();
        if (python.isEmpty()) QSKIP("no python3 with torch");
        PlanRequest request;
        request.model = model.toStdString();
        request.modelOptions.batch = 8;
        request.modelOptions.overrides = smallOf(request.model);
        request.modelOptions.overrides.push_back("layers=" + std::to_string(layers));
        request.mesh = mesh.toStdString();
        request.pipeline = stages;
        request.schedule = schedule.toStdString();
        request.stageLayers = stageLayers.toStdString();
        request.microBatch = 1;
        const PlannerResult planned = Planner().plan(request);
        QVERIFY(planned.pipeline);
        const std::string script = exportPytorch(*planned.workspace, planned.result);
        QVERIFY(script.find("def apply_pipelined_plan(") != std::string::npos);
        QTemporaryDir dir;
        std::ofstream(dir.filePath("plan.py").toStdString()) << script;
        const std::string driver = R"PY(
import sys, types
import torch.nn as nn
for name in ("torch.distributed.device_mesh", "torch.distributed.tensor", "torch.distributed.tensor.parallel"):
    stub = types.ModuleType(name)
    for attr in ("init_device_mesh", "Replicate", "Shard", "ColwiseParallel", "PrepareModuleInput",
                 "RowwiseParallel", "SequenceParallel", "parallelize_module"):
        setattr(stub, attr, lambda *a, **k: None)
    sys.modules[name] = stub
plan = {}
exec(open(sys.argv[1]).read(), plan)
n = sum(plan["PP_LAYERS_OF_STAGE"])
class Toy(nn.Module):
    def __init__(self):
        super().__init__()
        for name in plan["PP_FIRST_STAGE_MODULES"] + plan["PP_LAST_STAGE_MODULES"]:
            setattr(self, name, nn.Linear(2, 2))
        self.layers = nn.ModuleList(nn.Linear(2, 2, bias=False) for _ in range(n))
        for i, layer in enumerate(self.layers):
            layer.weight.data.fill_(i)
toy = Toy()
out = []
for index in range(len(plan["PP_LAYERS_OF_STAGE"])):
    stage = plan["pipeline_stage_module"](toy, index)
    first = [name for name in plan["PP_FIRST_STAGE_MODULES"] if getattr(stage, name) is not None]
    last = [name for name in plan["PP_LAST_STAGE_MODULES"] if getattr(stage, name) is not None]
    ids = [int(layer.weight[0, 0]) for layer in stage.layers]
    assert ids == list(range(ids[0], ids[0] + len(ids))) if ids else True, ids
    out.append(f"{len(ids)}:{ids[0] if ids else -1}:{int(bool(first))}{int(bool(last))}")
print(" ".join(out))
)PY";
        std::ofstream(dir.filePath("driver.py").toStdString()) << driver;
        QProcess p;
        p.start(python, {dir.filePath("driver.py"), dir.filePath("plan.py")});
        QVERIFY(p.waitForFinished(120000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
        const QStringList got = QString(p.readAllStandardOutput()).trimmed().split(' ');
        const QStringList counts = expected.split(' ');
        QCOMPARE(got.size(), counts.size());
        int first = 0;
        for (int i = 0; i < got.size(); ++i) {
            const QStringList f = got[i].split(':');
            QCOMPARE(f[0], counts[i]);                  // its layers
            QCOMPARE(f[1].toInt(), first);              // in order: virtual stage i starts where i - 1 ends
            QCOMPARE(f[2], QString("%1%2").arg(i == 0 ? 1 : 0).arg(i == got.size() - 1 ? 1 : 0));
            first += counts[i].toInt();
        }
    }

    // Uneven boundaries as Megatron-LM sets them: the first and last stage's layers, with the
    // number of chunks per rank instead of layers per chunk (which then differs by stage).
    void megatronUnevenStages_data()
    {
        QTest::addColumn<QString>("schedule");
        QTest::addColumn<QString>("stageLayers");
        QTest::addColumn<QStringList>("lines"); // "!" first: must not be there
        QTest::newRow("even") << "1f1b" << "even"
                              << QStringList{"--pipeline-model-parallel-size 3\n", "!--decoder-first-pipeline-num-layers"};
        QTest::newRow("ends given") << "1f1b" << "2,6"
                                    << QStringList{"--decoder-first-pipeline-num-layers 2\n",
                                                   "--decoder-last-pipeline-num-layers 6\n"};
        QTest::newRow("ends given, interleaved")
            << "interleaved:2" << "6,2"
            << QStringList{"--decoder-first-pipeline-num-layers 6\n", "--num-virtual-stages-per-pipeline-rank 2\n",
                           "!--num-layers-per-virtual-pipeline-stage"};
        QTest::newRow("even, interleaved") << "interleaved:2" << "even"
                                           << QStringList{"--num-layers-per-virtual-pipeline-stage 2\n", "!--decoder-first"};
    }
    void megatronUnevenStages()
    {
        QFETCH(QString, schedule);
        QFETCH(QString, stageLayers);
        QFETCH(QStringList, lines);
        PlanRequest request;
        request.model = "gpt2";
        request.modelOptions.batch = 6;
        request.modelOptions.overrides.push_back("layers=12");
        request.mesh = "3x2";
        request.pipeline = 3;
        request.schedule = schedule.toStdString();
        request.stageLayers = stageLayers.toStdString();
        request.microBatch = 1;
        const PlannerResult planned = Planner().plan(request);
        QVERIFY(planned.pipeline);
        const QString args = QString::fromStdString(exportMegatron(*planned.workspace, planned.result));
        for (const QString& line : lines) {
            if (line.startsWith('!')) QVERIFY2(!args.contains(line.mid(1)), qPrintable(args));
            else QVERIFY2(args.contains(line), qPrintable(args));
        }
    }

    // One output pinned byte for byte.
    void golden()
    {
        const LoadedPlan plan = readPlanFile(readAll(TP_TEST_DATA "/plans_valid/gpt2_megatron_2x4.tpplan.json"), "golden");
        const std::string py = exportPytorch(*plan.workspace, plan.result);
        const std::string expected = readAll(TP_TEST_DATA "/golden/gpt2_megatron_2x4.py");
        if (py != expected) {
            std::ofstream(QDir::temp().filePath("gpt2_megatron_2x4.py").toStdString()) << py;
            QFAIL("the export differs from tests/data/golden/gpt2_megatron_2x4.py (new output in the temp dir)");
        }
    }

    void megatronShapedOrNot()
    {
        const LoadedPlan megatron = readPlanFile(readAll(TP_TEST_DATA "/plans_valid/gpt2_megatron_2x4.tpplan.json"), "m");
        const std::string args = exportMegatron(*megatron.workspace, megatron.result);
        QVERIFY2(args.find("The plan is Megatron-shaped") != std::string::npos, args.c_str());
        QVERIFY(args.find("--tensor-model-parallel-size 4\n") != std::string::npos);
        QVERIFY(args.find("# data parallel size 2 ") != std::string::npos);
        QVERIFY(args.find("--sequence-parallel") == std::string::npos);
        const LoadedPlan edited = readPlanFile(readAll(TP_TEST_DATA "/plans_valid/gpt2_megatron_2x4_fc1_row.tpplan.json"), "e");
        const std::string other = exportMegatron(*edited.workspace, edited.result);
        QVERIFY(other.find("NOT Megatron-shaped") != std::string::npos);
        QVERIFY2(other.find("layers.*.mlp.fc1: the plan is row-parallel over y, Megatron-LM column-parallel") !=
                     std::string::npos,
                 other.c_str());
    }

    void hfTpPlan()
    {
        const LoadedPlan plan = readPlanFile(readAll(TP_TEST_DATA "/plans_valid/gpt2_megatron_2x4.tpplan.json"), "m");
        const auto doc = nlohmann::json::parse(exportHfTpPlan(*plan.workspace, plan.result));
        QCOMPARE(doc["layers.*.attn.q"].get<std::string>(), std::string("colwise"));
        QCOMPARE(doc["layers.*.attn.out"].get<std::string>(), std::string("rowwise"));
        QCOMPARE(doc["layers.*.mlp.fc1"].get<std::string>(), std::string("colwise"));
        QCOMPARE(doc["layers.*.mlp.fc2"].get<std::string>(), std::string("rowwise"));
        QVERIFY(!doc.contains("layers.*.ln1"));
    }

    void exportCommand_data()
    {
        QTest::addColumn<QString>("format");
        QTest::addColumn<QString>("expected");
        QTest::newRow("csv") << "csv"
                             << "op,block,instance,kind";
        QTest::newRow("pytorch") << "pytorch"
                                 << "# Tensor-parallel plan for gpt2";
        QTest::newRow("megatron") << "megatron"
                                  << "# Megatron-LM arguments";
        QTest::newRow("hf") << "hf-tp-plan"
                            << "{\n";
        QTest::newRow("png") << "png"
                             << "PNG"; // after the 0x89 byte
        QTest::newRow("svg") << "svg"
                             << "<?xml";
    }

    void exportCommand()
    {
        QFETCH(QString, format);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        const QString out = dir.filePath("out");
        QProcess p;
        p.start(QStringLiteral(TP_TPPLAN),
                {"export", TP_TEST_DATA "/plans_valid/gpt2_megatron_2x4.tpplan.json", "--format", format, "-o", out});
        QVERIFY(p.waitForFinished(120000));
        QCOMPARE(p.exitCode(), 0);
        const std::string bytes = readAll(out);
        QVERIFY(bytes.substr(format == "png" ? 1 : 0).starts_with(expected.toStdString()));
        QProcess bad;
        bad.start(QStringLiteral(TP_TPPLAN),
                  {"export", TP_TEST_DATA "/plans_valid/gpt2_megatron_2x4.tpplan.json", "--format", "xls"});
        QVERIFY(bad.waitForFinished(120000));
        QCOMPARE(bad.exitCode(), 2);
    }
};

QTEST_GUILESS_MAIN(TestExport)
#include "tst_export.moc"
