#include "devices.h"

#include <algorithm>
#include <map>

#include "../util/error.h"

namespace tp::explain {

std::vector<DeviceSlice> deviceSlices(const TensorSpec& spec, const std::vector<std::int64_t>& shape, const Mesh& mesh)
{
    std::vector<DeviceSlice> out;
    for (int dev = 0; dev < mesh.devices(); ++dev) {
        DeviceSlice ds;
        int rest = dev;
        ds.coords.assign(mesh.axes.size(), 0);
        for (size_t a = mesh.axes.size(); a-- > 0;) {
            ds.coords[a] = rest % mesh.axes[a].size;
            rest /= mesh.axes[a].size;
        }
        for (size_t d = 0; d < spec.dims.size() && d < shape.size(); ++d) {
            std::int64_t pieces = 1, piece = 0;
            for (int a : spec.dims[d]) {
                pieces *= mesh.axes[static_cast<size_t>(a)].size;
                piece = piece * mesh.axes[static_cast<size_t>(a)].size + ds.coords[static_cast<size_t>(a)];
            }
            const std::int64_t len = shape[d] / pieces;
            ds.ranges.push_back({piece * len, (piece + 1) * len});
        }
        out.push_back(std::move(ds));
    }
    return out;
}

namespace {

constexpr AxisMask bit(int a) { return AxisMask{1} << a; }

/// Axis `a` taken out of the spec (its dims and its partial sums).
TensorSpec without(TensorSpec spec, int a)
{
    for (auto& d : spec.dims) d.erase(std::remove(d.begin(), d.end(), a), d.end());
    spec.partial &= ~bit(a);
    return spec;
}

/// `spec` with axis `a` placed as in `target` (splitting the same dim, in target's order among
/// the axes already there; partial; or replicated): one collective's change.
TensorSpec placedAs(const TensorSpec& spec, int a, const TensorSpec& target)
{
    TensorSpec out = without(spec, a);
    if (target.partial & bit(a)) out.partial |= bit(a);
    for (size_t d = 0; d < target.dims.size() && d < out.dims.size(); ++d) {
        const auto& order = target.dims[d];
        if (std::find(order.begin(), order.end(), a) == order.end()) continue;
        out.dims[d].push_back(a);
        std::stable_sort(out.dims[d].begin(), out.dims[d].end(), [&](int x, int y) {
            const auto px = std::find(order.begin(), order.end(), x) - order.begin();
            const auto py = std::find(order.begin(), order.end(), y) - order.begin();
            return px < py;
        });
    }
    return out;
}

class StepBuilder {
public:
    explicit StepBuilder(const CostModel& model) : model_(model), mesh_(model.mesh())
    {
        for (const auto& t : model.graph().tensors) tensorByName_[t.name] = t.id;
        for (size_t a = 0; a < mesh_.axes.size(); ++a) axisByName_[mesh_.axes[a].name] = static_cast<int>(a);
    }

    TensorPicture picture(const std::string& tensor, const std::string& role, const TensorSpec& spec) const
    {
        TensorPicture p;
        p.tensor = tensor;
        p.role = role;
        p.shape = shapeOf(tensor);
        p.spec = specToString(spec, mesh_);
        p.partial = spec.partial != 0;
        for (int a = 0; a < mesh_.rank(); ++a)
            if (spec.partial & bit(a)) p.partialAxes += (p.partialAxes.empty() ? "" : ",") + mesh_.axes[static_cast<size_t>(a)].name;
        p.devices = deviceSlices(spec, p.shape, mesh_);
        return p;
    }

    std::vector<std::int64_t> shapeOf(const std::string& tensor) const
    {
        auto it = tensorByName_.find(tensor);
        return it == tensorByName_.end() ? std::vector<std::int64_t>{} : model_.graph().tensor(it->second).shape;
    }
    TensorSpec specOf(const std::string& text, const std::string& tensor) const { return parseSpec(text, shapeOf(tensor), mesh_); }
    int axisOf(const std::string& name) const { return axisByName_.at(name); }

    DeviceStep collective(const CollectiveStep& c, const std::string& role, const TensorSpec& before, const TensorSpec& after,
                          const std::string& title) const
    {
        DeviceStep s;
        s.kind = DeviceStep::Kind::Collective;
        s.phase = c.phase;
        s.collective = c.kind;
        s.axis = axisOf(c.axis);
        s.bytes = c.bytes;
        s.seconds = c.seconds;
        s.why = c.why;
        s.title = title;
        s.before = picture(c.tensor, role, before);
        s.after = picture(c.tensor, role, after);
        return s;
    }

    /// An edge's collectives of one direction, one axis at a time: forward from the producer's
    /// layout to the consumer's; backward the gradient from the consumer's layout (partial over
    /// the axes it is reduced over) to the producer's.
    void edge(const std::vector<CollectiveStep>& calls, bool forward, std::vector<DeviceStep>& out) const
    {
        const std::vector<const CollectiveStep*> mine = [&] {
            std::vector<const CollectiveStep*> v;
            for (const auto& c : calls)
                if ((c.phase == "forward") == forward) v.push_back(&c);
            return v;
        }();
        if (mine.empty()) return;
        const CollectiveStep& first = *mine.front();
        const TensorSpec from = specOf(first.fromSpec, first.tensor), to = specOf(first.toSpec, first.tensor);
        TensorSpec cur = forward ? from : to;
        if (!forward)
            for (const auto* c : mine)
                if (c->kind == "all-reduce" || c->kind == "reduce-scatter") {
                    cur = without(cur, axisOf(c->axis));
                    cur.partial |= bit(axisOf(c->axis));
                }
        for (const auto* c : mine) {
            TensorSpec next = placedAs(cur, axisOf(c->axis), forward ? to : from);
            if (!forward) next.partial &= ~bit(axisOf(c->axis));
            const std::string title = forward ? "forward: " + c->kind + " over " + c->axis + " of '" + c->tensor + "' for '" + c->consumer + "'"
                                              : "backward: " + c->kind + " over " + c->axis + " of the gradient of '" + c->tensor +
                                                    "' for '" + c->producer + "'";
            out.push_back(collective(*c, forward ? "input" : "gradient", cur, next, title));
            out.back().producer = c->producer;
            out.back().consumer = c->consumer;
            cur = next;
        }
    }

    /// The op's own: weight-gradient reductions (partial sums to whole, or to ZeRO's shard of
    /// dim 0) and parameter gathers (ZeRO's shard to whole). A weight's calls over several
    /// axes chain: its gradient starts partial over every axis it is reduced over, and each
    /// reduction takes one away. A repeated axis starts another weight's chain.
    void own(const OpExplanation& x, const std::vector<CollectiveStep>& calls, const std::string& phase, std::vector<DeviceStep>& out) const
    {
        std::vector<const CollectiveStep*> chain;
        auto flush = [&] {
            if (chain.empty()) return;
            const std::string& tensor = chain.front()->tensor;
            std::string specText;
            for (const auto& od : x.operands)
                if (od.tensor == tensor) specText = od.spec;
            if (specText.empty()) {
                chain.clear();
                return;
            }
            const TensorSpec held = specOf(specText, tensor);
            TensorSpec cur = held;
            for (const auto* c : chain) {
                const int a = axisOf(c->axis);
                cur = without(cur, a);
                if (c->kind == "all-gather") {
                    if (!cur.dims.empty()) cur.dims[0].push_back(a);
                } else {
                    cur.partial |= bit(a);
                }
            }
            for (const auto* c : chain) {
                const int a = axisOf(c->axis);
                TensorSpec next = without(cur, a);
                if (c->kind == "reduce-scatter") {
                    if (!next.dims.empty()) next.dims[0].push_back(a);
                } else if (c->kind == "all-gather" || c->kind == "all-reduce") {
                    next = placedAs(next, a, held);
                }
                const bool gather = c->kind == "all-gather";
                const std::string what = gather ? "'" + tensor + "'" : "the gradient of '" + tensor + "'";
                out.push_back(collective(*c, gather ? "weight" : "gradient", cur, next, c->phase + ": " + c->kind + " over " + c->axis + " of " + what));
                cur = next;
            }
            chain.clear();
        };
        for (const auto& c : calls) {
            if (c.phase != phase || c.tensor.empty()) continue;
            const bool repeated = std::any_of(chain.begin(), chain.end(), [&](const CollectiveStep* o) { return o->axis == c.axis; });
            if (!chain.empty() && (chain.front()->tensor != c.tensor || repeated)) flush();
            chain.push_back(&c);
        }
        flush();
    }

private:
    const CostModel& model_;
    const Mesh& mesh_;
    std::map<std::string, TensorId> tensorByName_;
    std::map<std::string, int> axisByName_;
};

/// Edge steps grouped by edge (producer, consumer, tensor), in the order explainOp lists them.
std::vector<std::vector<CollectiveStep>> byEdge(const std::vector<CollectiveStep>& calls)
{
    std::vector<std::vector<CollectiveStep>> edges;
    for (const auto& c : calls) {
        if (edges.empty() || edges.back().front().producer != c.producer || edges.back().front().consumer != c.consumer ||
            edges.back().front().tensor != c.tensor)
            edges.emplace_back();
        edges.back().push_back(c);
    }
    return edges;
}

} // namespace

std::vector<DeviceStep> deviceSteps(const CostModel& model, const SearchResult& plan, OpId op, const FoldedGraph* folded)
{
    if (op < 0 || static_cast<size_t>(op) >= model.graph().ops.size())
        throw InputError("devices: no op " + std::to_string(op) + " in a graph of " + std::to_string(model.graph().ops.size()) + " ops");
    const OpExplanation x = explainOp(model, plan, op, folded);
    const StepBuilder b(model);
    std::vector<DeviceStep> out;
    const auto incoming = byEdge(x.incoming), outgoing = byEdge(x.outgoing);
    for (const auto& e : incoming) b.edge(e, true, out);
    b.own(x, x.own, "forward", out); // FSDP's gathers before the forward
    DeviceStep compute;
    compute.kind = DeviceStep::Kind::Compute;
    compute.phase = "forward";
    compute.title = "compute: '" + x.op + "' (" + x.einsum + ") with " + x.strategy;
    compute.why = x.summary;
    for (const auto& od : x.operands) compute.operands.push_back(b.picture(od.tensor, od.role, b.specOf(od.spec, od.tensor)));
    out.push_back(std::move(compute));
    for (const auto& e : outgoing) b.edge(e, true, out);
    for (const auto& e : outgoing) b.edge(e, false, out);
    b.own(x, x.own, "backward", out);
    b.own(x, x.own, "gradient", out);
    for (const auto& e : incoming) b.edge(e, false, out);
    return out;
}

} // namespace tp::explain
