#pragma once
// Imports an ONNX model (as written by torch.onnx.export and other exporters) into the graph IR.
//
// The importer runs ONNX shape inference, evaluates shape-only subgraphs (Shape, Gather on
// shapes, Constant, ConstantOfShape, Unsqueeze/Concat/Cast of shape values, ...) as constants,
// collapses the decomposed LayerNorm / RMSNorm / GeLU / SiLU patterns exporters emit into one op,
// and maps the remaining nodes onto the op table (see docs/formats.md, "From ONNX"). Node names
// keep their module scopes: "/layers.3/attn/q/MatMul" becomes the op "layers.3/attn/q/MatMul".
// Weights are initializers and graph inputs used as weights, so files exported with
// export_params=False import with the right parameter count.
#include <cstdint>
#include <string>

#include "../graph/graph.h"

namespace tp {

struct OnnxImportOptions {
    /// Value of dynamic batch dims (a dim named like "batch", or the leading dim of a data
    /// input). When > 0 it also replaces a fixed leading dim of every data input. 0: 1.
    std::int64_t batch = 0;
    /// Value of the other dynamic dims of the data inputs (sequence lengths). 0: 128.
    std::int64_t seq = 0;
    /// Import an operator the op table cannot express as an Opaque op (kept replicated by the
    /// search) instead of refusing the file.
    bool opaqueUnsupported = false;
};

/// Imports the ONNX model serialized in `bytes`. `origin` (usually the file name) starts every
/// message. Throws InputError naming the node, its type and the field at fault for anything it
/// cannot import; the returned graph is validated.
Graph importOnnx(const std::string& bytes, const std::string& origin, const OnnxImportOptions& options = {});

/// Reads and imports an .onnx file. Throws InputError.
Graph importOnnxFile(const std::string& path, const OnnxImportOptions& options = {});

} // namespace tp
