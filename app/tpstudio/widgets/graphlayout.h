#pragma once
// Where the ops of one block instance go inside its card: the small layered layout the view
// shows at once (longest-path ranks, barycentre order), and Graphviz dot's layout (core/layout),
// computed on a worker and converted to the card's frame.
#include <map>
#include <set>
#include <vector>

#include <QPointF>

#include "graphview.h"
#include "layout/layout.h"

namespace tp::graphview {

/// One node of a card: an op, or a group of sibling instances (e.g. experts) drawn as one.
struct Node {
    OpId op = -1;
    int group = -1; ///< index into folded.siblings, for a group node
    int rank = 0;
    double order = 0; ///< topological position of its (first) op
    QPointF pos;      ///< top centre
};

/// One instance's ops as the nodes of a card, the edges between them, and the layered layout.
struct InstanceNodes {
    std::vector<Node> nodes;
    std::map<OpId, int> nodeOfOp;
    std::set<std::pair<int, int>> edges;
    int ranks = 0;
    size_t widest = 1;
};

/// The nodes of instance `instance` of class `classId` (plus one node per sibling group it is
/// the parent of), placed by rank (longest path from the inputs) and barycentre order.
/// `topoPos` is every op's position in the topological order.
InstanceNodes layeredLayout(const Graph& graph, const FoldedGraph& folded, const std::vector<OpId>& producers,
                            const std::vector<int>& topoPos, int classId, int instance);

/// The graph dot lays out for these nodes: node "n<i>" per node, sized as drawn.
LayoutInput dotInputOf(const InstanceNodes& nodes);
/// Dot's answer in the card's frame (edges keyed by node pair).
CardLayout cardLayoutFrom(const LayoutResult& result, const LayoutInput& input);
/// Runs dot for each run's card (on a worker: core/layout serialises Graphviz under its own
/// mutex). A card dot fails on gets a layout that is not ok: the layered one stays.
std::map<int, CardLayout> layoutCards(const std::map<int, LayoutInput>& inputs);

} // namespace tp::graphview
