// checkFold: recomputes everything a fold claims from the graph and compares.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "block_structure.h"
#include "fold.h"

namespace tp {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::logic_error("fold check: " + what); }

std::string where(const Graph& graph, int classId, int instance, OpId op = -1)
{
    std::string text = "class " + std::to_string(classId) + " instance " + std::to_string(instance);
    if (op >= 0 && static_cast<size_t>(op) < graph.ops.size()) text += " op '" + graph.ops[op].name + "'";
    return text;
}

} // namespace

void checkFold(const Graph& graph, const FoldedGraph& folded)
{
    using namespace fold_detail;
    const size_t opCount = graph.ops.size();
    if (folded.classOfOp.size() != opCount || folded.instanceOfOp.size() != opCount)
        fail("per-op tables have " + std::to_string(folded.classOfOp.size()) + " entries for " + std::to_string(opCount) +
             " ops");
    const GraphIndex index(graph);
    Scratch scratch(graph);
    std::vector<int> seen(opCount, 0);
    size_t instanceCount = 0;
    for (size_t c = 0; c < folded.classes.size(); ++c) {
        const BlockClass& block = folded.classes[c];
        const int classId = static_cast<int>(c);
        if (block.id != classId) fail("class " + std::to_string(c) + " has id " + std::to_string(block.id));
        if (block.instances.empty()) fail("class " + std::to_string(c) + " has no instance");
        instanceCount += block.instances.size();
        const BlockInstance& rep = block.instances.front();
        if (rep.ops.empty()) fail(where(graph, classId, 0) + " has no ops");
        const BlockDescription repShape = describeBlock(graph, index, rep.ops, scratch);
        for (size_t i = 0; i < block.instances.size(); ++i) {
            const BlockInstance& inst = block.instances[i];
            const int instance = static_cast<int>(i);
            if (inst.ops.size() != rep.ops.size())
                fail(where(graph, classId, instance) + " has " + std::to_string(inst.ops.size()) + " ops, the representative " +
                     std::to_string(rep.ops.size()));
            for (size_t k = 0; k < inst.ops.size(); ++k) {
                const OpId id = inst.ops[k];
                if (id < 0 || static_cast<size_t>(id) >= opCount)
                    fail(where(graph, classId, instance) + " names op " + std::to_string(id));
                if (seen[id]++) fail(where(graph, classId, instance, id) + ": the op is in more than one instance");
                if (folded.classOfOp[id] != classId || folded.instanceOfOp[id] != instance)
                    fail(where(graph, classId, instance, id) + ": classOfOp/instanceOfOp disagree");
                if (!sameOp(graph, graph.ops[id], graph.ops[rep.ops[k]]))
                    fail(where(graph, classId, instance, id) + ": differs from representative op '" + graph.ops[rep.ops[k]].name +
                         "' in kind, equation, attrs or shapes");
            }
            const BlockDescription shape = describeBlock(graph, index, inst.ops, scratch);
            if (shape.codes != repShape.codes)
                fail(where(graph, classId, instance) + ": its edges do not map onto the representative's");
            if (shape.inputs != inst.inputs)
                fail(where(graph, classId, instance) + ": inputs are not its boundary inputs in canonical order");
            if (shape.outputs != inst.outputs)
                fail(where(graph, classId, instance) + ": outputs are not its boundary outputs in canonical order");
            // Topological order inside the instance: producers before consumers.
            for (size_t k = 0; k < inst.ops.size(); ++k) scratch.localOfOp[inst.ops[k]] = static_cast<int>(k);
            for (size_t k = 0; k < inst.ops.size(); ++k)
                for (TensorId t : graph.ops[inst.ops[k]].inputs) {
                    const OpId p = index.producer[t];
                    if (p >= 0 && scratch.localOfOp[p] >= static_cast<int>(k)) {
                        for (OpId id : inst.ops) scratch.localOfOp[id] = -1;
                        fail(where(graph, classId, instance, inst.ops[k]) + ": ops are not in topological order");
                    }
                }
            for (OpId id : inst.ops) scratch.localOfOp[id] = -1;
        }
    }
    for (size_t id = 0; id < opCount; ++id)
        if (!seen[id]) fail("op '" + graph.ops[id].name + "' is in no instance");

    // Sequence: every instance exactly once.
    if (folded.sequence.size() != instanceCount)
        fail("the sequence lists " + std::to_string(folded.sequence.size()) + " instances of " + std::to_string(instanceCount));
    std::vector<std::vector<char>> listed(folded.classes.size());
    for (size_t c = 0; c < folded.classes.size(); ++c) listed[c].assign(folded.classes[c].instances.size(), 0);
    for (const auto& [classId, instance] : folded.sequence) {
        if (classId < 0 || static_cast<size_t>(classId) >= folded.classes.size() || instance < 0 ||
            static_cast<size_t>(instance) >= listed[classId].size() || listed[classId][instance]++)
            fail("the sequence lists (" + std::to_string(classId) + ", " + std::to_string(instance) + ") wrongly");
    }

    // Siblings: valid, and never top-level.
    std::vector<std::vector<char>> nested(folded.classes.size());
    for (size_t c = 0; c < folded.classes.size(); ++c) nested[c].assign(folded.classes[c].instances.size(), 0);
    for (const auto& group : folded.siblings) {
        if (group.classId < 0 || static_cast<size_t>(group.classId) >= folded.classes.size() || group.instances.empty())
            fail("a sibling group names class " + std::to_string(group.classId));
        for (int i : group.instances) {
            if (i < 0 || static_cast<size_t>(i) >= nested[group.classId].size() || nested[group.classId][i]++)
                fail("a sibling group of class " + std::to_string(group.classId) + " names instance " + std::to_string(i));
        }
    }

    // Runs: cover every top-level instance once, consecutive instances, each feeding the next.
    size_t topLevel = 0;
    for (size_t c = 0; c < folded.classes.size(); ++c)
        for (char isNested : nested[c]) topLevel += isNested ? 0 : 1;
    size_t covered = 0;
    for (const auto& run : folded.runs) {
        if (run.classId < 0 || static_cast<size_t>(run.classId) >= folded.classes.size() || run.count < 1 ||
            run.firstInstance < 0 ||
            static_cast<size_t>(run.firstInstance + run.count) > folded.classes[run.classId].instances.size())
            fail("run (" + std::to_string(run.classId) + ", " + std::to_string(run.firstInstance) + ", " +
                 std::to_string(run.count) + ") is out of range");
        const auto& instances = folded.classes[run.classId].instances;
        for (int i = run.firstInstance; i < run.firstInstance + run.count; ++i) {
            if (nested[run.classId][i]) fail(where(graph, run.classId, i) + " is a sibling but in a run");
            if (i == run.firstInstance) continue;
            bool feeds = false;
            for (TensorId t : instances[i - 1].outputs)
                feeds |= std::find(instances[i].inputs.begin(), instances[i].inputs.end(), t) != instances[i].inputs.end();
            if (!feeds) fail(where(graph, run.classId, i) + " is in a run but not fed by the instance before it");
        }
        covered += static_cast<size_t>(run.count);
    }
    if (covered != topLevel)
        fail("runs cover " + std::to_string(covered) + " instances of " + std::to_string(topLevel) + " top-level ones");
}

} // namespace tp
