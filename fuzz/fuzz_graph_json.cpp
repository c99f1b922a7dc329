// The graph file reader (.tpgraph.json): any bytes either load or throw InputError. A graph that
// loads must survive what opening it in TP Studio does next: writing it back (which must read
// back to the same text) and folding it (checkFold re-derives every invariant).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fold/fold.h"
#include "import/graph_json.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    tp::Graph graph;
    try {
        graph = tp::readGraphJson(text, "fuzz.tpgraph.json");
    } catch (const tp::InputError&) {
        return 0;
    }
    const std::string written = tp::writeGraphJson(graph);
    if (tp::writeGraphJson(tp::readGraphJson(written, "written")) != written) std::abort();
    tp::checkFold(graph, tp::foldGraph(graph));
    return 0;
}
