#include "signature.h"

#include <array>
#include <limits>

#include "../util/error.h"

namespace tp {

std::string_view dimRoleName(DimRole role)
{
    static constexpr std::array<std::string_view, 5> names{"parallel", "contracted", "reduced-nonlinear", "gather", "spatial"};
    return names[static_cast<size_t>(role)];
}

bool dimRoleSplittable(DimRole role)
{
    return role == DimRole::Parallel || role == DimRole::Contracted || role == DimRole::Gather;
}

bool dimRoleMakesPartial(DimRole role) { return role == DimRole::Contracted || role == DimRole::Gather; }

double Signature::points() const
{
    double p = 1;
    for (const auto& l : loops) p *= static_cast<double>(l.size);
    return p * density;
}

int Signature::loopIndex(char label) const
{
    for (size_t i = 0; i < loops.size(); ++i)
        if (loops[i].label == label) return static_cast<int>(i);
    return -1;
}

namespace {

bool isLabel(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

using Term = std::vector<char>; // empty = size-1 dim
using OperandTerms = std::vector<Term>;

std::vector<OperandTerms> parseSide(std::string_view side, std::string_view equation)
{
    std::vector<OperandTerms> operands(1);
    for (size_t i = 0; i < side.size(); ++i) {
        char c = side[i];
        if (c == ' ') continue;
        if (c == ',') {
            operands.emplace_back();
        } else if (c == '1') {
            operands.back().push_back({});
        } else if (isLabel(c)) {
            operands.back().push_back({c});
        } else if (c == '(') {
            Term group;
            ++i;
            while (i < side.size() && side[i] != ')') {
                if (!isLabel(side[i]))
                    throw InputError("einsum '" + std::string(equation) + "': '" + std::string(1, side[i]) +
                                     "' inside a group is not a dim label");
                group.push_back(side[i]);
                ++i;
            }
            if (i >= side.size()) throw InputError("einsum '" + std::string(equation) + "': unclosed '('");
            if (group.empty()) throw InputError("einsum '" + std::string(equation) + "': empty group '()'");
            operands.back().push_back(std::move(group));
        } else {
            throw InputError("einsum '" + std::string(equation) + "': unexpected character '" + std::string(1, c) + "'");
        }
    }
    return operands;
}

std::string shapeText(const std::vector<std::int64_t>& shape)
{
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
    return s + "]";
}

} // namespace

Signature parseSignature(std::string_view equation, const std::vector<std::vector<std::int64_t>>& inputShapes,
                         const std::vector<std::vector<std::int64_t>>& outputShapes, std::string_view spatialLabels)
{
    const auto arrow = equation.find("->");
    if (arrow == std::string_view::npos) throw InputError("einsum '" + std::string(equation) + "': missing '->'");
    auto ins = parseSide(equation.substr(0, arrow), equation);
    auto outs = parseSide(equation.substr(arrow + 2), equation);
    if (ins.size() != inputShapes.size())
        throw InputError("einsum '" + std::string(equation) + "' has " + std::to_string(ins.size()) + " inputs but the op has " +
                         std::to_string(inputShapes.size()));
    if (outs.size() != outputShapes.size())
        throw InputError("einsum '" + std::string(equation) + "' has " + std::to_string(outs.size()) +
                         " outputs but the op has " + std::to_string(outputShapes.size()));

    Signature sig;
    sig.equation = std::string(equation);
    std::array<int, 128> indexOf;
    indexOf.fill(-1);
    auto loopFor = [&](char c) {
        auto& idx = indexOf[static_cast<unsigned char>(c)];
        if (idx < 0) {
            idx = static_cast<int>(sig.loops.size());
            sig.loops.push_back({c, -1, DimRole::Parallel});
        }
        return idx;
    };
    std::vector<bool> inOutput;
    // Outputs first so that the loop order follows the output (b, s, f before h).
    for (const auto& side : {&outs, &ins})
        for (const auto& operand : *side)
            for (const auto& term : operand)
                for (char c : term) loopFor(c);
    inOutput.assign(sig.loops.size(), false);
    for (const auto& operand : outs)
        for (const auto& term : operand)
            for (char c : term) inOutput[static_cast<size_t>(indexOf[static_cast<unsigned char>(c)])] = true;
    for (size_t i = 0; i < sig.loops.size(); ++i) sig.loops[i].role = inOutput[i] ? DimRole::Parallel : DimRole::Contracted;

    auto isSpatial = [&](char c) { return spatialLabels.find(c) != std::string_view::npos; };

    // Bind sizes. Single-label terms bind directly; groups need all but one label known, so
    // iterate until nothing changes. Outputs bind first: spatial loops take output sizes.
    struct Bound {
        const OperandTerms* terms;
        const std::vector<std::int64_t>* shape;
        bool isInput;
        size_t index;
    };
    std::vector<Bound> all;
    for (size_t i = 0; i < outs.size(); ++i) all.push_back({&outs[i], &outputShapes[i], false, i});
    for (size_t i = 0; i < ins.size(); ++i) all.push_back({&ins[i], &inputShapes[i], true, i});
    for (const auto& b : all)
        if (b.terms->size() != b.shape->size())
            throw InputError("einsum '" + std::string(equation) + "': " + (b.isInput ? "input " : "output ") +
                             std::to_string(b.index) + " has rank " + std::to_string(b.shape->size()) +
                             " but the equation gives it " + std::to_string(b.terms->size()) + " dims");

    auto mismatch = [&](const Bound& b, size_t d) {
        return InputError("einsum '" + std::string(equation) + "': " + (b.isInput ? "input " : "output ") +
                          std::to_string(b.index) + " shape " + shapeText(*b.shape) + " does not match dim " + std::to_string(d));
    };
    for (int pass = 0; pass < 2; ++pass) {
        bool changed = true;
        while (changed) {
            changed = false;
            for (const auto& b : all) {
                if (pass == 0 && b.isInput) continue; // outputs first, then everything
                for (size_t d = 0; d < b.terms->size(); ++d) {
                    const Term& term = (*b.terms)[d];
                    const std::int64_t dimSize = (*b.shape)[d];
                    if (term.empty()) {
                        if (dimSize != 1) throw mismatch(b, d);
                        continue;
                    }
                    std::int64_t known = 1;
                    int unknown = -1, unknownCount = 0;
                    bool spatialInInput = false;
                    for (char c : term) {
                        auto& loop = sig.loops[static_cast<size_t>(indexOf[static_cast<unsigned char>(c)])];
                        if (b.isInput && isSpatial(c)) spatialInInput = true;
                        if (loop.size < 0) {
                            unknown = indexOf[static_cast<unsigned char>(c)];
                            ++unknownCount;
                        } else {
                            // A product beyond int64 equals no dim size; stop before it overflows
                            // (a merged term may repeat a loop: "(ffff)").
                            if (loop.size > 0 && known > std::numeric_limits<std::int64_t>::max() / loop.size)
                                throw mismatch(b, d);
                            known *= loop.size;
                        }
                    }
                    if (spatialInInput) {
                        if (unknownCount == 1 && term.size() == 1) {
                            sig.loops[static_cast<size_t>(unknown)].size = dimSize;
                            changed = true;
                        }
                        continue;
                    }
                    if (unknownCount == 1) {
                        if (known <= 0 || dimSize % known != 0) throw mismatch(b, d);
                        sig.loops[static_cast<size_t>(unknown)].size = dimSize / known;
                        changed = true;
                    } else if (unknownCount == 0 && known != dimSize) {
                        throw mismatch(b, d);
                    }
                }
            }
        }
    }
    for (const auto& loop : sig.loops)
        if (loop.size < 0)
            throw InputError("einsum '" + std::string(equation) + "': the size of dim '" + std::string(1, loop.label) +
                             "' cannot be determined from the shapes");

    auto toIndexing = [&](const OperandTerms& terms) {
        OperandIndexing ix;
        for (const auto& term : terms) {
            std::vector<int> group;
            for (char c : term) group.push_back(indexOf[static_cast<unsigned char>(c)]);
            ix.dims.push_back(std::move(group));
        }
        return ix;
    };
    for (const auto& o : ins) sig.inputs.push_back(toIndexing(o));
    for (const auto& o : outs) sig.outputs.push_back(toIndexing(o));
    for (char c : spatialLabels) {
        int i = indexOf[static_cast<unsigned char>(c)];
        if (i >= 0) sig.loops[static_cast<size_t>(i)].role = DimRole::Spatial;
    }
    return sig;
}

} // namespace tp
