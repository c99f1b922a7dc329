// Plan files (write, read, re-validate, re-cost), project files, the Graphviz layout adapter and
// `tpplan check`.
#include <QtTest>

#include <fstream>

#include "import/graph_json.h"
#include "layout/layout.h"
#include "import/catalog.h"
#include "plan/plan.h"
#include "plan/plan_file.h"
#include "plan/planner.h"
#include "search/evaluate.h"
#include "util/error.h"
#include "util/units.h"

using namespace tp;

namespace {

std::string readAll(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return f.readAll().toStdString();
}

struct Planned {
    std::unique_ptr<PlanWorkspace> workspace;
    SearchResult result;
    std::string text;
};

Planned planOf(const std::string& model, const std::string& mesh, const std::string& baseline = {},
               const std::string& hardware = "a100-80g-dgx")
{
    PlanRequest request;
    request.model = model;
    request.mesh = mesh;
    request.hardware = hardware;
    request.baseline = baseline;
    if (isBuiltinModel(model)) {
        request.modelOptions.batch = 8;
        if (builtinModelConfig(model).contains("layers")) request.modelOptions.overrides.push_back("layers=2");
    }
    Planned p;
    p.workspace = preparePlan(request);
    p.result = runPlan(*p.workspace, request);
    p.text = writePlanFile(planToJson(p.workspace->context, *p.workspace->costModel, p.workspace->folded, p.result));
    return p;
}

LayoutNode layoutNode(const std::string& id, const std::string& label, const std::string& cluster = {}, double width = 0)
{
    LayoutNode n;
    n.id = id;
    n.label = label;
    n.cluster = cluster;
    n.width = width;
    return n;
}

LayoutEdge layoutEdge(const std::string& from, const std::string& to, const std::string& label = {})
{
    LayoutEdge e;
    e.from = from;
    e.to = to;
    e.label = label;
    return e;
}

QString firstDifference(const LoadedPlan& plan)
{
    return plan.differences.empty() ? QString() : QString::fromStdString(plan.differences[0].message);
}

} // namespace

class TestPlanFile : public QObject {
    Q_OBJECT
private slots:
    // plan -> file -> read: zero differences, and write-read-write gives the same bytes.
    void roundTripBuiltins_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("mesh");
        for (const auto& name : builtinModelNames()) QTest::newRow(name.c_str()) << QString::fromStdString(name) << "2x4";
        QTest::newRow("gpt2 mesh 8") << "gpt2"
                                     << "8";
        QTest::newRow("llama2-7b mesh 2x2x2") << "llama2-7b"
                                              << "2x2x2";
    }

    void roundTripBuiltins()
    {
        QFETCH(QString, model);
        QFETCH(QString, mesh);
        const Planned p = planOf(model.toStdString(), mesh.toStdString());
        const LoadedPlan loaded = readPlanFile(p.text, "memory");
        QVERIFY2(loaded.differences.empty(), qPrintable(firstDifference(loaded)));
        QCOMPARE(loaded.result.strategyOfOp, p.result.strategyOfOp);
        QCOMPARE(loaded.result.breakdown.stepSeconds, p.result.breakdown.stepSeconds);
        const std::string again = writePlanFile(planDocument(loaded));
        QVERIFY(again == p.text);
    }

    // Baselines and the embedded-graph and custom-hardware paths round-trip too.
    void roundTripSources_data()
    {
        QTest::addColumn<QString>("source");
        QTest::addColumn<QString>("baseline");
        QTest::addColumn<bool>("customHardware");
        QTest::newRow("megatron") << "gpt2"
                                  << "megatron" << false;
        QTest::newRow("megatron-sp") << "gpt2"
                                     << "megatron-sp" << false;
        QTest::newRow("dp") << "bert-base"
                            << "dp" << false;
        QTest::newRow("graph file") << "graphfile"
                                    << "" << false;
        QTest::newRow("custom hardware") << "gpt2"
                                         << "" << true;
    }

    void roundTripSources()
    {
        QFETCH(QString, source);
        QFETCH(QString, baseline);
        QFETCH(bool, customHardware);
        QTemporaryDir dir;
        std::string model = source.toStdString();
        if (source == "graphfile") {
            ModelOptions small;
            small.batch = 4;
            small.overrides = {"layers=2", "seq=64"};
            model = dir.filePath("small.tpgraph.json").toStdString();
            std::ofstream(model) << writeGraphJson(loadModel("gpt2", small).graph);
        }
        std::string hardware = "a100-80g-dgx";
        if (customHardware) {
            nlohmann::json hw = hardwareToJson(loadHardware("h100-dgx"));
            hw["name"] = "my-cluster";
            hw["inter_node"]["latency_us"] = 7.3;
            hardware = dir.filePath("hw.json").toStdString();
            std::ofstream(hardware) << hw.dump(2);
        }
        const Planned p = planOf(model, "2x4", baseline.toStdString(), hardware);
        const auto doc = nlohmann::json::parse(p.text);
        QCOMPARE(doc["model"].contains("graph"), source == "graphfile");
        QCOMPARE(doc["hardware"].contains("spec"), customHardware);
        // The file must stand alone: remove what it was made from.
        dir.remove();
        const LoadedPlan loaded = readPlanFile(p.text, "memory");
        QVERIFY2(loaded.differences.empty(), qPrintable(firstDifference(loaded)));
        QVERIFY(writePlanFile(planDocument(loaded)) == p.text);
    }

    // A hand edit (fc1 row-parallel instead of column-parallel) is costed without searching and
    // the stale figures are reported, the step time first.
    // A pipelined plan's file holds its slowest stage (formats.md): read back, the stage is cut
    // from the model config again and recosted with its share of the pipeline (bubble, in-flight
    // activations), reproducing every stored figure; broken pipeline fields name the field.
    void pipelinedPlanRoundTrips_data()
    {
        QTest::addColumn<QString>("schedule");
        QTest::addColumn<QString>("field");    // "" for the untouched file
        QTest::addColumn<QString>("value");    // JSON
        QTest::addColumn<QString>("expected"); // in the error
        QTest::addColumn<bool>("graphFile");   // the model a graph file: no config to cut from
        QTest::addColumn<QString>("stageLayers"); // PlanRequest::stageLayers
        QTest::newRow("1F1B") << "1f1b" << "" << "" << "" << false << "even";
        QTest::newRow("interleaved") << "interleaved:2" << "" << "" << "" << false << "even";
        QTest::newRow("stage out of range") << "1f1b" << "stage" << "4" << "/pipeline/stage: is 4, expected 0 to 3" << false << "even";
        QTest::newRow("chunks not dividing") << "1f1b" << "schedule" << "\"interleaved:3\""
                                             << "/pipeline/layers_of_stage: --stage-layers: stage 1's 2 layers do not divide into the 3 chunks"
                                             << false << "even";
        QTest::newRow("unknown schedule") << "1f1b" << "schedule" << "\"zigzag\"" << "/pipeline/schedule" << false << "even";
        QTest::newRow("stages not dividing the mesh") << "1f1b" << "stages" << "3" << "/pipeline/stages" << false << "even";
        QTest::newRow("stage mesh not the plan's") << "1f1b" << "mesh" << "\"8x2\"" << "/mesh/shape: is '2', but a stage of 4" << false << "even";
        QTest::newRow("pipeline not an object") << "1f1b" << "" << "[]" << "/pipeline: must be an object" << false << "even";
        QTest::newRow("graph file") << "1f1b" << "" << "" << "" << true << "even";
        QTest::newRow("graph file, interleaved") << "interleaved:2" << "" << "" << "" << true << "even";
        QTest::newRow("graph file, no entry for its stage")
            << "1f1b" << "per_stage" << "[]" << "/pipeline/per_stage: has no entry for stage" << true << "even";
        QTest::newRow("graph file, absurd layers")
            << "1f1b" << "per_stage" << "[{\"stage\":1,\"stands_for\":1,\"layers\":1e15,\"first_layer\":0}]"
            << "/pipeline/per_stage/0/layers" << true << "even";
        QTest::newRow("graph file, more stages than the pipeline")
            << "1f1b" << "per_stage" << "[{\"stage\":0,\"stands_for\":9,\"layers\":1,\"first_layer\":0}]"
            << "/pipeline/per_stage/0/stands_for: makes more than the pipeline's 4 stages" << true << "even";
        QTest::newRow("graph file, per_stage not a list")
            << "1f1b" << "per_stage" << "3" << "/pipeline/per_stage: must be an array" << true << "even";
        // Uneven boundaries (3, 2, 2, 1 of 8 layers) are stored and cut again as planned.
        QTest::newRow("uneven boundaries") << "1f1b" << "" << "" << "" << false << "3,1";
        QTest::newRow("graph file, uneven boundaries") << "1f1b" << "" << "" << "" << true << "3,1";
        QTest::newRow("boundaries not adding up")
            << "1f1b" << "layers_of_stage" << "[2,2,2,3]" << "/pipeline/layers_of_stage: --stage-layers: the stages' layers must be 4"
            << false << "even";
        QTest::newRow("boundaries of another pipeline")
            << "1f1b" << "layers_of_stage" << "[4,4]" << "/pipeline/layers_of_stage: has 2 entries for 4 stages" << false << "even";
        QTest::newRow("absurd boundaries")
            << "1f1b" << "layers_of_stage" << "[1e15,1,1,1]" << "/pipeline/layers_of_stage/0" << true << "even";
        // The stack's shape (a graph file's exports count the model's layers from it).
        QTest::newRow("graph file, period 0") << "1f1b"
                                              << "period"
                                              << "0"
                                              << "/pipeline/period" << true << "even";
        QTest::newRow("graph file, absurd layers after the stack") << "1f1b"
                                                                   << "layers_after"
                                                                   << "1e15"
                                                                   << "/pipeline/layers_after" << true << "even";
        QTest::newRow("graph file, layers per period not a number") << "1f1b"
                                                                    << "layers_per_period"
                                                                    << "\"six\""
                                                                    << "/pipeline/layers_per_period" << true << "even";
    }
    void pipelinedPlanRoundTrips()
    {
        QFETCH(QString, schedule);
        QFETCH(QString, field);
        QFETCH(QString, value);
        QFETCH(QString, expected);
        QFETCH(bool, graphFile);
        QFETCH(QString, stageLayers);
        PlanRequest request;
        request.model = "gpt2";
        request.modelOptions.batch = 8;
        request.modelOptions.overrides.push_back("layers=8");
        QTemporaryDir dir;
        if (graphFile) {
            request.model = dir.filePath("gpt2-8.tpgraph.json").toStdString();
            std::ofstream(request.model) << writeGraphJson(loadModel("gpt2", request.modelOptions).graph);
            request.modelOptions = {};
        }
        request.mesh = "4x2";
        request.pipeline = 4;
        request.schedule = schedule.toStdString();
        request.microBatch = 1;
        request.stageLayers = stageLayers.toStdString();
        Planner planner;
        const PlannerResult planned = planner.plan(request);
        QVERIFY(planned.pipeline);
        QCOMPARE(planned.pipeline->layersOfStage, stageLayers == QStringLiteral("3,1") ? (std::vector<int>{3, 2, 2, 1})
                                                                                         : (std::vector<int>{2, 2, 2, 2}));
        const PlanWorkspace& ws = *planned.workspace;
        nlohmann::json doc = planToJson(ws.context, *ws.costModel, ws.folded, planned.result);
        doc["pipeline"] = pipelineToJson(*planned.pipeline, "4x2");
        QCOMPARE(doc["pipeline"]["stage"].get<int>(), planned.pipeline->stages[planned.pipeline->slowest].stage);
        QCOMPARE(doc["model"].contains("graph"), graphFile);
        if (!value.isEmpty()) {
            const nlohmann::json v = nlohmann::json::parse(value.toStdString());
            if (field.isEmpty()) doc["pipeline"] = v;
            else doc["pipeline"][field.toStdString()] = v;
        }
        if (!expected.isEmpty()) {
            try {
                readPlanFile(writePlanFile(doc), "p.tpplan.json");
                QFAIL("a broken pipeline was read");
            } catch (const InputError& e) {
                QVERIFY2(QString(e.what()).contains(expected), e.what());
                QVERIFY2(QString(e.what()).startsWith("p.tpplan.json"), e.what());
            }
            return;
        }
        const LoadedPlan back = readPlanFile(writePlanFile(doc), "p.tpplan.json");
        for (const auto& d : back.differences) qWarning() << d.message.c_str();
        QVERIFY(back.differences.empty());
        // The stage's share of the pipeline is in its cost model again: a stage of 4 pays the
        // bubble of (4 - 1) / V micro-batches (Narayanan et al. 2021).
        const PipelineSchedule sched = parseSchedule(4, schedule.toStdString());
        QCOMPARE(back.workspace->costModel->settings().pipelineBubble, 3.0 / sched.virtualStages);
        QCOMPARE(back.workspace->stage.stage, doc["pipeline"]["stage"].get<int>());
        QCOMPARE(back.workspace->stage.layers, ws.stage.layers);
        QCOMPARE(back.workspace->stage.receivedBytes, ws.stage.receivedBytes);
        QCOMPARE(back.workspace->stage.layersOfStage, ws.stage.layersOfStage);
        QCOMPARE(back.workspace->model.graph.ops.size(), ws.model.graph.ops.size());
        QCOMPARE(back.result.breakdown.stepSeconds, planned.result.breakdown.stepSeconds);
        // Opened in tpstudio, the plan restores the whole pipeline, not its stage's mesh.
        const ProjectFile project = projectOfPlan(doc, "p.tpplan.json");
        QCOMPARE(project.mesh, std::string("4x2"));
        QCOMPARE(project.pipeline, 4);
        QCOMPARE(project.schedule, schedule.toStdString());
        QCOMPARE(project.stageLayers, stageLayers == QStringLiteral("3,1") ? std::string("3,1") : std::string("even"));
    }

    void handEditedPlanIsCosted()
    {
        const QString dir = QStringLiteral(TP_TEST_DATA "/plans_valid/");
        const LoadedPlan original = readPlanFile(readAll(dir + "gpt2_megatron_2x4.tpplan.json"), "original");
        QVERIFY(original.differences.empty());
        const LoadedPlan edited = readPlanFile(readAll(dir + "gpt2_megatron_2x4_fc1_row.tpplan.json"), "edited");
        QVERIFY(!edited.differences.empty());
        QCOMPARE(QString::fromStdString(edited.differences[0].path), QStringLiteral("/cost/step_time_s"));
        QVERIFY(QString::fromStdString(edited.differences[0].message).startsWith("stored step time "));
        QVERIFY(QString::fromStdString(edited.differences[0].message).contains(", recomputed "));
        // The recomputed cost is the cost model's for exactly the edited assignment.
        const CostModel& model = *edited.workspace->costModel;
        const Graph& g = model.graph();
        std::vector<int> expected = original.result.strategyOfOp;
        OpId fc1 = -1;
        for (const auto& op : g.ops)
            if (op.name == "layers.0/mlp/fc1") fc1 = op.id;
        QVERIFY(fc1 >= 0);
        expected[static_cast<size_t>(fc1)] =
            model.findStrategy(fc1, parseStrategy("b=x,h=y", model.signature(fc1), model.mesh()));
        QCOMPARE(edited.result.strategyOfOp, expected);
        const SearchResult direct =
            evaluatePlan(model, &edited.workspace->folded, expected, edited.result.recomputeOfOp, "evaluated");
        QCOMPARE(edited.result.breakdown.stepSeconds, direct.breakdown.stepSeconds);
        QVERIFY(edited.result.breakdown.stepSeconds != original.result.breakdown.stepSeconds);
        bool specReported = false;
        for (const auto& d : edited.differences) specReported = specReported || d.path == "/ops/20/outputs/0";
        QVERIFY(specReported);
    }

    // Corrupted and hand-broken plans are refused with exact one-line messages.
    void brokenPlans_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("message");
        const QDir dir(QStringLiteral(TP_TEST_DATA "/plans"));
        const QStringList files = dir.entryList({QStringLiteral("*.tpplan.json")}, QDir::Files, QDir::Name);
        QVERIFY(files.size() >= 10);
        for (const auto& f : files) {
            QFile expect(dir.filePath(f + ".expected"));
            QVERIFY2(expect.open(QIODevice::ReadOnly), qPrintable(f + ".expected missing"));
            QTest::newRow(qPrintable(f)) << dir.filePath(f) << QString::fromUtf8(expect.readAll()).trimmed();
        }
    }

    void brokenPlans()
    {
        QFETCH(QString, file);
        QFETCH(QString, message);
        try {
            readPlanFile(readAll(file), QFileInfo(file).fileName().toStdString());
            QFAIL("broken plan accepted");
        } catch (const InputError& e) {
            QCOMPARE(QString::fromUtf8(e.what()), message);
            QVERIFY(!QString::fromUtf8(e.what()).contains('\n'));
        }
    }

    // tpplan check: exit 0 for valid plans (with or without differences), 2 for broken ones.
    void checkCommand_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<int>("code");
        QTest::addColumn<QString>("expectedOutput");
        QTest::newRow("valid") << "plans_valid/gpt2_megatron_2x4.tpplan.json" << 0 << "no differences from the stored figures";
        QTest::newRow("hand edited") << "plans_valid/gpt2_megatron_2x4_fc1_row.tpplan.json" << 0 << "stored step time ";
        QTest::newRow("broken") << "plans/unknown_axis.tpplan.json" << 2 << "";
    }

    void checkCommand()
    {
        QFETCH(QString, file);
        QFETCH(int, code);
        QFETCH(QString, expectedOutput);
        QProcess p;
        p.start(QStringLiteral(TP_TPPLAN), {"check", QStringLiteral(TP_TEST_DATA "/") + file});
        QVERIFY(p.waitForFinished(120000));
        QCOMPARE(p.exitCode(), code);
        const QString out = QString::fromUtf8(p.readAllStandardOutput());
        const QString err = QString::fromUtf8(p.readAllStandardError());
        if (code == 0)
            QVERIFY2(out.contains(expectedOutput), qPrintable(out));
        else
            QVERIFY2(err.count('\n') == 1 && err.contains("/ops/20/strategy: op 'layers.0/mlp/fc1'"), qPrintable(err));

        QProcess j;
        j.start(QStringLiteral(TP_TPPLAN), {"check", QStringLiteral(TP_TEST_DATA "/") + file, "--json"});
        QVERIFY(j.waitForFinished(120000));
        QCOMPARE(j.exitCode(), code);
        const auto doc = QJsonDocument::fromJson(j.readAllStandardOutput()).object();
        QCOMPARE(doc["valid"].toBool(), code == 0);
        if (code == 0) QCOMPARE(doc["differences"].toArray().isEmpty(), file == "plans_valid/gpt2_megatron_2x4.tpplan.json");
    }

    void projectRoundTrip()
    {
        ProjectFile p;
        p.model = "gpt3-175b";
        p.overrides = {"layers=48"};
        p.mesh = "2x8";
        p.hardware = "h100-dgx";
        p.batch = 512;
        p.seq = 2048;
        p.mode = "train";
        p.microBatch = 4;
        p.memoryLimit = "72GiB";
        p.locks = {"layers.*/mlp/fc1=f=y"};
        p.interNodeGBps = 25;
        p.view = {{"expanded", {"layers.*"}}, {"selected", "layers.0/mlp/fc1"}};
        const std::string first = writeProjectJson(p);
        const ProjectFile back = readProjectJson(first, "memory");
        QCOMPARE(back.model, p.model);
        QCOMPARE(back.locks, p.locks);
        QCOMPARE(back.microBatch, p.microBatch);
        QVERIFY(back.view == p.view);
        QCOMPARE(back.interNodeGBps, 25.0);
        QVERIFY(writeProjectJson(back) == first);
        const PlanRequest request = planRequestOf(back);
        QCOMPARE(request.mesh, std::string("2x8"));
        QCOMPARE(request.modelOptions.overrides, p.overrides);
        // No pipeline is not written (projects from before pipelines read and write as before);
        // a pipeline and its schedule go through.
        QVERIFY(first.find("pipeline") == std::string::npos && first.find("schedule") == std::string::npos);
        QCOMPARE(back.pipeline, 1);
        ProjectFile piped = p;
        piped.pipeline = kAuto;
        piped.schedule = "interleaved:3";
        const ProjectFile pipedBack = readProjectJson(writeProjectJson(piped), "memory");
        QCOMPARE(pipedBack.pipeline, kAuto);
        QCOMPARE(pipedBack.schedule, std::string("interleaved:3"));
        QCOMPARE(planRequestOf(pipedBack).pipeline, kAuto);
        QCOMPARE(planRequestOf(pipedBack).schedule, std::string("interleaved:3"));
    }

    // Opening a plan restores the request it was made with: the plan of a request through
    // projectOfPlan and planRequestOf gives the same settings back (a built-in with an override,
    // a link override, a memory limit, a lock), and a field of the wrong type is named.
    void projectOfPlanRestoresTheRequest()
    {
        PlanRequest request;
        request.model = "gpt2";
        request.modelOptions.overrides = {"layers=2"};
        request.modelOptions.batch = 8;
        request.mesh = "2x2";
        request.memoryLimit = "3000000000";
        request.intraNodeGBps = 100;
        request.locks = {"layers.*/mlp/fc1=f=y"};
        auto ws = preparePlan(request);
        const SearchResult r = runPlan(*ws, request);
        nlohmann::json doc = planToJson(ws->context, *ws->costModel, ws->folded, r);
        const ProjectFile p = projectOfPlan(doc, "p.tpplan.json");
        QCOMPARE(p.model, std::string("gpt2"));
        QCOMPARE(p.overrides, request.modelOptions.overrides);
        QCOMPARE(p.mesh, std::string("2x2"));
        QCOMPARE(p.batch, std::int64_t(8));
        QCOMPARE(p.memoryLimit, std::string("3000000000"));
        QCOMPARE(p.intraNodeGBps, 100.0);
        QCOMPARE(p.locks.size(), std::size_t(2)); // fc1 of both layers
        QCOMPARE(p.locks[0], std::string("layers.0/mlp/fc1=f=y"));
        const PlanRequest again = planRequestOf(p);
        auto ws2 = preparePlan(again);
        const SearchResult r2 = runPlan(*ws2, again);
        QCOMPARE(r2.breakdown.stepSeconds, r.breakdown.stepSeconds);
        QCOMPARE(r2.breakdown.perDeviceBytes, r.breakdown.perDeviceBytes);
        doc["hardware"]["intra_node_GBps"] = "fast";
        try {
            (void)projectOfPlan(doc, "p.tpplan.json");
            QFAIL("expected InputError");
        } catch (const InputError& e) {
            QVERIFY2(QString(e.what()).contains("p.tpplan.json: /hardware/intra_node_GBps"), e.what());
        }
    }

    void brokenProjects_data()
    {
        QTest::addColumn<QString>("edit"); // JSON merged into a valid project
        QTest::addColumn<QString>("message");
        QTest::newRow("newer") << R"({"version": 3})"
                               << "p.tpproj.json: /version: is 3, newer than this TP Studio reads (1); update TP Studio";
        QTest::newRow("format") << R"({"format": "tpstudio.plan"})"
                                << "p.tpproj.json: /format: is 'tpstudio.plan', expected 'tpstudio.project'";
        QTest::newRow("mesh") << R"({"settings": {"mesh": "8x0"}})"
                              << "p.tpproj.json: /settings/mesh: mesh '8x0': '0' is not an axis size (use e.g. 8, 2x8 or 4x4x8)";
        QTest::newRow("limit") << R"({"settings": {"memory_limit": "lots"}})"
                               << "p.tpproj.json: /settings/memory_limit: " + QString::fromStdString([] {
                                      try {
                                          parseBytes("lots");
                                      } catch (const InputError& e) {
                                          return std::string(e.what());
                                      }
                                      return std::string();
                                  }());
        QTest::newRow("lock") << R"({"locks": ["layers.*/mlp/fc1"]})"
                              << "p.tpproj.json: /locks/0: " + QString::fromStdString([] {
                                     try {
                                         parseLockRequest("layers.*/mlp/fc1");
                                     } catch (const InputError& e) {
                                         return std::string(e.what());
                                     }
                                     return std::string();
                                 }());
        QTest::newRow("mode") << R"({"settings": {"mode": "serve"}})"
                              << "p.tpproj.json: /settings/mode: is 'serve', expected 'train' or 'infer'";
        QTest::newRow("view") << R"({"view": [1, 2]})"
                              << "p.tpproj.json: /view: must be an object, not array";
        QTest::newRow("batch") << R"({"settings": {"batch": 1.5}})"
                               << "p.tpproj.json: /settings/batch: must be an integer, not 1.5";
        QTest::newRow("no model") << R"({"settings": {"model": null}})"
                                  << "p.tpproj.json: /settings/model: is missing";
        QTest::newRow("bandwidth") << R"({"settings": {"inter_node_GBps": -3}})"
                                   << "p.tpproj.json: /settings/inter_node_GBps: is -3, must not be negative";
        QTest::newRow("pipeline 0") << R"({"settings": {"pipeline": 0}})"
                                    << "p.tpproj.json: /settings/pipeline: is 0, expected \"auto\" or a number of stages from 1";
        QTest::newRow("pipeline word") << R"({"settings": {"pipeline": "many"}})"
                                       << "p.tpproj.json: /settings/pipeline: is \"many\", expected \"auto\" or a number";
        QTest::newRow("schedule") << R"({"settings": {"pipeline": 8, "schedule": "zigzag"}})"
                                  << "p.tpproj.json: /settings/schedule: --schedule 'zigzag': use auto, 1f1b or interleaved:V with V "
                                     "from 2 to 1024 chunks per device";
    }

    void brokenProjects()
    {
        QFETCH(QString, edit);
        QFETCH(QString, message);
        ProjectFile p;
        p.model = "gpt2";
        nlohmann::json doc = projectToJson(p);
        doc.merge_patch(nlohmann::json::parse(edit.toStdString()));
        try {
            readProjectJson(doc.dump(), "p.tpproj.json");
            QFAIL("broken project accepted");
        } catch (const InputError& e) {
            QCOMPARE(QString::fromUtf8(e.what()), message);
        }
    }

    // The Graphviz adapter: positions inside the drawing, clusters around their nodes, splines
    // from the tail towards the head.
    void layoutPositions()
    {
        LayoutInput in;
        LayoutCluster block;
        block.id = "block";
        block.label = "block x3";
        in.clusters.push_back(block);
        in.nodes.push_back(layoutNode("a", "input"));
        in.nodes.push_back(layoutNode("b", "first", "block"));
        in.nodes.push_back(layoutNode("c", "second\nline", "block", 120));
        in.edges.push_back(layoutEdge("a", "b", "AR y"));
        in.edges.push_back(layoutEdge("b", "c"));
        const LayoutResult r = layoutGraph(in);
        QCOMPARE(r.nodes.size(), size_t(3));
        QCOMPARE(r.edges.size(), size_t(2));
        QVERIFY(r.width > 0 && r.height > 0);
        for (const auto& n : r.nodes) {
            QVERIFY(n.center.x > 0 && n.center.x < r.width && n.center.y > 0 && n.center.y < r.height);
            QVERIFY(n.width > 0 && n.height > 0);
        }
        QVERIFY(r.nodes[2].width >= 120 - 1e-9); // the requested minimum width
        // Top to bottom: a above b above c (y grows downwards).
        QVERIFY(r.nodes[0].center.y < r.nodes[1].center.y && r.nodes[1].center.y < r.nodes[2].center.y);
        const ClusterLayout& c = r.clusters[0];
        for (int i : {1, 2}) {
            QVERIFY(r.nodes[static_cast<size_t>(i)].center.x > c.x && r.nodes[static_cast<size_t>(i)].center.x < c.x + c.width);
            QVERIFY(r.nodes[static_cast<size_t>(i)].center.y > c.y && r.nodes[static_cast<size_t>(i)].center.y < c.y + c.height);
        }
        QVERIFY(!(r.nodes[0].center.y > c.y && r.nodes[0].center.y < c.y + c.height));
        QVERIFY(r.edges[0].spline.size() >= 4 && r.edges[0].hasArrow && r.edges[0].hasLabel);
        QVERIFY(!r.edges[1].hasLabel);
        QVERIFY(std::abs(r.edges[0].spline.front().y - r.nodes[0].center.y) <
                std::abs(r.edges[0].spline.front().y - r.nodes[1].center.y));
        QVERIFY(std::abs(r.edges[0].arrowTip.y - r.nodes[1].center.y) < r.nodes[1].height);
    }

    void layoutRejectsBadInput_data()
    {
        QTest::addColumn<int>("which");
        QTest::addColumn<QString>("message");
        QTest::newRow("duplicate node") << 0 << "graph layout: node 'a' appears twice";
        QTest::newRow("unknown edge end") << 1 << "graph layout: edge a -> zz names an unknown node";
        QTest::newRow("unknown cluster") << 2 << "graph layout: node 'a' is in unknown cluster 'nowhere'";
        QTest::newRow("render format") << 3 << "graph rendering: format 'bmp': use svg, png, pdf or dot";
    }

    void layoutRejectsBadInput()
    {
        QFETCH(int, which);
        QFETCH(QString, message);
        LayoutInput in;
        in.nodes.push_back(layoutNode("a", "a"));
        if (which == 0) in.nodes.push_back(layoutNode("a", "again"));
        if (which == 1) in.edges.push_back(layoutEdge("a", "zz"));
        if (which == 2) in.nodes[0].cluster = "nowhere";
        try {
            if (which == 3)
                renderLayout(in, "bmp");
            else
                layoutGraph(in);
            QFAIL("accepted");
        } catch (const InputError& e) {
            QCOMPARE(QString::fromUtf8(e.what()), message);
        }
    }
};

QTEST_GUILESS_MAIN(TestPlanFile)
#include "tst_planfile.moc"
