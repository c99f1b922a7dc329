#include "strategy.h"

#include "../util/error.h"

namespace tp {

OpStrategy OpStrategy::replicated(const Signature& sig)
{
    OpStrategy s;
    s.loopAxes.resize(sig.loops.size());
    return s;
}

AxisMask OpStrategy::usedAxes() const
{
    AxisMask m = 0;
    for (const auto& l : loopAxes)
        for (int a : l) m |= AxisMask{1} << a;
    return m;
}

std::string strategyToString(const OpStrategy& st, const Signature& sig, const Mesh& mesh)
{
    std::string s;
    for (size_t l = 0; l < st.loopAxes.size(); ++l) {
        if (st.loopAxes[l].empty()) continue;
        if (!s.empty()) s += ",";
        s += std::string(1, sig.loops[l].label) + "=";
        for (size_t k = 0; k < st.loopAxes[l].size(); ++k)
            s += (k ? "*" : "") + mesh.axes.at(static_cast<size_t>(st.loopAxes[l][k])).name;
    }
    return s.empty() ? "-" : s;
}

namespace {

// Within a merged tensor dim "(nd)" only the outermost loop of size > 1 may be split: a split
// of an inner loop would give each device a strided, not contiguous, slice of the tensor dim.
std::string groupProblem(const std::vector<int>& group, const OpStrategy& st, const Signature& sig)
{
    bool seenNonTrivial = false;
    for (int l : group) {
        const auto& loop = sig.loops[static_cast<size_t>(l)];
        if (seenNonTrivial && !st.loopAxes[static_cast<size_t>(l)].empty())
            return std::string("dim '") + loop.label + "' is an inner part of a merged tensor dim and cannot be split";
        if (loop.size > 1) seenNonTrivial = true;
    }
    return {};
}

} // namespace

std::string strategyProblem(const OpStrategy& st, const Signature& sig, const Mesh& mesh)
{
    if (st.loopAxes.size() != sig.loops.size()) return "strategy does not match the op's loop dims";
    AxisMask used = 0;
    for (size_t l = 0; l < st.loopAxes.size(); ++l) {
        const auto& loop = sig.loops[l];
        std::int64_t pieces = 1;
        for (int a : st.loopAxes[l]) {
            if (a < 0 || a >= mesh.rank()) return "mesh axis " + std::to_string(a) + " does not exist";
            if (used & (AxisMask{1} << a)) return "mesh axis '" + mesh.axes[static_cast<size_t>(a)].name + "' is used twice";
            used |= AxisMask{1} << a;
            pieces *= mesh.axes[static_cast<size_t>(a)].size;
        }
        if (pieces > 1 && !dimRoleSplittable(loop.role))
            return std::string("dim '") + loop.label + "' is " + std::string(dimRoleName(loop.role)) + " and may not be split";
        if (loop.size % pieces != 0)
            return std::string("dim '") + loop.label + "' (size " + std::to_string(loop.size) + ") does not divide into " +
                   std::to_string(pieces) + " pieces";
    }
    for (const auto* side : {&sig.inputs, &sig.outputs})
        for (const auto& operand : *side)
            for (const auto& group : operand.dims)
                if (auto p = groupProblem(group, st, sig); !p.empty()) return p;
    return {};
}

OpStrategy parseStrategy(const std::string& text, const Signature& sig, const Mesh& mesh)
{
    auto fail = [&](const std::string& why) {
        throw InputError("strategy '" + text + "' for einsum '" + sig.equation + "': " + why);
    };
    OpStrategy st = OpStrategy::replicated(sig);
    if (text != "-" && !text.empty()) {
        size_t start = 0;
        while (true) {
            const auto comma = text.find(',', start);
            const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
            const auto eq = item.find('=');
            if (eq != 1) fail("'" + item + "' is not of the form dim=axis (e.g. f=y)");
            const int l = sig.loopIndex(item[0]);
            if (l < 0) fail(std::string("the op has no dim '") + item[0] + "'");
            if (!st.loopAxes[static_cast<size_t>(l)].empty()) fail(std::string("dim '") + item[0] + "' is assigned twice");
            std::string axes = item.substr(2);
            size_t s = 0;
            while (true) {
                const auto star = axes.find('*', s);
                const std::string name = axes.substr(s, star == std::string::npos ? std::string::npos : star - s);
                const int a = mesh.axisIndex(name);
                if (a < 0) {
                    std::string names;
                    for (const auto& axis : mesh.axes) names += (names.empty() ? "" : ", ") + axis.name;
                    fail("unknown mesh axis '" + name + "' (mesh " + mesh.shapeText() + " has axes " + names + ")");
                }
                st.loopAxes[static_cast<size_t>(l)].push_back(a);
                if (star == std::string::npos) break;
                s = star + 1;
            }
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
    }
    if (auto p = strategyProblem(st, sig, mesh); !p.empty()) fail(p);
    return st;
}

std::vector<OpStrategy> enumerateStrategies(const Signature& sig, const Mesh& mesh)
{
    // Each axis chooses a loop or none: (loops + 1)^axes candidates, filtered for validity.
    std::vector<int> splittable;
    for (size_t l = 0; l < sig.loops.size(); ++l)
        if (dimRoleSplittable(sig.loops[l].role) && sig.loops[l].size > 1) splittable.push_back(static_cast<int>(l));
    std::vector<OpStrategy> out;
    const int axes = mesh.rank();
    std::vector<int> choice(static_cast<size_t>(axes), -1); // -1: axis unused
    while (true) {
        OpStrategy st = OpStrategy::replicated(sig);
        bool skip = false;
        for (int a = 0; a < axes; ++a) {
            if (mesh.axes[static_cast<size_t>(a)].size == 1 && choice[static_cast<size_t>(a)] >= 0) skip = true;
            if (choice[static_cast<size_t>(a)] >= 0)
                st.loopAxes[static_cast<size_t>(splittable[static_cast<size_t>(choice[static_cast<size_t>(a)])])].push_back(a);
        }
        if (!skip && strategyProblem(st, sig, mesh).empty()) out.push_back(std::move(st));
        int a = axes - 1;
        while (a >= 0 && ++choice[static_cast<size_t>(a)] == static_cast<int>(splittable.size())) {
            choice[static_cast<size_t>(a)] = -1;
            --a;
        }
        if (a < 0) break;
    }
    return out;
}

namespace {

TensorSpec operandSpec(const OperandIndexing& operand, const OpStrategy& st)
{
    TensorSpec spec;
    spec.dims.resize(operand.dims.size());
    for (size_t d = 0; d < operand.dims.size(); ++d)
        for (int l : operand.dims[d])
            for (int a : st.loopAxes[static_cast<size_t>(l)]) spec.dims[d].push_back(a);
    return spec;
}

AxisMask axesOutside(const OperandIndexing& operand, const OpStrategy& st)
{
    std::vector<bool> indexed(st.loopAxes.size(), false);
    for (const auto& g : operand.dims)
        for (int l : g) indexed[static_cast<size_t>(l)] = true;
    AxisMask m = 0;
    for (size_t l = 0; l < st.loopAxes.size(); ++l)
        if (!indexed[l])
            for (int a : st.loopAxes[l]) m |= AxisMask{1} << a;
    return m;
}

} // namespace

TensorSpec inputSpec(const Signature& sig, const OpStrategy& st, size_t input) { return operandSpec(sig.inputs.at(input), st); }

TensorSpec outputSpec(const Signature& sig, const OpStrategy& st, size_t output)
{
    TensorSpec spec = operandSpec(sig.outputs.at(output), st);
    spec.partial = axesOutside(sig.outputs[output], st);
    return spec;
}

AxisMask inputGradientPartial(const Signature& sig, const OpStrategy& st, size_t input)
{
    const auto& operand = sig.inputs.at(input);
    std::vector<bool> inOutput(sig.loops.size(), false), indexed(sig.loops.size(), false);
    for (const auto& out : sig.outputs)
        for (const auto& g : out.dims)
            for (int l : g) inOutput[static_cast<size_t>(l)] = true;
    bool additive = true;
    for (const auto& g : operand.dims)
        for (int l : g) {
            indexed[static_cast<size_t>(l)] = true;
            additive = additive && inOutput[static_cast<size_t>(l)];
        }
    // An operand indexed only by output loops next to contracted ones is a bias added to the
    // result ("bsh,hf,f->bsf"): its gradient is the output gradient summed over the output
    // loops it lacks, so splits of the contracted loops do not leave it partial.
    AxisMask m = 0;
    for (size_t l = 0; l < sig.loops.size(); ++l)
        if (!indexed[l] && (!additive || inOutput[l]))
            for (int a : st.loopAxes[l]) m |= AxisMask{1} << a;
    return m;
}

} // namespace tp
