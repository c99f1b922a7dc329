#include "graphlayout.h"

#include <algorithm>

#include "graphitems.h"

namespace tp::graphview {

InstanceNodes layeredLayout(const Graph& graph, const FoldedGraph& folded, const std::vector<OpId>& producers,
                            const std::vector<int>& topoPos, int classId, int instance)
{
    InstanceNodes in;
    std::vector<Node>& nodes = in.nodes;
    const BlockInstance& inst = folded.classes[static_cast<size_t>(classId)].instances[static_cast<size_t>(instance)];
    for (OpId op : inst.ops) {
        in.nodeOfOp[op] = static_cast<int>(nodes.size());
        nodes.push_back({op, -1, 0, double(topoPos[static_cast<size_t>(op)]), {}});
    }
    for (size_t gi = 0; gi < folded.siblings.size(); ++gi) {
        const auto& sg = folded.siblings[gi];
        if (sg.parentClass != classId || sg.parentInstance != instance) continue;
        const int node = static_cast<int>(nodes.size());
        int first = static_cast<int>(graph.ops.size());
        for (int si : sg.instances)
            for (OpId op : folded.classes[static_cast<size_t>(sg.classId)].instances[static_cast<size_t>(si)].ops) {
                in.nodeOfOp[op] = node;
                first = std::min(first, topoPos[static_cast<size_t>(op)]);
            }
        nodes.push_back({-1, static_cast<int>(gi), 0, double(first), {}});
    }
    std::vector<std::vector<int>> preds(nodes.size());
    std::vector<int> byTopo(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) byTopo[i] = static_cast<int>(i);
    std::sort(byTopo.begin(), byTopo.end(),
              [&](int a, int b) { return nodes[static_cast<size_t>(a)].order < nodes[static_cast<size_t>(b)].order; });
    for (const auto& [op, node] : in.nodeOfOp)
        for (TensorId t : graph.op(op).inputs) {
            const OpId p = producers[static_cast<size_t>(t)];
            const auto from = in.nodeOfOp.find(p);
            if (p < 0 || from == in.nodeOfOp.end() || from->second == node) continue;
            if (in.edges.insert({from->second, node}).second) preds[static_cast<size_t>(node)].push_back(from->second);
        }
    for (int n : byTopo) {
        int rank = 0;
        for (int p : preds[static_cast<size_t>(n)]) rank = std::max(rank, nodes[static_cast<size_t>(p)].rank + 1);
        nodes[static_cast<size_t>(n)].rank = rank;
        in.ranks = std::max(in.ranks, rank + 1);
    }
    std::vector<std::vector<int>> rows(static_cast<size_t>(in.ranks));
    for (int n : byTopo) rows[static_cast<size_t>(nodes[static_cast<size_t>(n)].rank)].push_back(n);
    for (auto& row : rows) {
        // Order by the mean position of the predecessors (barycentre), then topologically.
        for (int n : row) {
            const auto& ps = preds[static_cast<size_t>(n)];
            if (ps.empty()) continue;
            double sum = 0;
            for (int p : ps) sum += nodes[static_cast<size_t>(p)].pos.x();
            nodes[static_cast<size_t>(n)].pos.setX(sum / ps.size());
        }
        std::stable_sort(row.begin(), row.end(), [&](int a, int b) {
            return nodes[static_cast<size_t>(a)].pos.x() < nodes[static_cast<size_t>(b)].pos.x();
        });
        for (size_t i = 0; i < row.size(); ++i)
            nodes[static_cast<size_t>(row[i])].pos.setX((double(i) - (double(row.size()) - 1) / 2) * (kNodeW + kGapX));
        in.widest = std::max(in.widest, row.size());
    }
    return in;
}

LayoutInput dotInputOf(const InstanceNodes& rep)
{
    LayoutInput in;
    for (size_t i = 0; i < rep.nodes.size(); ++i) {
        LayoutNode ln;
        ln.id = "n" + std::to_string(i);
        ln.label = " "; // sized by width/height; the scene draws the text
        ln.width = kNodeW;
        ln.height = kDotNodeH;
        in.nodes.push_back(std::move(ln));
    }
    for (const auto& [a, b] : rep.edges) in.edges.push_back({"n" + std::to_string(a), "n" + std::to_string(b), {}});
    return in;
}

CardLayout cardLayoutFrom(const LayoutResult& result, const LayoutInput& input)
{
    CardLayout out;
    out.ok = true;
    out.width = result.width;
    out.height = result.height;
    for (const auto& n : result.nodes) out.centers.emplace_back(n.center.x, n.center.y);
    for (size_t e = 0; e < result.edges.size() && e < input.edges.size(); ++e) {
        const EdgeLayout& el = result.edges[e];
        if (el.spline.empty()) continue;
        QPainterPath path(QPointF(el.spline[0].x, el.spline[0].y));
        for (size_t k = 1; k + 2 < el.spline.size(); k += 3)
            path.cubicTo(QPointF(el.spline[k].x, el.spline[k].y), QPointF(el.spline[k + 1].x, el.spline[k + 1].y),
                         QPointF(el.spline[k + 2].x, el.spline[k + 2].y));
        if (el.hasArrow) path.lineTo(el.arrowTip.x, el.arrowTip.y);
        const int from = std::stoi(input.edges[e].from.substr(1)), to = std::stoi(input.edges[e].to.substr(1));
        out.edges[{from, to}] = path;
    }
    return out;
}

std::map<int, CardLayout> layoutCards(const std::map<int, LayoutInput>& inputs)
{
    std::map<int, CardLayout> results;
    for (const auto& [run, input] : inputs) {
        try {
            results[run] = cardLayoutFrom(layoutGraph(input), input);
        } catch (const std::exception&) {
            results[run] = CardLayout{}; // not ok: the layered layout stays, and dot is not asked again
        }
    }
    return results;
}

} // namespace tp::graphview
