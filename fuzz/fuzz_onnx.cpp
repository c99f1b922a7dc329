// The ONNX importer (protobuf parse, ONNX shape inference, shape folding, pattern collapsing):
// any bytes either import as a valid graph or throw InputError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/validate.h"
#include "import/onnx_import.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    tp::OnnxImportOptions options;
    // Half of the inputs also exercise the opaque fallback for unsupported operators.
    options.opaqueUnsupported = size % 2 == 1;
    try {
        const tp::Graph graph = tp::importOnnx(bytes, "fuzz.onnx", options);
        tp::validateGraph(graph);
    } catch (const tp::InputError&) {}
    return 0;
}
