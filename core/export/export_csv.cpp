// CSV export: a per-op table, then a per-block-class table.
#include <cstdio>
#include <sstream>

#include "../graph/opkinds.h"
#include "export_plan.h"
#include "export_styles.h"

namespace tp {

namespace {

// RFC 4180: quote fields holding a comma, quote or line break.
std::string field(const std::string& text)
{
    if (text.find_first_of(",\"\n") == std::string::npos) return text;
    std::string out = "\"";
    for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

std::string num(double v)
{
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

} // namespace

std::string exportCsv(const PlanWorkspace& ws, const SearchResult& result)
{
    const CostModel& model = *ws.costModel;
    const Graph& g = model.graph();
    const Mesh& mesh = model.mesh();
    const FoldedGraph& folded = ws.folded;
    const Breakdown& b = result.breakdown;
    std::ostringstream out;
    out << "op,block,instance,kind,einsum,strategy,sharding,output_spec,recompute,locked,compute_s,comm_s,"
           "param_bytes,grad_bytes,optimizer_bytes,activation_bytes,memory_bytes\n";
    struct Totals {
        double compute = 0, comm = 0, param = 0, grad = 0, optimizer = 0, activation = 0, memory = 0;
    };
    std::vector<Totals> perClass(folded.classes.size());
    for (OpId id : g.topologicalOrder()) {
        const Op& op = g.op(id);
        const size_t i = static_cast<size_t>(id);
        const int s = result.strategyOfOp[i];
        const Recompute rc = result.recomputeOfOp.empty() ? Recompute::None : result.recomputeOfOp[i];
        const OpBreakdown& ob = b.ops[i];
        std::string outputs;
        for (size_t k = 0; k < op.outputs.size(); ++k)
            outputs += (k ? " " : "") + specToString(model.outputSpec(id, s, static_cast<int>(k)), mesh);
        const int cls = folded.classOfOp[i];
        out << field(op.name) << ',' << field(folded.classes[static_cast<size_t>(cls)].label) << ',' << folded.instanceOfOp[i]
            << ',' << opKindName(op.kind) << ',' << field(model.signature(id).equation) << ','
            << field(strategyToString(model.strategies(id)[static_cast<size_t>(s)], model.signature(id), mesh)) << ','
            << shardClassName(classifyOp(model, id, s).kind) << ',' << field(outputs) << ',' << recomputeName(rc) << ','
            << (result.lockedOp.empty() || !result.lockedOp[i] ? "false" : "true") << ',' << num(ob.computeSeconds) << ','
            << num(ob.commSeconds) << ',' << num(ob.paramBytes) << ',' << num(ob.gradBytes) << ',' << num(ob.optimizerBytes)
            << ',' << num(ob.activationBytes) << ',' << num(ob.memoryBytes) << '\n';
        Totals& t = perClass[static_cast<size_t>(cls)];
        t.compute += ob.computeSeconds;
        t.comm += ob.commSeconds;
        t.param += ob.paramBytes;
        t.grad += ob.gradBytes;
        t.optimizer += ob.optimizerBytes;
        t.activation += ob.activationBytes;
        t.memory += ob.memoryBytes;
    }
    out << "\nblock_class,block,instances,ops_per_instance,compute_s,comm_s,param_bytes,grad_bytes,optimizer_bytes,"
           "activation_bytes,memory_bytes\n";
    for (const auto& bc : folded.classes) {
        const Totals& t = perClass[static_cast<size_t>(bc.id)];
        out << bc.id << ',' << field(bc.label) << ',' << bc.instances.size() << ',' << bc.opsPerInstance() << ','
            << num(t.compute) << ',' << num(t.comm) << ',' << num(t.param) << ',' << num(t.grad) << ',' << num(t.optimizer) << ','
            << num(t.activation) << ',' << num(t.memory) << '\n';
    }
    return out.str();
}

} // namespace tp
