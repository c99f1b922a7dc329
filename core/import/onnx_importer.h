#pragma once
// The ONNX importer's internals, shared by the files that implement its stages (not installed,
// not for other folders; the public entry points are in onnx_import.h):
//   onnx_import.cpp    reading the model, shape inference, values, weights and aliases
//   onnx_values.cpp    constant tensors, broadcasting, attributes, Einsum and reshape equations
//   onnx_fold.cpp      constant folding of shape-only subgraphs (a table of op type -> fold)
//   onnx_patterns.cpp  collapsing decomposed LayerNorm / RMSNorm / GeLU / SiLU into one op
//   onnx_map.cpp       mapping ONNX nodes onto the op table (a table of op type -> mapper)
// docs/formats.md ("From ONNX") describes what is imported and how.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include "../graph/graph.h"
#include "../graph/opkinds.h"
#include "onnx_import.h"

namespace tp::onnx_detail {

using Shape = std::vector<std::int64_t>;

constexpr std::int64_t kMaxConstElements = std::int64_t{1} << 20; // larger constants keep only their shape
constexpr size_t kMaxNodes = 2'000'000;
constexpr size_t kMaxRank = 16; // the graph format's limit
constexpr std::int64_t kDefaultBatch = 1;
constexpr std::int64_t kDefaultSeq = 128;
constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t{2} << 30; // protobuf cannot parse more
constexpr size_t kMaxPatternNodes = 12;

// ---- element types and small helpers (onnx_values.cpp) ----------------------------------------

bool isFloatType(int type);
bool isIntegerType(int type);
/// TP Studio has no f64 or 16-bit integers: doubles import as f32 and narrow integers widen.
std::optional<DType> dtypeOf(int type);
/// The product of the dims; nullopt for a negative dim or an overflow.
std::optional<std::int64_t> elementCount(const Shape& dims);
std::int64_t saturatingInt(double v);
/// Normalises a possibly negative axis; nullopt when out of range.
std::optional<size_t> normalAxis(std::int64_t axis, size_t rank);
/// Whether a constant of these dims is small enough to evaluate.
bool smallEnough(const Shape& dims);

/// The numbers of a constant value: what the shape-only subgraphs compute.
struct ConstValue {
    Shape dims;
    bool isFloat = false;
    std::vector<double> reals;      // when isFloat
    std::vector<std::int64_t> ints; // otherwise (bool as 0/1)

    size_t size() const { return isFloat ? reals.size() : ints.size(); }
    double real(size_t i) const { return isFloat ? reals[i] : static_cast<double>(ints[i]); }
    std::int64_t integer(size_t i) const { return isFloat ? saturatingInt(reals[i]) : ints[i]; }
    std::vector<std::int64_t> integers() const
    {
        std::vector<std::int64_t> out(size());
        for (size_t i = 0; i < out.size(); ++i) out[i] = integer(i);
        return out;
    }
    static ConstValue make(Shape dims, bool isFloat)
    {
        ConstValue v;
        v.dims = std::move(dims);
        v.isFloat = isFloat;
        const auto n = static_cast<size_t>(elementCount(v.dims).value_or(0));
        if (isFloat)
            v.reals.assign(n, 0.0);
        else
            v.ints.assign(n, 0);
        return v;
    }
    void set(size_t i, double value)
    {
        if (isFloat)
            reals[i] = value;
        else
            ints[i] = saturatingInt(value);
    }
    void setInt(size_t i, std::int64_t value)
    {
        if (isFloat)
            reals[i] = static_cast<double>(value);
        else
            ints[i] = value;
    }
};

/// The values of a tensor proto, when small and stored inline; nullopt otherwise.
std::optional<ConstValue> readTensor(const onnx::TensorProto& t);
/// For each element of `out`, the flat index of the element of `in` it reads under numpy
/// broadcasting. The caller has checked that `in` broadcasts to `out`.
std::vector<size_t> broadcastIndex(const Shape& in, const Shape& out);
std::optional<Shape> broadcastShapes(const std::vector<const Shape*>& shapes);

const onnx::AttributeProto* findAttr(const onnx::NodeProto* n, std::string_view name);
std::optional<std::int64_t> attrInt(const onnx::NodeProto* n, std::string_view name);
std::optional<std::vector<std::int64_t>> attrInts(const onnx::NodeProto* n, std::string_view name);
std::optional<std::string> attrString(const onnx::NodeProto* n, std::string_view name);

/// An ONNX Einsum equation as operand terms and an output term, or why it is not one we model
/// (an ellipsis, a diagonal, a letter that is not a-z/A-Z). Without "->" the output is, as the
/// ONNX spec says, the letters that appear once, in alphabetical order.
struct EinsumTerms {
    std::vector<std::string> inputs;
    std::string output;
    std::string problem;
};

EinsumTerms parseEinsumEquation(const std::string& text);

/// A reshape as an equation over "atoms": the coarsest common refinement of both shapes, e.g.
/// [4,2,256] -> [4,16,32] is "sb(hd)->s(bh)d". nullopt when sizes do not nest ([2,3] -> [3,2]).
std::optional<std::string> reshapeByAtoms(const Shape& in, const Shape& out);
/// `count` loop letters for an equation, none of them in `avoid`.
std::string letters(size_t count, std::string_view avoid);
/// numpy matmul semantics as an equation: batch dims broadcast, rank-1 operands promoted.
/// Throws InputError when the output rank does not fit the operands.
std::string matmulEquation(const Shape& a, const Shape& b, const Shape& out);

// ---- the importer -----------------------------------------------------------------------------

struct Node {
    std::string name; ///< scope path, without the exporter's leading '/'
    std::string type; ///< ONNX op type, or "LayerNorm"-style for a collapsed pattern (synthetic)
    std::vector<std::string> inputs;
    std::vector<std::string> outputs;
    const onnx::NodeProto* proto = nullptr; ///< null for a collapsed pattern
    size_t index = 0;                       ///< position in the ONNX graph
    bool synthetic = false;
};

enum class SourceKind : std::uint8_t { None, Data, Weight, Constant };

struct Value {
    int elemType = 0;
    std::optional<Shape> shape; ///< when every dim is known
    int producer = -1;          ///< index into nodes
    bool graphInput = false, initializer = false, graphOutput = false;
    SourceKind source = SourceKind::None; ///< for graph inputs, initializers and de-duplicated weights
    const onnx::TensorProto* initializerProto = nullptr;
    bool constant = false;           ///< computed from constants and shapes only
    std::optional<ConstValue> value; ///< its numbers, when small enough to evaluate
    std::string alias;               ///< this value is that one (Identity, Dropout, Cast)
    std::string viewOf;              ///< this value is a reshaped/transposed view of that weight
    TensorId tensor = -1;
};

enum class Slot : std::uint8_t { Data, Weight, Buffer, Either, Through, Ignored };

struct SlotEvidence {
    bool weight = false, buffer = false, data = false, either = false;
};

/// A candidate pattern family: the node types a decomposed op may consist of.
struct PatternFamily {
    std::set<std::string> allowed;
};

class Importer;
/// How an ONNX node becomes ops: one row of the mapping table (onnx_map.cpp).
using NodeMapper = std::function<void(Importer&, const Node&)>;
/// How a constant node is evaluated: one row of the folding table (onnx_fold.cpp).
using ConstFolder = std::optional<ConstValue> (Importer::*)(const Node&) const;

class Importer {
public:
    Importer(std::string origin, const OnnxImportOptions& options) : origin_(std::move(origin)), options_(options) {}

    /// Parses, analyses, folds, collapses and maps the model serialized in `bytes`.
    Graph run(const std::string& bytes);

private:
    Graph build(); ///< run's steps after the input dims are set
    [[noreturn]] void fail(const std::string& reason) const;
    [[noreturn]] void failNode(const Node& n, const std::string& reason) const;

    // ---- preparation and shape inference (onnx_import.cpp) --------------------------------------
    std::unordered_set<std::string> initializerNames() const;
    void setInputDims();
    bool isDataLike(const std::string& name) const;
    void checkInputsDefined() const;
    const onnx::OpSchema* schemaOf(const onnx::NodeProto& node) const;
    void inferShapes();

    // ---- analysis: values, weights, aliases (onnx_import.cpp) -----------------------------------
    void recordType(const onnx::ValueInfoProto& info);
    void analyse();
    void buildConsumers();
    const std::vector<size_t>& consumersOf(const std::string& value) const;
    Value& value(const std::string& name) { return values_[name]; }
    const Value* find(const std::string& name) const;
    int elemType(const std::string& name) const;
    std::optional<Shape> shapeOf(const std::string& name) const;
    Slot slotOf(const Node& n, size_t i) const;
    void collectSlots(const std::string& start, SlotEvidence& ev) const;
    void classifySources();
    void findAliasesAndViews();
    std::string resolve(const std::string& name) const;
    bool isWeight(const std::string& name) const;

    // ---- constant folding (onnx_fold.cpp) -------------------------------------------------------
    bool isConstant(const std::string& name) const;
    const ConstValue* constValue(const std::string& name) const;
    /// The constant value of input `i` of `n`, when known.
    const ConstValue* constInput(const Node& n, size_t i) const;
    void foldConstants();
    std::optional<ConstValue> evaluate(const Node& n) const;
    static const std::map<std::string, ConstFolder, std::less<>>& constFolders();
    std::optional<ConstValue> foldConstant(const Node& n) const;
    std::optional<ConstValue> foldShape(const Node& n) const;
    std::optional<ConstValue> foldReshapeLike(const Node& n) const;
    std::optional<ConstValue> foldCast(const Node& n) const;
    std::optional<ConstValue> foldSqueeze(const Node& n) const;
    std::optional<ConstValue> foldReshape(const Node& n) const;
    std::optional<ConstValue> foldConstantOfShape(const Node& n) const;
    std::optional<ConstValue> foldRange(const Node& n) const;
    std::optional<ConstValue> foldGather(const Node& n) const;
    std::optional<ConstValue> foldConcat(const Node& n) const;
    std::optional<ConstValue> foldSlice(const Node& n) const;
    std::optional<ConstValue> foldExpand(const Node& n) const;
    std::optional<ConstValue> foldTrilu(const Node& n) const;
    std::optional<ConstValue> foldUnary(const Node& n) const;
    std::optional<ConstValue> foldElementwise(const Node& n) const;
    bool injectFoldedConstants();
    void addInitializer(const std::string& name, const ConstValue& v);

    // ---- pattern collapse (onnx_patterns.cpp) ---------------------------------------------------
    const Node& effective(size_t i) const;
    std::unordered_map<std::string, std::vector<size_t>> liveConsumers() const;
    bool leavesGraph(const std::string& name) const;
    void collapsePatterns();
    void tryEntry(const std::string& x, std::unordered_map<std::string, std::vector<size_t>>& users,
                  const std::vector<PatternFamily>& families);
    std::vector<size_t> growRegion(const std::string& x, const std::unordered_map<std::string, std::vector<size_t>>& users,
                                   const PatternFamily& family) const;
    std::optional<std::string> regionExit(const std::vector<size_t>& region,
                                          const std::unordered_map<std::string, std::vector<size_t>>& users) const;
    std::optional<OpKind> recognise(const std::map<std::string, int>& count, const std::vector<size_t>& region,
                                    const Shape& xShape) const;
    void replaceRegion(OpKind kind, const std::string& x, std::string exit, const std::vector<size_t>& region,
                       std::unordered_map<std::string, std::vector<size_t>>& users);

    // ---- mapping to ops (onnx_map.cpp) ----------------------------------------------------------
    std::string tensorName(const std::string& value) const;
    DType dtypeFor(const Node& n, const std::string& value) const;
    Shape staticShape(const Node& n, const std::string& value) const;
    Shape inShape(const Node& n, const std::string& value) const { return staticShape(n, resolve(value)); }
    Shape outShape(const Node& n, size_t k = 0) const { return staticShape(n, n.outputs.at(k)); }
    TensorId operand(const Node& n, const std::string& raw);
    TensorId output(const Node& n, const std::string& name);
    /// Records the shape of an intermediate value of a node mapped onto several ops, typed like `like`.
    void declareValue(const std::string& name, const Shape& shape, const std::string& like);
    std::string uniqueOpName(const std::string& base);
    OpId addOp(const Node& n, OpKind kind, const std::vector<TensorId>& inputs, const std::vector<TensorId>& outputs,
               std::string einsum = {}, Attrs attrs = {}, const std::string& nameSuffix = {});
    std::vector<std::string> dataInputs(const Node& n) const;
    [[noreturn]] void unsupported(const Node& n, const std::string& why);
    void mapOpaqueOrFail(const Node& n, const std::string& why);
    std::optional<std::pair<std::string, bool>> linearWeight(const std::string& raw) const;
    std::optional<std::pair<std::string, size_t>> biasAfter(const std::string& out, std::int64_t f) const;

    static const std::map<std::string, NodeMapper, std::less<>>& nodeMappers();
    void mapNode(const Node& n);
    void mapSynthetic(const Node& n);
    /// A node reading one data value and writing one output, as one op of `kind`.
    void mapSingle(const Node& n, OpKind kind, Attrs attrs = {});
    void mapMatMul(const Node& n);
    bool mapLinearMatMul(const Node& n);
    void mapGemm(const Node& n);
    void mapConv(const Node& n);
    void mapBatchNorm(const Node& n);
    void mapLayerNorm(const Node& n);
    void mapSoftmax(const Node& n);
    void mapPointwise(const Node& n);
    void mapEinsum(const Node& n);
    void mapEinsumOfOne(const Node& n, const EinsumTerms& e, const std::string& text);
    void mapTranspose(const Node& n);
    void mapConcat(const Node& n);
    void mapSplit(const Node& n);
    void mapSliceNode(const Node& n);
    void mapGather(const Node& n);
    void mapReduce(const Node& n);
    void mapPool(const Node& n);
    void mapSlice(const Node& n, const Shape& in, const Shape& out, const std::string& input, const std::string& result);
    void markOutputs();

    std::string origin_;
    OnnxImportOptions options_;
    onnx::ModelProto model_;
    std::int64_t opset_ = 1;
    std::unordered_set<std::string> dynamicInputs_;
    /// Where --batch or --seq resized a data input whose dims the export fixed: its name, its
    /// dims as exported and as asked ("2 x 32", "8 x 64"); empty otherwise (run's error names them).
    std::string resizedInput_, exportedDims_, exportedFlags_, askedDims_;
    std::unordered_set<std::string> injected_;
    std::unordered_map<std::string, Value> values_;
    std::vector<Node> nodes_;
    std::vector<bool> live_;
    std::unordered_map<std::string, std::vector<size_t>> consumers_;
    std::unordered_map<std::string, size_t> views_;  ///< weight view value -> node index
    std::vector<Node> collapsed_;                    ///< synthetic nodes of recognised patterns
    std::unordered_map<size_t, size_t> replacement_; ///< node index -> collapsed_ index
    std::unordered_set<std::string> opNames_;
    Graph graph_;
};

} // namespace tp::onnx_detail
