#pragma once
// Graph layout by Graphviz (dot): a plain description of nodes, edges and clusters in, plain
// positions out, plus DOT text and rendered images. The only code that touches Graphviz
// handles. Graphviz keeps global state, so every call here runs under one mutex.
//
// Coordinates are points (1/72 inch) with the origin at the top left and y growing downwards,
// the convention of Qt's scene and of SVG.
#include <string>
#include <vector>

namespace tp {

struct LayoutNode {
    std::string id;    ///< unique; used as the DOT node name
    std::string label; ///< may hold '\n' line breaks
    double width = 0;  ///< minimum size in points; the label may make the node larger
    double height = 0;
    std::string cluster; ///< id of the LayoutCluster holding the node, empty for none
    std::string fillColor = "#ffffff";
    std::string borderColor = "#333333";
    std::string shape = "box"; ///< a Graphviz shape name: box, ellipse, note, plaintext, ...
};

struct LayoutEdge {
    std::string from;
    std::string to;
    std::string label;
    std::string color = "#555555";
    bool bold = false;
    bool constraint = true; ///< false: the edge does not influence the ranking
};

struct LayoutCluster {
    std::string id;
    std::string label;
    std::string fillColor = "#f4f4f4";
    std::string borderColor = "#999999";
};

struct LayoutInput {
    std::string title;          ///< drawn above the graph; empty for none
    std::string rankdir = "TB"; ///< TB or LR
    std::string fontName = "Helvetica";
    double fontSize = 11;
    std::vector<LayoutNode> nodes;
    std::vector<LayoutEdge> edges;
    std::vector<LayoutCluster> clusters;
};

struct LayoutPoint {
    double x = 0;
    double y = 0;
};

struct NodeLayout {
    std::string id;
    LayoutPoint center;
    double width = 0;
    double height = 0;
};

struct EdgeLayout {
    std::string from;
    std::string to;
    /// Cubic B-spline control points as Graphviz gives them: p0, then (c1, c2, p) triples.
    std::vector<LayoutPoint> spline;
    bool hasArrow = false;
    LayoutPoint arrowTip; ///< where the arrow head points (valid when hasArrow)
    bool hasLabel = false;
    LayoutPoint labelCenter;
};

struct ClusterLayout {
    std::string id;
    double x = 0; ///< top-left corner
    double y = 0;
    double width = 0;
    double height = 0;
    LayoutPoint labelCenter;
};

struct LayoutResult {
    double width = 0;
    double height = 0;
    std::vector<NodeLayout> nodes;       ///< in input order
    std::vector<EdgeLayout> edges;       ///< in input order
    std::vector<ClusterLayout> clusters; ///< in input order
};

/// The DOT source of the input; deterministic. Throws InputError for a duplicate node id, an
/// edge to an unknown node or a node in an unknown cluster.
std::string layoutToDot(const LayoutInput& input);

/// Lays the graph out with dot. Throws InputError as layoutToDot, or when Graphviz fails.
LayoutResult layoutGraph(const LayoutInput& input);

/// Lays out and renders with Graphviz: "svg", "png" (cairo), "pdf", or "dot" (the input with
/// positions). Returns the file bytes. Throws InputError for a format Graphviz cannot write.
std::string renderLayout(const LayoutInput& input, const std::string& format);

} // namespace tp
