// Pattern collapse (onnx_importer.h): the decomposed LayerNorm / RMSNorm / GeLU / SiLU chains
// exporters emit become one op each, named after the scope their nodes share.
#include <algorithm>
#include <sstream>

#include "onnx_importer.h"

namespace tp::onnx_detail {

// A live node, or the collapsed pattern that took its place.
const Node& Importer::effective(size_t i) const
{
    auto r = replacement_.find(i);
    return r == replacement_.end() ? nodes_[i] : collapsed_[r->second];
}

// The live nodes reading each value (through aliases).
std::unordered_map<std::string, std::vector<size_t>> Importer::liveConsumers() const
{
    std::unordered_map<std::string, std::vector<size_t>> map;
    for (size_t i = 0; i < nodes_.size(); ++i)
        if (live_[i])
            for (const auto& in : effective(i).inputs) {
                if (in.empty()) continue;
                auto& list = map[resolve(in)];
                if (list.empty() || list.back() != i) list.push_back(i);
            }
    return map;
}

bool Importer::leavesGraph(const std::string& name) const
{
    for (const auto& out : model_.graph().output())
        if (resolve(out.name()) == name) return true;
    return false;
}

// Exporters spell LayerNorm, RMSNorm, GeLU and SiLU as chains of elementwise nodes. Each such
// chain reads one activation x (and constants) and yields one value. From every activation
// read by two or more nodes, grow the set of nodes computable from x and constants alone,
// then accept it only when exactly one of its values is used outside and its node types are
// exactly one of the known decompositions. Anything else stays as it was.
void Importer::collapsePatterns()
{
    static const std::vector<PatternFamily> families = {
        {{"ReduceMean", "Sub", "Pow", "Add", "Sqrt", "Div", "Mul", "Reciprocal"}},
        {{"Div", "Mul", "Erf", "Add", "Pow", "Tanh"}},
        {{"Sigmoid", "Mul"}},
    };
    auto users = liveConsumers();
    for (size_t anchor = 0; anchor < nodes_.size(); ++anchor) {
        if (!live_[anchor]) continue;
        for (const auto& out : nodes_[anchor].outputs) tryEntry(out, users, families);
    }
    for (const auto& input : model_.graph().input()) tryEntry(input.name(), users, families);
}

void Importer::tryEntry(const std::string& x, std::unordered_map<std::string, std::vector<size_t>>& users,
                        const std::vector<PatternFamily>& families)
{
    if (x.empty()) return;
    auto uit = users.find(x);
    if (uit == users.end() || uit->second.size() < 2) return;
    const auto xShape = shapeOf(x);
    if (!xShape || xShape->empty()) return;
    for (const auto& family : families) {
        const std::vector<size_t> region = growRegion(x, users, family);
        if (region.size() < 2 || region.size() > kMaxPatternNodes) continue;
        const auto exit = regionExit(region, users);
        if (!exit || shapeOf(*exit) != xShape) continue;
        std::map<std::string, int> count;
        for (size_t c : region) ++count[nodes_[c].type];
        const auto kind = recognise(count, region, *xShape);
        if (!kind) continue;
        replaceRegion(*kind, x, *exit, region, users);
        return;
    }
}

// The live nodes of the family's types computable from x and constants alone, in rounds (at
// most kMaxPatternNodes + 1 nodes: more is no pattern of ours).
std::vector<size_t> Importer::growRegion(const std::string& x, const std::unordered_map<std::string, std::vector<size_t>>& users,
                                         const PatternFamily& family) const
{
    std::vector<size_t> region;
    std::unordered_set<std::string> available{x};
    bool grew = true;
    while (grew && region.size() <= kMaxPatternNodes) {
        grew = false;
        std::vector<size_t> candidates;
        for (const auto& v : available)
            if (auto it = users.find(v); it != users.end())
                candidates.insert(candidates.end(), it->second.begin(), it->second.end());
        std::sort(candidates.begin(), candidates.end());
        candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
        for (size_t c : candidates) {
            if (!live_[c] || std::find(region.begin(), region.end(), c) != region.end()) continue;
            const Node& n = effective(c);
            if (n.synthetic) continue;
            if (!family.allowed.count(n.type)) continue;
            bool ready = true;
            for (const auto& in : n.inputs)
                if (!in.empty() && !isConstant(in) && !available.count(resolve(in))) ready = false;
            if (!ready) continue;
            region.push_back(c);
            for (const auto& out : n.outputs) available.insert(out);
            grew = true;
        }
    }
    return region;
}

// The one value of the region used outside it (or leaving the graph); nullopt for none or more.
std::optional<std::string> Importer::regionExit(const std::vector<size_t>& region,
                                                const std::unordered_map<std::string, std::vector<size_t>>& users) const
{
    std::string exit;
    bool ok = true;
    for (size_t c : region)
        for (const auto& out : nodes_[c].outputs) {
            if (out.empty()) continue;
            bool outside = leavesGraph(out);
            if (auto it = users.find(out); it != users.end())
                for (size_t u : it->second)
                    if (std::find(region.begin(), region.end(), u) == region.end()) outside = true;
            if (!outside) continue;
            if (!exit.empty()) ok = false;
            exit = out;
        }
    if (!ok || exit.empty()) return std::nullopt;
    return exit;
}

std::optional<OpKind> Importer::recognise(const std::map<std::string, int>& count, const std::vector<size_t>& region,
                                          const Shape& xShape) const
{
    auto is = [&](std::initializer_list<std::pair<const char*, int>> want) {
        int total = 0;
        for (const auto& [type, k] : want) {
            auto it = count.find(type);
            if ((it == count.end() ? 0 : it->second) != k) return false;
            total += k;
        }
        return total == static_cast<int>(region.size());
    };
    // The norms must reduce over the last dim only.
    auto reducesLast = [&] {
        for (size_t c : region) {
            const Node& n = nodes_[c];
            if (n.type != "ReduceMean") continue;
            std::vector<std::int64_t> axes = attrInts(n.proto, "axes").value_or(std::vector<std::int64_t>{});
            if (axes.empty() && n.inputs.size() > 1) {
                const ConstValue* v = constValue(n.inputs[1]);
                if (v) axes = v->integers();
            }
            if (axes.size() != 1 || normalAxis(axes[0], xShape.size()) != xShape.size() - 1) return false;
        }
        return true;
    };
    if (is({{"ReduceMean", 2}, {"Sub", 1}, {"Pow", 1}, {"Add", 1}, {"Sqrt", 1}, {"Div", 1}}) && reducesLast())
        return OpKind::LayerNorm;
    if ((is({{"Pow", 1}, {"ReduceMean", 1}, {"Add", 1}, {"Sqrt", 1}, {"Div", 1}}) ||
         is({{"Pow", 1}, {"ReduceMean", 1}, {"Add", 1}, {"Sqrt", 1}, {"Reciprocal", 1}, {"Mul", 1}})) &&
        reducesLast())
        return OpKind::RMSNorm;
    if (is({{"Div", 1}, {"Erf", 1}, {"Add", 1}, {"Mul", 2}}) || is({{"Erf", 1}, {"Add", 1}, {"Mul", 3}})) return OpKind::GeLU;
    if (count.count("Tanh") && count.count("Pow") && !count.count("Erf") && region.size() >= 6) return OpKind::GeLU;
    if (is({{"Sigmoid", 1}, {"Mul", 1}})) return OpKind::SiLU;
    return std::nullopt;
}

void Importer::replaceRegion(OpKind kind, const std::string& x, std::string exit, const std::vector<size_t>& region,
                             std::unordered_map<std::string, std::vector<size_t>>& users)
{
    Node n;
    n.synthetic = true;
    n.inputs = {x};
    n.index = nodes_[region.front()].index;
    std::vector<size_t> absorbed = region;
    // A norm's affine parameters follow it as Mul by a weight [h], then (LayerNorm) Add of a weight [h].
    if (kind == OpKind::LayerNorm || kind == OpKind::RMSNorm) {
        const Shape h{shapeOf(x)->back()};
        auto affine = [&](const char* type) -> bool {
            auto it = users.find(exit);
            if (it == users.end() || it->second.size() != 1 || leavesGraph(exit)) return false;
            const Node& c = nodes_[it->second[0]];
            if (c.type != type || c.inputs.size() != 2 || c.outputs.empty()) return false;
            const std::string other = resolve(c.inputs[0]) == exit ? c.inputs[1] : c.inputs[0];
            if (!isWeight(other) || shapeOf(resolve(other)) != h) return false;
            n.inputs.push_back(resolve(other));
            absorbed.push_back(it->second[0]);
            exit = c.outputs[0];
            return true;
        };
        if (affine("Mul") && kind == OpKind::LayerNorm) affine("Add");
    }
    // The op's name: the scope the pattern's nodes share, then the kind.
    std::vector<std::string> scope;
    bool first = true;
    for (size_t c : absorbed) {
        std::vector<std::string> parts;
        std::stringstream ss(nodes_[c].name);
        for (std::string part; std::getline(ss, part, '/');) parts.push_back(part);
        if (!parts.empty()) parts.pop_back();
        if (first) {
            scope = parts;
            first = false;
            continue;
        }
        size_t k = 0;
        while (k < scope.size() && k < parts.size() && scope[k] == parts[k]) ++k;
        scope.resize(k);
    }
    for (const auto& part : scope) n.name += part + "/";
    n.name += std::string(opKindName(kind));
    n.type = std::string(opKindName(kind));
    n.outputs = {exit};
    for (size_t c : absorbed) live_[c] = false;
    collapsed_.push_back(std::move(n));
    // The synthetic node takes the place of the region's last node in the order.
    const size_t last = *std::max_element(absorbed.begin(), absorbed.end());
    replacement_[last] = collapsed_.size() - 1;
    live_[last] = true;
    users = liveConsumers();
}

} // namespace tp::onnx_detail
