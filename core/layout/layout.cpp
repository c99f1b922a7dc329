#include "layout.h"

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include "../util/error.h"

namespace tp {

namespace {

// Graphviz keeps global state (the plugin registry, the cgraph string dictionary, error
// handlers); every entry into it goes through this lock.
std::mutex& graphvizMutex()
{
    static std::mutex mutex;
    return mutex;
}

// One Graphviz context for the process, made on first use and never freed. Graphviz 2.42's pango
// plugin remembers a pointer to the last font name, which lives in the context's font
// dictionary: after a context is freed, the next layout compares against freed memory
// (ASan: heap-use-after-free in textspan_size). Callers hold graphvizMutex().
GVC_t* graphvizContext()
{
    static GVC_t* const context = gvContext();
    return context;
}

std::string quoted(const std::string& text)
{
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out + "\"";
}

std::string number(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
}

void writeNode(std::ostringstream& dot, const LayoutNode& n, const std::string& indent)
{
    dot << indent << quoted(n.id) << " [label=" << quoted(n.label) << ", shape=" << quoted(n.shape)
        << ", fillcolor=" << quoted(n.fillColor) << ", color=" << quoted(n.borderColor);
    if (n.width > 0) dot << ", width=" << number(n.width / 72.0);
    if (n.height > 0) dot << ", height=" << number(n.height / 72.0);
    dot << "];\n";
}

struct Context {
    GVC_t* gvc = nullptr;
    Agraph_t* graph = nullptr;
    ~Context()
    {
        if (graph) {
            gvFreeLayout(gvc, graph);
            agclose(graph);
        }
    }
};

// Parses the DOT text and lays it out; the caller holds the lock.
void layOut(Context& c, const std::string& dot)
{
    c.gvc = graphvizContext();
    if (!c.gvc) throw InputError("graph layout: Graphviz could not start");
    c.graph = agmemread(dot.c_str());
    if (!c.graph) throw InputError("graph layout: Graphviz could not read the generated DOT");
    if (gvLayout(c.gvc, c.graph, "dot") != 0) throw InputError("graph layout: Graphviz dot layout failed");
}

std::string render(Context& c, const std::string& format)
{
    char* data = nullptr;
    unsigned int length = 0;
    if (gvRenderData(c.gvc, c.graph, format.c_str(), &data, &length) != 0 || !data)
        throw InputError("graph rendering: Graphviz cannot write the format '" + format + "'");
    std::string bytes(data, length);
    gvFreeRenderData(data);
    return bytes;
}

std::string attr(void* object, const char* name)
{
    const char* v = agget(object, const_cast<char*>(name));
    return v ? v : "";
}

std::vector<double> numbers(const std::string& text)
{
    std::vector<double> out;
    std::string token;
    for (char ch : text + " ") {
        if (ch == ',' || ch == ' ' || ch == '\n' || ch == '\\') {
            if (!token.empty()) out.push_back(std::stod(token));
            token.clear();
        } else {
            token += ch;
        }
    }
    return out;
}

} // namespace

std::string layoutToDot(const LayoutInput& in)
{
    std::set<std::string> ids;
    std::set<std::string> clusterIds;
    for (const auto& cl : in.clusters)
        if (!clusterIds.insert(cl.id).second) throw InputError("graph layout: cluster '" + cl.id + "' appears twice");
    for (const auto& n : in.nodes) {
        if (!ids.insert(n.id).second) throw InputError("graph layout: node '" + n.id + "' appears twice");
        if (!n.cluster.empty() && !clusterIds.count(n.cluster))
            throw InputError("graph layout: node '" + n.id + "' is in unknown cluster '" + n.cluster + "'");
    }
    for (const auto& e : in.edges)
        if (!ids.count(e.from) || !ids.count(e.to))
            throw InputError("graph layout: edge " + e.from + " -> " + e.to + " names an unknown node");

    std::ostringstream dot;
    dot << "digraph G {\n";
    dot << "  graph [rankdir=" << quoted(in.rankdir) << ", fontname=" << quoted(in.fontName)
        << ", fontsize=" << number(in.fontSize + 5) << ", nodesep=0.25, ranksep=0.3, newrank=true";
    if (!in.title.empty()) dot << ", label=" << quoted(in.title) << ", labelloc=\"t\"";
    dot << "];\n";
    dot << "  node [style=\"filled,rounded\", fontname=" << quoted(in.fontName) << ", fontsize=" << number(in.fontSize)
        << ", margin=\"0.12,0.04\"];\n";
    dot << "  edge [fontname=" << quoted(in.fontName) << ", fontsize=" << number(in.fontSize - 1) << ", arrowsize=0.7];\n";
    for (const auto& cl : in.clusters) {
        dot << "  subgraph " << quoted("cluster_" + cl.id) << " {\n";
        dot << "    graph [label=" << quoted(cl.label) << ", style=\"filled,rounded\", fillcolor=" << quoted(cl.fillColor)
            << ", color=" << quoted(cl.borderColor) << ", labeljust=\"l\", fontsize=" << number(in.fontSize + 3) << "];\n";
        for (const auto& n : in.nodes)
            if (n.cluster == cl.id) writeNode(dot, n, "    ");
        dot << "  }\n";
    }
    for (const auto& n : in.nodes)
        if (n.cluster.empty()) writeNode(dot, n, "  ");
    for (const auto& e : in.edges) {
        dot << "  " << quoted(e.from) << " -> " << quoted(e.to) << " [color=" << quoted(e.color);
        if (!e.label.empty()) dot << ", label=" << quoted(e.label) << ", fontcolor=" << quoted(e.color);
        if (e.bold) dot << ", penwidth=2";
        if (!e.constraint) dot << ", constraint=false";
        dot << "];\n";
    }
    dot << "}\n";
    return dot.str();
}

LayoutResult layoutGraph(const LayoutInput& in)
{
    const std::string dot = layoutToDot(in);
    std::lock_guard<std::mutex> lock(graphvizMutex());
    Context c;
    layOut(c, dot);
    render(c, "dot"); // attaches the positions to the graph as attributes ("pos", "bb", ...)

    LayoutResult out;
    const auto bb = numbers(attr(c.graph, "bb"));
    if (bb.size() != 4) throw InputError("graph layout: Graphviz gave no bounding box");
    const double top = bb[3];
    auto flip = [&](double x, double y) { return LayoutPoint{x - bb[0], top - y}; };
    out.width = bb[2] - bb[0];
    out.height = bb[3] - bb[1];

    for (const auto& n : in.nodes) {
        Agnode_t* node = agnode(c.graph, const_cast<char*>(n.id.c_str()), 0);
        NodeLayout nl;
        nl.id = n.id;
        if (node) {
            const auto pos = numbers(attr(node, "pos"));
            if (pos.size() >= 2) nl.center = flip(pos[0], pos[1]);
            nl.width = std::stod(attr(node, "width")) * 72.0;
            nl.height = std::stod(attr(node, "height")) * 72.0;
        }
        out.nodes.push_back(nl);
    }

    // Edges in input order: the k-th edge between a pair of nodes is the k-th Graphviz edge
    // between them (out-edges are kept in creation order).
    std::map<std::pair<std::string, std::string>, int> seen;
    for (const auto& e : in.edges) {
        EdgeLayout el;
        el.from = e.from;
        el.to = e.to;
        const int wanted = seen[{e.from, e.to}]++;
        Agnode_t* tail = agnode(c.graph, const_cast<char*>(e.from.c_str()), 0);
        Agnode_t* head = agnode(c.graph, const_cast<char*>(e.to.c_str()), 0);
        int k = 0;
        for (Agedge_t* edge = tail ? agfstout(c.graph, tail) : nullptr; edge; edge = agnxtout(c.graph, edge)) {
            if (aghead(edge) != head || k++ != wanted) continue;
            // "e,x,y s,x,y x1,y1 x2,y2 ...": optional end/start arrow points, then the spline.
            std::istringstream pos(attr(edge, "pos"));
            std::string item;
            while (pos >> item) {
                if (item.rfind("e,", 0) == 0) {
                    const auto v = numbers(item.substr(2));
                    if (v.size() == 2) {
                        el.hasArrow = true;
                        el.arrowTip = flip(v[0], v[1]);
                    }
                } else if (item.rfind("s,", 0) == 0) {
                    continue;
                } else {
                    const auto v = numbers(item);
                    if (v.size() == 2) el.spline.push_back(flip(v[0], v[1]));
                }
            }
            const auto lp = numbers(attr(edge, "lp"));
            if (lp.size() == 2) {
                el.hasLabel = true;
                el.labelCenter = flip(lp[0], lp[1]);
            }
            break;
        }
        out.edges.push_back(std::move(el));
    }

    for (const auto& cl : in.clusters) {
        ClusterLayout cll;
        cll.id = cl.id;
        const std::string name = "cluster_" + cl.id;
        if (Agraph_t* sub = agsubg(c.graph, const_cast<char*>(name.c_str()), 0)) {
            const auto b = numbers(attr(sub, "bb"));
            if (b.size() == 4) {
                const LayoutPoint topLeft = flip(b[0], b[3]);
                cll.x = topLeft.x;
                cll.y = topLeft.y;
                cll.width = b[2] - b[0];
                cll.height = b[3] - b[1];
            }
            const auto lp = numbers(attr(sub, "lp"));
            if (lp.size() == 2) cll.labelCenter = flip(lp[0], lp[1]);
        }
        out.clusters.push_back(cll);
    }
    return out;
}

std::string renderLayout(const LayoutInput& in, const std::string& format)
{
    static const std::set<std::string> kFormats = {"svg", "png", "pdf", "dot"};
    if (!kFormats.count(format)) throw InputError("graph rendering: format '" + format + "': use svg, png, pdf or dot");
    const std::string dot = layoutToDot(in);
    std::lock_guard<std::mutex> lock(graphvizMutex());
    Context c;
    layOut(c, dot);
    return render(c, format);
}

} // namespace tp
