#include "onnx_import.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "../graph/opkinds.h"
#include "../graph/validate.h"
#include "../util/error.h"

namespace tp {

namespace {

using Shape = std::vector<std::int64_t>;

constexpr std::int64_t kMaxConstElements = std::int64_t{1} << 20; // larger constants keep only their shape
constexpr size_t kMaxNodes = 2'000'000;
constexpr size_t kMaxRank = 16;       // the graph format's limit
constexpr std::int64_t kDefaultBatch = 1;
constexpr std::int64_t kDefaultSeq = 128;
constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t{2} << 30; // protobuf cannot parse more
constexpr size_t kMaxPatternNodes = 12;

// ---------------------------------------------------------------------------------------------
// Element types and small helpers

bool isFloatType(int type)
{
    return type == onnx::TensorProto_DataType_FLOAT || type == onnx::TensorProto_DataType_DOUBLE ||
           type == onnx::TensorProto_DataType_FLOAT16 || type == onnx::TensorProto_DataType_BFLOAT16;
}

bool isIntegerType(int type)
{
    switch (type) {
    case onnx::TensorProto_DataType_UINT8: case onnx::TensorProto_DataType_INT8:
    case onnx::TensorProto_DataType_UINT16: case onnx::TensorProto_DataType_INT16:
    case onnx::TensorProto_DataType_INT32: case onnx::TensorProto_DataType_INT64:
    case onnx::TensorProto_DataType_UINT32: case onnx::TensorProto_DataType_UINT64:
    case onnx::TensorProto_DataType_BOOL:
        return true;
    default:
        return false;
    }
}

// TP Studio has no f64 or 16-bit integers: doubles import as f32 and narrow integers widen.
std::optional<DType> dtypeOf(int type)
{
    switch (type) {
    case onnx::TensorProto_DataType_FLOAT: case onnx::TensorProto_DataType_DOUBLE: return DType::F32;
    case onnx::TensorProto_DataType_FLOAT16: return DType::F16;
    case onnx::TensorProto_DataType_BFLOAT16: return DType::BF16;
    case onnx::TensorProto_DataType_INT64: case onnx::TensorProto_DataType_UINT64: return DType::I64;
    case onnx::TensorProto_DataType_INT32: case onnx::TensorProto_DataType_UINT32:
    case onnx::TensorProto_DataType_INT16: case onnx::TensorProto_DataType_UINT16: return DType::I32;
    case onnx::TensorProto_DataType_INT8: case onnx::TensorProto_DataType_UINT8: return DType::I8;
    case onnx::TensorProto_DataType_BOOL: return DType::Bool;
    default: return std::nullopt;
    }
}

std::optional<std::int64_t> elementCount(const Shape& dims)
{
    std::int64_t n = 1;
    for (auto d : dims) {
        if (d < 0) return std::nullopt;
        if (d > 0 && n > std::numeric_limits<std::int64_t>::max() / d) return std::nullopt;
        n *= d;
    }
    return n;
}

std::int64_t saturatingInt(double v)
{
    if (std::isnan(v)) return 0;
    if (v >= 9.2e18) return std::numeric_limits<std::int64_t>::max();
    if (v <= -9.2e18) return std::numeric_limits<std::int64_t>::min();
    return static_cast<std::int64_t>(v);
}

// Normalises a possibly negative axis; nullopt when out of range.
std::optional<size_t> normalAxis(std::int64_t axis, size_t rank)
{
    const auto r = static_cast<std::int64_t>(rank);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return std::nullopt;
    return static_cast<size_t>(axis);
}

// ---------------------------------------------------------------------------------------------
// Constant values: what the shape-only subgraphs compute

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
        if (isFloat) v.reals.assign(n, 0.0);
        else v.ints.assign(n, 0);
        return v;
    }
    void set(size_t i, double value)
    {
        if (isFloat) reals[i] = value;
        else ints[i] = saturatingInt(value);
    }
    void setInt(size_t i, std::int64_t value)
    {
        if (isFloat) reals[i] = static_cast<double>(value);
        else ints[i] = value;
    }
};

template <typename T> T loadRaw(const char* p)
{
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

// The values of a tensor proto, when small and stored inline; nullopt otherwise.
std::optional<ConstValue> readTensor(const onnx::TensorProto& t)
{
    Shape dims(t.dims().begin(), t.dims().end());
    if (dims.size() > kMaxRank) return std::nullopt;
    const auto n = elementCount(dims);
    if (!n || *n > kMaxConstElements) return std::nullopt;
    if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) return std::nullopt;
    const int type = t.data_type();
    ConstValue v = ConstValue::make(dims, isFloatType(type));
    const auto count = static_cast<size_t>(*n);
    const std::string& raw = t.raw_data();
    auto fromRaw = [&](size_t width, auto decode) {
        if (raw.size() != count * width) return false;
        for (size_t i = 0; i < count; ++i) decode(i, raw.data() + i * width);
        return true;
    };
    const bool hasRaw = t.has_raw_data();
    switch (type) {
    case onnx::TensorProto_DataType_FLOAT:
        if (hasRaw) return fromRaw(4, [&](size_t i, const char* p) { v.reals[i] = loadRaw<float>(p); }) ? std::optional(v) : std::nullopt;
        if (static_cast<size_t>(t.float_data_size()) != count) return std::nullopt;
        for (size_t i = 0; i < count; ++i) v.reals[i] = t.float_data(static_cast<int>(i));
        return v;
    case onnx::TensorProto_DataType_DOUBLE:
        if (hasRaw) return fromRaw(8, [&](size_t i, const char* p) { v.reals[i] = loadRaw<double>(p); }) ? std::optional(v) : std::nullopt;
        if (static_cast<size_t>(t.double_data_size()) != count) return std::nullopt;
        for (size_t i = 0; i < count; ++i) v.reals[i] = t.double_data(static_cast<int>(i));
        return v;
    case onnx::TensorProto_DataType_INT64:
        if (hasRaw) return fromRaw(8, [&](size_t i, const char* p) { v.ints[i] = loadRaw<std::int64_t>(p); }) ? std::optional(v) : std::nullopt;
        if (static_cast<size_t>(t.int64_data_size()) != count) return std::nullopt;
        for (size_t i = 0; i < count; ++i) v.ints[i] = t.int64_data(static_cast<int>(i));
        return v;
    case onnx::TensorProto_DataType_UINT64: case onnx::TensorProto_DataType_UINT32:
        if (hasRaw) {
            const size_t width = type == onnx::TensorProto_DataType_UINT64 ? 8 : 4;
            return fromRaw(width, [&](size_t i, const char* p) {
                v.ints[i] = width == 8 ? saturatingInt(static_cast<double>(loadRaw<std::uint64_t>(p)))
                                       : static_cast<std::int64_t>(loadRaw<std::uint32_t>(p));
            }) ? std::optional(v) : std::nullopt;
        }
        if (static_cast<size_t>(t.uint64_data_size()) != count) return std::nullopt;
        for (size_t i = 0; i < count; ++i) v.ints[i] = saturatingInt(static_cast<double>(t.uint64_data(static_cast<int>(i))));
        return v;
    case onnx::TensorProto_DataType_INT32: case onnx::TensorProto_DataType_INT16:
    case onnx::TensorProto_DataType_UINT16: case onnx::TensorProto_DataType_INT8:
    case onnx::TensorProto_DataType_UINT8: case onnx::TensorProto_DataType_BOOL:
        if (hasRaw) {
            switch (type) {
            case onnx::TensorProto_DataType_INT32:
                return fromRaw(4, [&](size_t i, const char* p) { v.ints[i] = loadRaw<std::int32_t>(p); }) ? std::optional(v) : std::nullopt;
            case onnx::TensorProto_DataType_INT16:
                return fromRaw(2, [&](size_t i, const char* p) { v.ints[i] = loadRaw<std::int16_t>(p); }) ? std::optional(v) : std::nullopt;
            case onnx::TensorProto_DataType_UINT16:
                return fromRaw(2, [&](size_t i, const char* p) { v.ints[i] = loadRaw<std::uint16_t>(p); }) ? std::optional(v) : std::nullopt;
            case onnx::TensorProto_DataType_INT8:
                return fromRaw(1, [&](size_t i, const char* p) { v.ints[i] = loadRaw<std::int8_t>(p); }) ? std::optional(v) : std::nullopt;
            default:
                return fromRaw(1, [&](size_t i, const char* p) { v.ints[i] = loadRaw<std::uint8_t>(p); }) ? std::optional(v) : std::nullopt;
            }
        }
        if (static_cast<size_t>(t.int32_data_size()) != count) return std::nullopt;
        for (size_t i = 0; i < count; ++i) v.ints[i] = t.int32_data(static_cast<int>(i));
        return v;
    default:
        return std::nullopt; // f16, bf16, strings, complex: shape only
    }
}

// For each element of `out`, the flat index of the element of `in` it reads under numpy
// broadcasting. The caller has checked that `in` broadcasts to `out`.
std::vector<size_t> broadcastIndex(const Shape& in, const Shape& out)
{
    const size_t n = static_cast<size_t>(elementCount(out).value_or(0));
    std::vector<size_t> map(n, 0);
    const size_t offset = out.size() - in.size();
    std::vector<size_t> inStride(out.size(), 0);
    size_t stride = 1;
    for (size_t d = in.size(); d-- > 0;) {
        inStride[offset + d] = in[d] == 1 ? 0 : stride;
        stride *= static_cast<size_t>(in[d]);
    }
    std::vector<std::int64_t> counter(out.size(), 0);
    size_t flat = 0;
    for (size_t i = 0; i < n; ++i) {
        map[i] = flat;
        for (size_t d = out.size(); d-- > 0;) {
            flat += inStride[d];
            if (++counter[d] < out[d]) break;
            flat -= inStride[d] * static_cast<size_t>(counter[d]);
            counter[d] = 0;
        }
    }
    return map;
}

std::optional<Shape> broadcastShapes(const std::vector<const Shape*>& shapes)
{
    size_t rank = 0;
    for (auto* s : shapes) rank = std::max(rank, s->size());
    Shape out(rank, 1);
    for (auto* s : shapes)
        for (size_t d = 0; d < s->size(); ++d) {
            auto& o = out[rank - s->size() + d];
            const auto v = (*s)[d];
            if (v == o || v == 1) continue;
            if (o != 1) return std::nullopt;
            o = v;
        }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Attributes

const onnx::AttributeProto* findAttr(const onnx::NodeProto* n, std::string_view name)
{
    if (!n) return nullptr;
    for (const auto& a : n->attribute())
        if (a.name() == name) return &a;
    return nullptr;
}

std::optional<std::int64_t> attrInt(const onnx::NodeProto* n, std::string_view name)
{
    const auto* a = findAttr(n, name);
    if (!a || a->type() != onnx::AttributeProto_AttributeType_INT) return std::nullopt;
    return a->i();
}

std::optional<std::vector<std::int64_t>> attrInts(const onnx::NodeProto* n, std::string_view name)
{
    const auto* a = findAttr(n, name);
    if (!a || a->type() != onnx::AttributeProto_AttributeType_INTS) return std::nullopt;
    return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
}

std::optional<std::string> attrString(const onnx::NodeProto* n, std::string_view name)
{
    const auto* a = findAttr(n, name);
    if (!a || a->type() != onnx::AttributeProto_AttributeType_STRING) return std::nullopt;
    return a->s();
}

/// An ONNX Einsum equation as operand terms and an output term, or why it is not one we model
/// (an ellipsis, a diagonal, a letter that is not a-z/A-Z). Without "->" the output is, as the
/// ONNX spec says, the letters that appear once, in alphabetical order.
struct EinsumTerms {
    std::vector<std::string> inputs;
    std::string output;
    std::string problem;
};

EinsumTerms parseEinsumEquation(const std::string& text)
{
    EinsumTerms e;
    std::string eq;
    for (char c : text)
        if (c != ' ' && c != '\t') eq += c;
    if (eq.find("...") != std::string::npos) {
        e.problem = "an Einsum with an ellipsis ('...')";
        return e;
    }
    const auto arrow = eq.find("->");
    const std::string lhs = eq.substr(0, arrow);
    std::string term;
    for (size_t i = 0; i <= lhs.size(); ++i) {
        if (i == lhs.size() || lhs[i] == ',') {
            e.inputs.push_back(term);
            term.clear();
        } else {
            term += lhs[i];
        }
    }
    std::map<char, int> uses;
    for (const auto& t : e.inputs)
        for (char c : t) ++uses[c];
    if (arrow == std::string::npos) {
        for (const auto& [c, count] : uses)
            if (count == 1) e.output += c;
    } else {
        e.output = eq.substr(arrow + 2);
    }
    for (const auto& t : e.inputs) {
        for (char c : t)
            if (!std::isalpha(static_cast<unsigned char>(c))) e.problem = "Einsum equation '" + text + "' has '" + std::string(1, c) + "' where a letter belongs";
        for (size_t i = 0; i < t.size() && e.problem.empty(); ++i)
            if (t.find(t[i], i + 1) != std::string::npos) e.problem = "an Einsum that takes a diagonal ('" + t + "')";
    }
    for (char c : e.output)
        if (!uses.count(c) && e.problem.empty()) e.problem = "Einsum equation '" + text + "': output letter '" + std::string(1, c) + "' is in no operand";
    return e;
}

// ---------------------------------------------------------------------------------------------
// The importer

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
    bool constant = false;                ///< computed from constants and shapes only
    std::optional<ConstValue> value;      ///< its numbers, when small enough to evaluate
    std::string alias;                    ///< this value is that one (Identity, Dropout, Cast)
    std::string viewOf;                   ///< this value is a reshaped/transposed view of that weight
    TensorId tensor = -1;
};

enum class Slot : std::uint8_t { Data, Weight, Buffer, Either, Through, Ignored };

class Importer {
public:
    Importer(std::string origin, const OnnxImportOptions& options) : origin_(std::move(origin)), options_(options) {}

    Graph run(const std::string& bytes)
    {
        if (!model_.ParseFromString(bytes)) fail("not an ONNX model (the protobuf message does not parse)");
        if (!model_.has_graph()) fail("the ONNX model has no graph");
        for (const auto& op : model_.opset_import())
            if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
        if (model_.graph().node_size() > static_cast<int>(kMaxNodes))
            fail("the graph has " + std::to_string(model_.graph().node_size()) + " nodes; at most " +
                 std::to_string(kMaxNodes) + " are supported");
        setInputDims();
        checkInputsDefined();
        inferShapes();
        analyse();
        if (injectFoldedConstants()) { // a second round lets shape inference see the folded values
            inferShapes();
            analyse();
        }
        collapsePatterns();
        for (size_t i = 0; i < nodes_.size(); ++i)
            if (live_[i]) mapNode(effective(i));
        markOutputs();
        // Planning needs at least one op; a graph of only shape arithmetic folds to none.
        if (graph_.ops.empty()) fail("the graph has no operators left to plan once shape-only subgraphs are folded away");
        graph_.name = model_.graph().name().empty() ? origin_ : model_.graph().name();
        try {
            validateGraph(graph_);
        } catch (const InputError& e) {
            fail(std::string("the imported graph is inconsistent: ") + e.what());
        }
        return std::move(graph_);
    }

private:
    [[noreturn]] void fail(const std::string& reason) const { throw InputError(origin_ + ": " + reason); }
    [[noreturn]] void failNode(const Node& n, const std::string& reason) const
    {
        fail("node '" + (n.proto ? n.proto->name() : n.name) + "' (op type " + n.type + ", node " +
             std::to_string(n.index) + "): " + reason);
    }

    // ---- preparation -------------------------------------------------------------------------

    std::unordered_set<std::string> initializerNames() const
    {
        std::unordered_set<std::string> names;
        for (const auto& t : model_.graph().initializer()) names.insert(t.name());
        return names;
    }

    // Dynamic dims of the data inputs take their values from the options; the shapes recorded
    // for intermediate values are dropped so that inference recomputes them for these sizes.
    void setInputDims()
    {
        auto* g = model_.mutable_graph();
        const auto inits = initializerNames();
        const std::int64_t batch = options_.batch > 0 ? options_.batch : kDefaultBatch;
        const std::int64_t seq = options_.seq > 0 ? options_.seq : kDefaultSeq;
        for (auto& input : *g->mutable_input()) {
            if (inits.count(input.name()) || !input.type().has_tensor_type()) continue;
            auto* tensorType = input.mutable_type()->mutable_tensor_type();
            if (!tensorType->has_shape()) continue;
            auto* dims = tensorType->mutable_shape()->mutable_dim();
            for (int d = 0; d < dims->size(); ++d) {
                auto* dim = dims->Mutable(d);
                if (dim->has_dim_value() && dim->dim_value() > 0) {
                    if (d == 0 && options_.batch > 0 && dims->size() > 1 && isDataLike(input.name())) dim->set_dim_value(batch);
                    continue;
                }
                std::string label = dim->has_dim_param() ? dim->dim_param() : "";
                std::transform(label.begin(), label.end(), label.begin(), [](unsigned char c) { return std::tolower(c); });
                const bool batchLike = label.find("batch") != std::string::npos ||
                                       (d == 0 && label.find("seq") == std::string::npos &&
                                        label.find("len") == std::string::npos);
                dim->set_dim_value(batchLike ? batch : seq);
                dynamicInputs_.insert(input.name());
            }
        }
        g->clear_value_info();
        for (auto& output : *g->mutable_output())
            if (output.type().has_tensor_type()) output.mutable_type()->mutable_tensor_type()->clear_shape();
    }

    // Only the first graph input that is not an initializer counts as data for sure; the
    // batch override applies to it and to other inputs whose leading dim is dynamic.
    bool isDataLike(const std::string& name) const
    {
        const auto inits = initializerNames();
        for (const auto& input : model_.graph().input())
            if (!inits.count(input.name())) return input.name() == name;
        return false;
    }

    // ONNX's shape inference dereferences the type of a node input without checking it (found by
    // fuzzing: Shape of an undefined value, or of the output of an operator ONNX does not know,
    // crashes libonnx). So before it runs, every input must be defined earlier and have a type:
    // declared (graph input, initializer, value_info) or coming from an operator with a schema.
    void checkInputsDefined() const
    {
        const auto& g = model_.graph();
        std::unordered_set<std::string> defined, typed;
        for (const auto& input : g.input()) {
            defined.insert(input.name());
            if (input.has_type()) typed.insert(input.name());
        }
        for (const auto& t : g.initializer()) defined.insert(t.name()), typed.insert(t.name());
        for (const auto* infos : {&g.value_info(), &g.output()})
            for (const auto& info : *infos)
                if (info.has_type()) typed.insert(info.name());
        for (int i = 0; i < g.node_size(); ++i) {
            const auto& p = g.node(i);
            Node n;
            n.proto = &p;
            n.index = static_cast<size_t>(i);
            n.type = !p.domain().empty() && p.domain() != "ai.onnx" ? p.domain() + "." + p.op_type() : p.op_type();
            for (const auto& in : p.input()) {
                if (in.empty()) continue;
                if (!defined.count(in))
                    failNode(n, "input '" + in + "' is produced by no earlier node, initializer or graph input "
                                "(nodes must be in topological order)");
                if (!typed.count(in))
                    failNode(n, "input '" + in + "' has no type: the operator producing it is unknown to ONNX "
                                "and the file declares no value_info for it");
            }
            const bool known = schemaOf(p) != nullptr;
            for (const auto& out : p.output()) {
                if (out.empty()) continue;
                defined.insert(out);
                if (known) typed.insert(out);
            }
        }
    }

    const onnx::OpSchema* schemaOf(const onnx::NodeProto& node) const
    {
        const bool standard = node.domain().empty() || node.domain() == "ai.onnx";
        std::int64_t version = standard ? opset_ : -1;
        for (const auto& op : model_.opset_import())
            if (!standard && op.domain() == node.domain()) version = op.version();
        if (version < 0 || version > std::numeric_limits<int>::max()) return nullptr;
        return onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(version), standard ? "" : node.domain());
    }

    void inferShapes()
    {
        try {
            onnx::ShapeInferenceOptions options(false, 0, true);
            onnx::shape_inference::InferShapes(model_, onnx::OpSchemaRegistry::Instance(), options);
        } catch (const std::exception& e) {
            std::string what = e.what();
            std::replace(what.begin(), what.end(), '\n', ' ');
            fail("ONNX shape inference failed: " + what);
        }
    }

    // ---- analysis: values, constants, weights ------------------------------------------------

    void recordType(const onnx::ValueInfoProto& info)
    {
        auto& v = values_[info.name()];
        if (!info.type().has_tensor_type()) return;
        const auto& tt = info.type().tensor_type();
        if (tt.elem_type()) v.elemType = tt.elem_type();
        if (!tt.has_shape()) return;
        Shape shape;
        for (const auto& d : tt.shape().dim()) {
            if (!d.has_dim_value() || d.dim_value() < 0) return;
            shape.push_back(d.dim_value());
        }
        v.shape = std::move(shape);
    }

    void analyse()
    {
        const auto& g = model_.graph();
        values_.clear();
        nodes_.clear();
        for (const auto& info : g.input()) {
            recordType(info);
            values_[info.name()].graphInput = true;
        }
        for (const auto& info : g.value_info()) recordType(info);
        for (const auto& info : g.output()) recordType(info);
        for (const auto& info : g.output()) values_[info.name()].graphOutput = true;
        for (const auto& t : g.initializer()) {
            auto& v = values_[t.name()];
            v.initializer = true;
            v.initializerProto = &t;
            v.elemType = t.data_type();
            v.shape = Shape(t.dims().begin(), t.dims().end());
        }
        std::unordered_set<std::string> defined;
        for (const auto& [name, v] : values_)
            if (v.graphInput || v.initializer) defined.insert(name);
        nodes_.reserve(static_cast<size_t>(g.node_size()));
        for (int i = 0; i < g.node_size(); ++i) {
            const auto& p = g.node(i);
            Node n;
            n.proto = &p;
            n.index = static_cast<size_t>(i);
            n.type = p.op_type();
            n.name = p.name();
            while (!n.name.empty() && n.name.front() == '/') n.name.erase(0, 1);
            if (n.name.empty()) n.name = n.type + "_" + std::to_string(i);
            n.inputs.assign(p.input().begin(), p.input().end());
            n.outputs.assign(p.output().begin(), p.output().end());
            if (!p.domain().empty() && p.domain() != "ai.onnx") n.type = p.domain() + "." + n.type;
            for (const auto& in : n.inputs)
                if (!in.empty() && !defined.count(in))
                    failNode(n, "input '" + in + "' is produced by no earlier node, initializer or graph input "
                                "(nodes must be in topological order)");
            for (const auto& out : n.outputs) {
                if (out.empty()) continue;
                if (!defined.insert(out).second) failNode(n, "output '" + out + "' is defined twice");
                values_[out].producer = static_cast<int>(nodes_.size());
            }
            nodes_.push_back(std::move(n));
        }
        buildConsumers();
        classifySources();
        foldConstants();
        findAliasesAndViews();
    }

    void buildConsumers()
    {
        consumers_.clear();
        for (size_t i = 0; i < nodes_.size(); ++i)
            for (const auto& in : nodes_[i].inputs)
                if (!in.empty()) {
                    auto& list = consumers_[in];
                    if (list.empty() || list.back() != i) list.push_back(i);
                }
    }

    const std::vector<size_t>& consumersOf(const std::string& value) const
    {
        static const std::vector<size_t> none;
        auto it = consumers_.find(value);
        return it == consumers_.end() ? none : it->second;
    }

    Value& value(const std::string& name) { return values_[name]; }
    const Value* find(const std::string& name) const
    {
        auto it = values_.find(name);
        return it == values_.end() ? nullptr : &it->second;
    }
    int elemType(const std::string& name) const
    {
        const Value* v = find(name);
        return v ? v->elemType : 0;
    }
    std::optional<Shape> shapeOf(const std::string& name) const
    {
        const Value* v = find(name);
        return v ? v->shape : std::nullopt;
    }

    // What a consumer does with its input `i`: the evidence for telling weights from data.
    Slot slotOf(const Node& n, size_t i) const
    {
        const std::string& t = n.type;
        if (t == "MatMul") {
            const auto s = shapeOf(n.inputs[i]);
            if (i == 1 && s && s->size() <= 2) return Slot::Weight;
            return i == 0 ? Slot::Data : Slot::Either;
        }
        if (t == "Gemm" || t == "Conv" || t == "ConvTranspose" || t == "LayerNormalization" ||
            t == "InstanceNormalization" || t == "PRelu")
            return i == 0 ? Slot::Data : Slot::Weight;
        if (t == "BatchNormalization") return i == 0 ? Slot::Data : i <= 2 ? Slot::Weight : Slot::Buffer;
        if (t == "Gather") {
            if (i == 1) return Slot::Data;
            return n.inputs.size() > 1 && isIntegerType(elemType(n.inputs[1])) ? Slot::Weight : Slot::Data;
        }
        if (t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "Where" || t == "Concat" || t == "Expand")
            return Slot::Either;
        if (t == "Transpose" || t == "Cast" || t == "Reshape" || t == "Unsqueeze" || t == "Squeeze" || t == "Flatten")
            return i == 0 ? Slot::Through : Slot::Ignored;
        if (t == "Shape" || t == "Size" || t == "Identity") return Slot::Ignored;
        return Slot::Data;
    }

    struct SlotEvidence { bool weight = false, buffer = false, data = false, either = false; };

    // Iterative: a long chain of reshapes must not exhaust the stack.
    void collectSlots(const std::string& start, SlotEvidence& ev) const
    {
        std::unordered_set<std::string> seen{start};
        std::vector<std::string> pending{start};
        while (!pending.empty()) {
            const std::string name = std::move(pending.back());
            pending.pop_back();
            for (size_t c : consumersOf(name)) {
                const Node& n = nodes_[c];
                for (size_t i = 0; i < n.inputs.size(); ++i) {
                    if (n.inputs[i] != name) continue;
                    switch (slotOf(n, i)) {
                    case Slot::Weight: ev.weight = true; break;
                    case Slot::Buffer: ev.buffer = true; break;
                    case Slot::Data: ev.data = true; break;
                    case Slot::Either: ev.either = true; break;
                    case Slot::Through:
                        for (const auto& out : n.outputs)
                            if (!out.empty() && seen.insert(out).second) pending.push_back(out);
                        break;
                    case Slot::Ignored: break;
                    }
                }
            }
        }
    }

    // Initializers and graph inputs are data, weights or constants. Files exported with
    // export_params=False carry the weights as graph inputs, so the decision rests on how each
    // is used: as the weight operand of MatMul/Gemm/Conv/embedding/norms it is a weight; BatchNorm
    // running statistics are constants (buffers); the first graph input is the model's data.
    void classifySources()
    {
        const auto& g = model_.graph();
        std::string firstData;
        for (const auto& input : g.input())
            if (!values_[input.name()].initializer) { firstData = input.name(); break; }
        auto classify = [&](const std::string& name, Value& v) {
            const bool isFloat = isFloatType(v.elemType);
            if (name == firstData) return SourceKind::Data;
            if (!isFloat) return v.initializer ? SourceKind::Constant : SourceKind::Data;
            SlotEvidence ev;
            collectSlots(name, ev);
            if (ev.weight) return SourceKind::Weight;
            if (ev.buffer) return SourceKind::Constant;
            if (v.initializer) {
                const auto n = v.shape ? elementCount(*v.shape) : std::nullopt;
                return n && *n > 1 ? SourceKind::Weight : SourceKind::Constant;
            }
            if (ev.data || dynamicInputs_.count(name)) return SourceKind::Data;
            return SourceKind::Weight; // used only in elementwise ops with activations: a parameter
        };
        for (const auto& input : g.input()) {
            auto& v = values_[input.name()];
            v.source = classify(input.name(), v);
        }
        for (const auto& t : g.initializer()) {
            auto& v = values_[t.name()];
            v.source = injected_.count(t.name()) ? SourceKind::Constant : classify(t.name(), v);
        }
        // torch.onnx.export de-duplicates parameters with equal values (fresh models: every norm
        // weight is 1) by an Identity from one parameter to the other's name; each is its own
        // parameter, classified by its own uses.
        for (auto& n : nodes_) {
            if (n.type != "Identity" || n.inputs.size() != 1 || n.outputs.size() != 1) continue;
            const Value* in = find(n.inputs[0]);
            if (!in || (in->source != SourceKind::Weight && in->source != SourceKind::Constant)) continue;
            auto& out = values_[n.outputs[0]];
            if (!out.shape) out.shape = in->shape;
            if (!out.elemType) out.elemType = in->elemType;
            out.source = classify(n.outputs[0], out);
            out.producer = -1;
            n.type = "Identity(parameter)";
        }
        for (auto& [name, v] : values_)
            if (v.source == SourceKind::Constant) {
                v.constant = true;
                if (v.initializerProto) v.value = readTensor(*v.initializerProto);
            }
    }

    // ---- constant folding --------------------------------------------------------------------

    bool isConstant(const std::string& name) const
    {
        if (name.empty()) return true;
        const Value* v = find(name);
        return v && v->constant;
    }

    const ConstValue* constValue(const std::string& name) const
    {
        const Value* v = find(name);
        return v && v->value ? &*v->value : nullptr;
    }

    void foldConstants()
    {
        live_.assign(nodes_.size(), true);
        for (size_t i = 0; i < nodes_.size(); ++i) {
            Node& n = nodes_[i];
            if (n.type == "Identity(parameter)") { live_[i] = false; continue; }
            bool constant = true;
            if (n.type == "Shape" || n.type == "Size") {
                constant = true; // depends on the shape only
            } else {
                for (const auto& in : n.inputs) constant = constant && isConstant(in);
            }
            if (!constant) continue;
            live_[i] = false;
            std::optional<ConstValue> result;
            try {
                result = evaluate(n);
            } catch (const std::exception&) {
                result.reset(); // an odd constant: keep only its shape
            }
            for (size_t k = 0; k < n.outputs.size(); ++k) {
                if (n.outputs[k].empty()) continue;
                auto& v = values_[n.outputs[k]];
                v.constant = true;
                if (k == 0 && result) {
                    v.value = std::move(result);
                    if (!v.shape) v.shape = v.value->dims;
                }
            }
        }
    }

    std::optional<ConstValue> evaluate(const Node& n) const
    {
        const auto* p = n.proto;
        const std::string& t = n.type;
        auto in = [&](size_t i) -> const ConstValue* { return i < n.inputs.size() ? constValue(n.inputs[i]) : nullptr; };
        auto small = [](const Shape& dims) {
            auto c = elementCount(dims);
            return c && *c <= kMaxConstElements && dims.size() <= kMaxRank;
        };
        if (t == "Constant") {
            if (const auto* a = findAttr(p, "value")) return readTensor(a->t());
            if (const auto* a = findAttr(p, "value_int")) { auto v = ConstValue::make({}, false); v.ints[0] = a->i(); return v; }
            if (const auto* a = findAttr(p, "value_float")) { auto v = ConstValue::make({}, true); v.reals[0] = a->f(); return v; }
            if (const auto* a = findAttr(p, "value_ints")) {
                auto v = ConstValue::make({a->ints_size()}, false);
                for (int i = 0; i < a->ints_size(); ++i) v.ints[static_cast<size_t>(i)] = a->ints(i);
                return v;
            }
            if (const auto* a = findAttr(p, "value_floats")) {
                auto v = ConstValue::make({a->floats_size()}, true);
                for (int i = 0; i < a->floats_size(); ++i) v.reals[static_cast<size_t>(i)] = a->floats(i);
                return v;
            }
            return std::nullopt;
        }
        if (t == "Shape" || t == "Size") {
            const auto s = n.inputs.empty() ? std::nullopt : shapeOf(n.inputs[0]);
            if (!s) return std::nullopt;
            if (t == "Size") { auto v = ConstValue::make({}, false); v.ints[0] = elementCount(*s).value_or(0); return v; }
            const auto rank = static_cast<std::int64_t>(s->size());
            auto clampAxis = [&](std::int64_t a) { if (a < 0) a += rank; return std::clamp<std::int64_t>(a, 0, rank); };
            const auto start = clampAxis(attrInt(p, "start").value_or(0));
            const auto end = clampAxis(attrInt(p, "end").value_or(rank));
            auto v = ConstValue::make({std::max<std::int64_t>(end - start, 0)}, false);
            for (std::int64_t i = start; i < end; ++i) v.ints[static_cast<size_t>(i - start)] = (*s)[static_cast<size_t>(i)];
            return v;
        }
        if (t == "Identity" || t == "Cast" || t == "Reshape" || t == "Unsqueeze" || t == "Squeeze" || t == "Flatten") {
            const ConstValue* x = in(0);
            const auto out = shapeOf(n.outputs.at(0));
            if (!x) return std::nullopt;
            ConstValue v = *x;
            if (t == "Cast") {
                const auto to = attrInt(p, "to").value_or(0);
                const bool toFloat = isFloatType(static_cast<int>(to));
                ConstValue c = ConstValue::make(x->dims, toFloat);
                for (size_t i = 0; i < x->size(); ++i) {
                    if (to == onnx::TensorProto_DataType_BOOL) c.setInt(i, x->real(i) != 0.0);
                    else if (toFloat) c.set(i, x->real(i));
                    else c.setInt(i, x->integer(i));
                }
                return c;
            }
            if (t == "Identity") return v;
            if (t == "Unsqueeze" || t == "Squeeze") {
                std::vector<std::int64_t> axes = attrInts(p, "axes").value_or(std::vector<std::int64_t>{});
                if (opset_ >= 13 && n.inputs.size() > 1 && !n.inputs[1].empty()) {
                    if (!in(1)) return std::nullopt;
                    axes = in(1)->integers();
                }
                Shape dims;
                if (t == "Unsqueeze") {
                    const size_t rank = x->dims.size() + axes.size();
                    std::vector<bool> inserted(rank, false);
                    for (auto a : axes) {
                        const auto na = normalAxis(a, rank);
                        if (!na || inserted[*na]) return std::nullopt;
                        inserted[*na] = true;
                    }
                    size_t k = 0;
                    for (size_t d = 0; d < rank; ++d) dims.push_back(inserted[d] ? 1 : x->dims[k++]);
                } else {
                    std::vector<bool> removed(x->dims.size(), axes.empty());
                    for (auto a : axes) {
                        const auto na = normalAxis(a, x->dims.size());
                        if (!na) return std::nullopt;
                        removed[*na] = true;
                    }
                    for (size_t d = 0; d < x->dims.size(); ++d)
                        if (!removed[d] || x->dims[d] != 1) dims.push_back(x->dims[d]);
                }
                v.dims = dims;
                return v;
            }
            if (t == "Reshape" && !out) {
                const ConstValue* target = in(1);
                if (!target) return std::nullopt;
                Shape dims = target->integers();
                std::int64_t known = 1;
                int unknown = -1;
                for (size_t d = 0; d < dims.size(); ++d) {
                    if (dims[d] == 0 && d < x->dims.size() && attrInt(p, "allowzero").value_or(0) == 0) dims[d] = x->dims[d];
                    if (dims[d] == -1) unknown = static_cast<int>(d);
                    else if (dims[d] <= 0) return std::nullopt;
                    else known *= dims[d];
                }
                if (unknown >= 0) {
                    if (known == 0 || static_cast<std::int64_t>(x->size()) % known) return std::nullopt;
                    dims[static_cast<size_t>(unknown)] = static_cast<std::int64_t>(x->size()) / known;
                }
                if (elementCount(dims) != static_cast<std::int64_t>(x->size())) return std::nullopt;
                v.dims = dims;
                return v;
            }
            if (!out || elementCount(*out) != static_cast<std::int64_t>(x->size())) return std::nullopt;
            v.dims = *out;
            return v;
        }
        if (t == "ConstantOfShape") {
            const ConstValue* s = in(0);
            if (!s) return std::nullopt;
            Shape dims = s->integers();
            if (!small(dims)) return std::nullopt;
            std::optional<ConstValue> fill;
            if (const auto* a = findAttr(p, "value")) fill = readTensor(a->t());
            const bool isFloat = fill ? fill->isFloat : true;
            auto v = ConstValue::make(dims, isFloat);
            if (fill && fill->size() > 0)
                for (size_t i = 0; i < v.size(); ++i) v.set(i, fill->real(0));
            return v;
        }
        if (t == "Range") {
            const ConstValue *a = in(0), *b = in(1), *c = in(2);
            if (!a || !b || !c || !a->size() || !b->size() || !c->size()) return std::nullopt;
            const double start = a->real(0), limit = b->real(0), delta = c->real(0);
            if (delta == 0 || std::isnan(start) || std::isnan(limit) || std::isnan(delta)) return std::nullopt;
            const double count = std::max(std::ceil((limit - start) / delta), 0.0);
            if (count > static_cast<double>(kMaxConstElements)) return std::nullopt;
            auto v = ConstValue::make({static_cast<std::int64_t>(count)}, a->isFloat);
            for (size_t i = 0; i < v.size(); ++i) v.set(i, start + static_cast<double>(i) * delta);
            return v;
        }
        if (t == "Gather") {
            const ConstValue *data = in(0), *idx = in(1);
            if (!data || !idx || data->dims.empty()) return std::nullopt;
            const auto axis = normalAxis(attrInt(p, "axis").value_or(0), data->dims.size());
            if (!axis) return std::nullopt;
            Shape dims(data->dims.begin(), data->dims.begin() + static_cast<std::ptrdiff_t>(*axis));
            dims.insert(dims.end(), idx->dims.begin(), idx->dims.end());
            dims.insert(dims.end(), data->dims.begin() + static_cast<std::ptrdiff_t>(*axis) + 1, data->dims.end());
            if (!small(dims)) return std::nullopt;
            std::int64_t outer = 1, inner = 1;
            for (size_t d = 0; d < *axis; ++d) outer *= data->dims[d];
            for (size_t d = *axis + 1; d < data->dims.size(); ++d) inner *= data->dims[d];
            const std::int64_t axisSize = data->dims[*axis];
            auto v = ConstValue::make(dims, data->isFloat);
            size_t o = 0;
            for (std::int64_t a = 0; a < outer; ++a)
                for (size_t k = 0; k < idx->size(); ++k) {
                    std::int64_t j = idx->integer(k);
                    if (j < 0) j += axisSize;
                    if (j < 0 || j >= axisSize) return std::nullopt;
                    for (std::int64_t b = 0; b < inner; ++b)
                        v.set(o++, data->real(static_cast<size_t>((a * axisSize + j) * inner + b)));
                }
            if (!data->isFloat) { // exact integers
                o = 0;
                for (std::int64_t a = 0; a < outer; ++a)
                    for (size_t k = 0; k < idx->size(); ++k) {
                        std::int64_t j = idx->integer(k);
                        if (j < 0) j += axisSize;
                        for (std::int64_t b = 0; b < inner; ++b)
                            v.ints[o++] = data->ints[static_cast<size_t>((a * axisSize + j) * inner + b)];
                    }
            }
            return v;
        }
        if (t == "Concat") {
            std::vector<const ConstValue*> parts;
            for (size_t i = 0; i < n.inputs.size(); ++i) {
                const ConstValue* x = in(i);
                if (!x) return std::nullopt;
                parts.push_back(x);
            }
            if (parts.empty() || parts[0]->dims.empty()) return std::nullopt;
            const auto axis = normalAxis(attrInt(p, "axis").value_or(0), parts[0]->dims.size());
            if (!axis) return std::nullopt;
            Shape dims = parts[0]->dims;
            dims[*axis] = 0;
            bool isFloat = false;
            for (auto* x : parts) {
                if (x->dims.size() != dims.size()) return std::nullopt;
                for (size_t d = 0; d < dims.size(); ++d)
                    if (d != *axis && x->dims[d] != dims[d]) return std::nullopt;
                dims[*axis] += x->dims[*axis];
                isFloat = isFloat || x->isFloat;
            }
            if (!small(dims)) return std::nullopt;
            std::int64_t outer = 1;
            for (size_t d = 0; d < *axis; ++d) outer *= dims[d];
            auto v = ConstValue::make(dims, isFloat);
            size_t o = 0;
            for (std::int64_t a = 0; a < outer; ++a)
                for (auto* x : parts) {
                    const std::int64_t chunk = static_cast<std::int64_t>(x->size()) / std::max<std::int64_t>(outer, 1);
                    for (std::int64_t k = 0; k < chunk; ++k) {
                        const auto src = static_cast<size_t>(a * chunk + k);
                        if (x->isFloat) v.set(o++, x->reals[src]);
                        else v.setInt(o++, x->ints[src]);
                    }
                }
            return v;
        }
        if (t == "Slice") {
            const ConstValue* data = in(0);
            if (!data) return std::nullopt;
            std::vector<std::int64_t> starts, ends, axes, steps;
            if (opset_ < 10) {
                starts = attrInts(p, "starts").value_or(std::vector<std::int64_t>{});
                ends = attrInts(p, "ends").value_or(std::vector<std::int64_t>{});
                axes = attrInts(p, "axes").value_or(std::vector<std::int64_t>{});
            } else {
                if (!in(1) || !in(2)) return std::nullopt;
                starts = in(1)->integers();
                ends = in(2)->integers();
                if (n.inputs.size() > 3 && !n.inputs[3].empty()) { if (!in(3)) return std::nullopt; axes = in(3)->integers(); }
                if (n.inputs.size() > 4 && !n.inputs[4].empty()) { if (!in(4)) return std::nullopt; steps = in(4)->integers(); }
            }
            const size_t rank = data->dims.size();
            if (axes.empty()) for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
            if (steps.empty()) steps.assign(starts.size(), 1);
            if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) return std::nullopt;
            std::vector<std::int64_t> first(rank, 0), step(rank, 1);
            Shape dims = data->dims;
            for (size_t k = 0; k < starts.size(); ++k) {
                const auto axis = normalAxis(axes[k], rank);
                if (!axis || steps[k] == 0) return std::nullopt;
                const std::int64_t size = data->dims[*axis];
                auto clampIndex = [&](std::int64_t i, bool forward) {
                    if (i < 0) i = i < -size ? -1 : i + size;
                    return forward ? std::clamp<std::int64_t>(i, 0, size) : std::clamp<std::int64_t>(i, -1, size - 1);
                };
                const bool forward = steps[k] > 0;
                const std::int64_t s = clampIndex(starts[k], forward), e = clampIndex(ends[k], forward);
                const std::int64_t count = forward ? (e > s ? (e - s + steps[k] - 1) / steps[k] : 0)
                                                   : (s > e ? (s - e + (-steps[k]) - 1) / (-steps[k]) : 0);
                first[*axis] = s;
                step[*axis] = steps[k];
                dims[*axis] = count;
            }
            auto v = ConstValue::make(dims, data->isFloat);
            std::vector<std::int64_t> counter(rank, 0);
            for (size_t o = 0; o < v.size(); ++o) {
                std::int64_t src = 0;
                for (size_t d = 0; d < rank; ++d) src = src * data->dims[d] + first[d] + counter[d] * step[d];
                if (data->isFloat) v.reals[o] = data->reals[static_cast<size_t>(src)];
                else v.ints[o] = data->ints[static_cast<size_t>(src)];
                for (size_t d = rank; d-- > 0;) {
                    if (++counter[d] < dims[d]) break;
                    counter[d] = 0;
                }
            }
            return v;
        }
        if (t == "Expand") {
            const ConstValue *x = in(0), *s = in(1);
            if (!x || !s) return std::nullopt;
            const Shape target = s->integers();
            const auto dims = broadcastShapes({&x->dims, &target});
            if (!dims || !small(*dims)) return std::nullopt;
            const auto map = broadcastIndex(x->dims, *dims);
            auto v = ConstValue::make(*dims, x->isFloat);
            for (size_t i = 0; i < map.size(); ++i) {
                if (x->isFloat) v.reals[i] = x->reals[map[i]];
                else v.ints[i] = x->ints[map[i]];
            }
            return v;
        }
        if (t == "Trilu") {
            const ConstValue* x = in(0);
            if (!x || x->dims.size() < 2) return std::nullopt;
            const std::int64_t k = in(1) && in(1)->size() ? in(1)->integer(0) : 0;
            const bool upper = attrInt(p, "upper").value_or(1) != 0;
            const std::int64_t rows = x->dims[x->dims.size() - 2], cols = x->dims.back();
            ConstValue v = *x;
            for (size_t i = 0; i < v.size(); ++i) {
                const auto flat = static_cast<std::int64_t>(i);
                const std::int64_t r = (flat / cols) % rows, c = flat % cols;
                const bool keep = upper ? c - r >= k : c - r <= k;
                if (!keep) v.setInt(i, 0);
            }
            return v;
        }
        static const std::map<std::string, std::function<double(double)>, std::less<>> unary = {
            {"Neg", [](double a) { return -a; }},
            {"Sqrt", [](double a) { return std::sqrt(a); }},
            {"Reciprocal", [](double a) { return 1.0 / a; }},
            {"Abs", [](double a) { return std::fabs(a); }},
            {"Floor", [](double a) { return std::floor(a); }},
            {"Ceil", [](double a) { return std::ceil(a); }},
            {"Not", [](double a) { return a == 0.0 ? 1.0 : 0.0; }},
            {"Exp", [](double a) { return std::exp(a); }},
            {"Log", [](double a) { return std::log(a); }},
        };
        if (auto it = unary.find(t); it != unary.end()) {
            const ConstValue* x = in(0);
            if (!x) return std::nullopt;
            ConstValue v = *x;
            for (size_t i = 0; i < v.size(); ++i) v.set(i, it->second(x->real(i)));
            return v;
        }
        using Binary = std::function<double(double, double)>;
        static const std::map<std::string, Binary, std::less<>> binary = {
            {"Add", [](double a, double b) { return a + b; }},
            {"Sub", [](double a, double b) { return a - b; }},
            {"Mul", [](double a, double b) { return a * b; }},
            {"Div", [](double a, double b) { return a / b; }},
            {"Pow", [](double a, double b) { return std::pow(a, b); }},
            {"Min", [](double a, double b) { return std::min(a, b); }},
            {"Max", [](double a, double b) { return std::max(a, b); }},
            {"Equal", [](double a, double b) { return a == b ? 1.0 : 0.0; }},
            {"Less", [](double a, double b) { return a < b ? 1.0 : 0.0; }},
            {"Greater", [](double a, double b) { return a > b ? 1.0 : 0.0; }},
            {"And", [](double a, double b) { return (a != 0 && b != 0) ? 1.0 : 0.0; }},
            {"Or", [](double a, double b) { return (a != 0 || b != 0) ? 1.0 : 0.0; }},
        };
        const bool isWhere = t == "Where";
        auto bit = binary.find(t);
        if (bit == binary.end() && !isWhere) return std::nullopt;
        std::vector<const ConstValue*> args;
        for (size_t i = 0; i < (isWhere ? 3u : 2u); ++i) {
            const ConstValue* x = in(i);
            if (!x) return std::nullopt;
            args.push_back(x);
        }
        std::vector<const Shape*> shapes;
        for (auto* a : args) shapes.push_back(&a->dims);
        const auto dims = broadcastShapes(shapes);
        if (!dims || !small(*dims)) return std::nullopt;
        std::vector<std::vector<size_t>> maps;
        for (auto* a : args) maps.push_back(broadcastIndex(a->dims, *dims));
        const bool comparison = t == "Equal" || t == "Less" || t == "Greater" || t == "And" || t == "Or";
        const bool isFloat = !comparison && (isWhere ? (args[1]->isFloat || args[2]->isFloat) : (args[0]->isFloat || args[1]->isFloat));
        auto v = ConstValue::make(*dims, isFloat);
        for (size_t i = 0; i < v.size(); ++i) {
            if (isWhere) {
                const auto* pick = args[0]->real(maps[0][i]) != 0.0 ? args[1] : args[2];
                const size_t src = maps[pick == args[1] ? 1 : 2][i];
                if (pick->isFloat || isFloat) v.set(i, pick->real(src));
                else v.setInt(i, pick->ints[src]);
            } else if (!isFloat && !comparison) { // exact integer arithmetic (floor division like ONNX)
                const std::int64_t a = args[0]->ints[maps[0][i]], b = args[1]->ints[maps[1][i]];
                if (t == "Add") v.ints[i] = static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
                else if (t == "Sub") v.ints[i] = static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
                else if (t == "Mul") v.ints[i] = static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
                else if (t == "Div") {
                    if (b == 0 || (a == std::numeric_limits<std::int64_t>::min() && b == -1)) return std::nullopt;
                    v.ints[i] = a / b;
                } else v.set(i, bit->second(static_cast<double>(a), static_cast<double>(b)));
            } else {
                v.set(i, bit->second(args[0]->real(maps[0][i]), args[1]->real(maps[1][i])));
            }
        }
        return v;
    }

    // Folded values that live nodes read become initializers, and the nodes computing them go,
    // so that a second round of shape inference sees them (a Reshape whose target was computed
    // from Shape/Gather/Concat then gets a static output shape). Returns whether it did anything
    // that could help: some live node still lacks an output shape.
    bool injectFoldedConstants()
    {
        bool missing = false;
        for (size_t i = 0; i < nodes_.size() && !missing; ++i)
            if (live_[i])
                for (const auto& out : nodes_[i].outputs)
                    if (!out.empty() && !shapeOf(out)) missing = true;
        if (!missing) return false;
        auto* g = model_.mutable_graph();
        std::vector<bool> drop(nodes_.size(), false);
        bool changed = false;
        for (size_t i = 0; i < nodes_.size(); ++i) {
            if (live_[i] || nodes_[i].type == "Identity(parameter)") continue;
            bool allKnown = true;
            for (const auto& out : nodes_[i].outputs)
                if (!out.empty() && !constValue(out)) allKnown = false;
            drop[i] = allKnown;
            changed = changed || allKnown;
        }
        if (!changed) return false;
        // Values of dropped nodes that a kept node (live or not) reads become initializers.
        std::unordered_set<std::string> keptInputs;
        for (size_t i = 0; i < nodes_.size(); ++i)
            if (!drop[i])
                for (const auto& in : nodes_[i].inputs) keptInputs.insert(in);
        for (size_t i = 0; i < nodes_.size(); ++i) {
            if (!drop[i]) continue;
            for (const auto& out : nodes_[i].outputs) {
                if (out.empty() || (!keptInputs.count(out) && !values_[out].graphOutput)) continue;
                const ConstValue& v = *constValue(out);
                auto* t = g->add_initializer();
                t->set_name(out);
                for (auto d : v.dims) t->add_dims(d);
                const int type = elemType(out) ? elemType(out) : (v.isFloat ? onnx::TensorProto_DataType_FLOAT : onnx::TensorProto_DataType_INT64);
                if (type == onnx::TensorProto_DataType_DOUBLE) {
                    t->set_data_type(type);
                    for (size_t k = 0; k < v.size(); ++k) t->add_double_data(v.real(k));
                } else if (isFloatType(type)) {
                    t->set_data_type(onnx::TensorProto_DataType_FLOAT);
                    for (size_t k = 0; k < v.size(); ++k) t->add_float_data(static_cast<float>(v.real(k)));
                } else if (type == onnx::TensorProto_DataType_INT64 || type == onnx::TensorProto_DataType_UINT64 ||
                           type == onnx::TensorProto_DataType_UINT32) {
                    t->set_data_type(onnx::TensorProto_DataType_INT64);
                    for (size_t k = 0; k < v.size(); ++k) t->add_int64_data(v.integer(k));
                } else {
                    t->set_data_type(type);
                    for (size_t k = 0; k < v.size(); ++k) t->add_int32_data(static_cast<std::int32_t>(v.integer(k)));
                }
                injected_.insert(out);
            }
        }
        google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
        for (int i = 0; i < g->node_size(); ++i)
            if (!drop[static_cast<size_t>(i)]) *kept.Add() = g->node(i);
        g->mutable_node()->Swap(&kept);
        g->clear_value_info();
        return true;
    }

    // ---- aliases and weight views ------------------------------------------------------------

    void findAliasesAndViews()
    {
        for (size_t i = 0; i < nodes_.size(); ++i) {
            if (!live_[i]) continue;
            Node& n = nodes_[i];
            const std::string& t = n.type;
            if (n.inputs.empty() || n.outputs.empty() || n.outputs[0].empty()) continue;
            const Value* in = find(n.inputs[0]);
            if (!in) continue;
            const bool fromWeight = in->source == SourceKind::Weight || !in->viewOf.empty();
            if (fromWeight && (t == "Transpose" || t == "Reshape" || t == "Unsqueeze" || t == "Squeeze" ||
                               t == "Flatten")) {
                values_[n.outputs[0]].viewOf = in->viewOf.empty() ? n.inputs[0] : in->viewOf;
                live_[i] = false;
                views_[n.outputs[0]] = i;
                continue;
            }
            if (t == "Identity" || t == "Cast" || (t == "Dropout" && (n.outputs.size() < 2 || n.outputs[1].empty() ||
                                                                        consumersOf(n.outputs[1]).empty()))) {
                values_[n.outputs[0]].alias = resolve(n.inputs[0]);
                live_[i] = false;
            }
        }
    }

    std::string resolve(const std::string& name) const
    {
        std::string current = name;
        for (int guard = 0; guard < 1'000'000; ++guard) {
            const Value* v = find(current);
            if (!v || v->alias.empty()) return current;
            current = v->alias;
        }
        return current;
    }

    // ---- pattern collapse --------------------------------------------------------------------

    // A live node, or the collapsed pattern that took its place.
    const Node& effective(size_t i) const
    {
        auto r = replacement_.find(i);
        return r == replacement_.end() ? nodes_[i] : collapsed_[r->second];
    }

    // The live nodes reading a value (through aliases), and whether it leaves the graph.
    std::unordered_map<std::string, std::vector<size_t>> liveConsumers() const
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

    bool leavesGraph(const std::string& name) const
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
    void collapsePatterns()
    {
        struct Family { std::set<std::string> allowed; };
        static const std::vector<Family> families = {
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

    template <typename Families>
    void tryEntry(const std::string& x, std::unordered_map<std::string, std::vector<size_t>>& users, const Families& families)
    {
        if (x.empty()) return;
        auto uit = users.find(x);
        if (uit == users.end() || uit->second.size() < 2) return;
        const auto xShape = shapeOf(x);
        if (!xShape || xShape->empty()) return;
        for (const auto& family : families) {
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
            if (region.size() < 2 || region.size() > kMaxPatternNodes) continue;
            // Exactly one value may leave the region.
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
            if (!ok || exit.empty() || shapeOf(exit) != xShape) continue;
            std::map<std::string, int> count;
            for (size_t c : region) ++count[nodes_[c].type];
            const auto kind = recognise(count, region, *xShape);
            if (!kind) continue;
            replaceRegion(*kind, x, exit, region, users);
            return;
        }
    }

    std::optional<OpKind> recognise(const std::map<std::string, int>& count, const std::vector<size_t>& region,
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
             is({{"Pow", 1}, {"ReduceMean", 1}, {"Add", 1}, {"Sqrt", 1}, {"Reciprocal", 1}, {"Mul", 1}})) && reducesLast())
            return OpKind::RMSNorm;
        if (is({{"Div", 1}, {"Erf", 1}, {"Add", 1}, {"Mul", 2}}) || is({{"Erf", 1}, {"Add", 1}, {"Mul", 3}}))
            return OpKind::GeLU;
        if (count.count("Tanh") && count.count("Pow") && !count.count("Erf") && region.size() >= 6) return OpKind::GeLU;
        if (is({{"Sigmoid", 1}, {"Mul", 1}})) return OpKind::SiLU;
        return std::nullopt;
    }

    bool isWeight(const std::string& name) const
    {
        const Value* v = find(resolve(name));
        return v && v->source == SourceKind::Weight;
    }

    void replaceRegion(OpKind kind, const std::string& x, std::string exit, const std::vector<size_t>& region,
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
            if (first) { scope = parts; first = false; continue; }
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

    // ---- mapping to ops ----------------------------------------------------------------------

    std::string tensorName(const std::string& value) const
    {
        std::string name = value;
        while (!name.empty() && name.front() == '/') name.erase(0, 1);
        return name.empty() ? "unnamed" : name;
    }

    DType dtypeFor(const Node& n, const std::string& value) const
    {
        const int type = elemType(value);
        const auto dt = dtypeOf(type);
        if (!dt) failNode(n, "value '" + value + "' has element type " + std::to_string(type) + ", which TP Studio does not model");
        return *dt;
    }

    Shape staticShape(const Node& n, const std::string& value) const
    {
        const auto s = shapeOf(value);
        if (!s) failNode(n, "value '" + value + "' has no static shape after shape inference (a dynamic dim the "
                             "options do not set, or a shape ONNX cannot infer)");
        if (s->size() > kMaxRank) failNode(n, "value '" + value + "' has rank " + std::to_string(s->size()) + "; at most 16 dims");
        return *s;
    }

    // The tensor holding a value that a node reads: created on first use for data inputs,
    // weights and constants; produced earlier for activations.
    TensorId operand(const Node& n, const std::string& raw)
    {
        const std::string name = resolve(raw);
        Value& v = value(name);
        if (v.tensor >= 0) return v.tensor;
        if (!v.viewOf.empty()) { // a reshaped or transposed weight read as a whole: make the view an op
            const size_t viewNode = views_.at(name);
            Node view = nodes_[viewNode];
            view.inputs[0] = nodes_[viewNode].inputs[0];
            mapNode(view);
            return value(name).tensor;
        }
        const Shape shape = staticShape(n, name);
        TensorRole role = TensorRole::Input;
        if (v.source == SourceKind::Weight) role = TensorRole::Weight;
        else if (v.producer >= 0 && !v.constant)
            failNode(n, "input '" + raw + "' is computed by a node that was not imported");
        v.tensor = graph_.addTensor(tensorName(name), shape, dtypeFor(n, name), role);
        return v.tensor;
    }

    TensorId output(const Node& n, const std::string& name)
    {
        Value& v = value(name);
        if (v.tensor >= 0) failNode(n, "output '" + name + "' is already defined");
        v.tensor = graph_.addTensor(tensorName(name), staticShape(n, name), dtypeFor(n, name), TensorRole::Activation);
        return v.tensor;
    }

    std::string uniqueOpName(const std::string& base)
    {
        std::string name = base;
        for (int k = 2; !opNames_.insert(name).second; ++k) name = base + "_" + std::to_string(k);
        return name;
    }

    OpId addOp(const Node& n, OpKind kind, const std::vector<TensorId>& inputs, const std::vector<TensorId>& outputs,
               std::string einsum = {}, Attrs attrs = {}, const std::string& nameSuffix = {})
    {
        if (!n.synthetic && n.type != std::string(opKindName(kind))) attrs["onnx_op"] = n.type;
        const OpId id = graph_.addOp(uniqueOpName(n.name + nameSuffix), kind, inputs, outputs, std::move(einsum), std::move(attrs));
        try {
            opSignature(graph_.ops.back(), graph_);
        } catch (const InputError& e) {
            // The default reshape equation only groups whole dims; split them into finer atoms
            // ([s,b,(h d)] -> [s,(b h),d]) and if even that fails, keep the op opaque (the
            // search leaves it replicated).
            Op& op = graph_.ops.back();
            if (op.kind == OpKind::Reshape) {
                const auto eq = reshapeByAtoms(graph_.tensor(op.inputs.at(0)).shape, graph_.tensor(op.outputs.at(0)).shape);
                if (eq) op.einsum = *eq;
                try {
                    if (!eq) throw InputError("no equation");
                    opSignature(op, graph_);
                } catch (const InputError&) {
                    op.kind = OpKind::Opaque;
                    op.einsum.clear();
                    op.attrs["onnx_op"] = n.type;
                }
            } else {
                failNode(n, std::string("cannot express as ") + std::string(opKindName(kind)) + ": " + e.what());
            }
        }
        return id;
    }

    std::vector<std::string> dataInputs(const Node& n) const
    {
        std::vector<std::string> out;
        for (const auto& in : n.inputs)
            if (!in.empty() && !isConstant(in)) out.push_back(in);
        return out;
    }

    [[noreturn]] void unsupported(const Node& n, const std::string& why)
    {
        fail("node '" + (n.proto ? n.proto->name() : n.name) + "' (op type " + n.type + ", node " + std::to_string(n.index) +
             ") is not supported: " + why + "; import with the option to keep unsupported ops as opaque ops");
    }

    void mapOpaqueOrFail(const Node& n, const std::string& why)
    {
        if (!options_.opaqueUnsupported) unsupported(n, why);
        std::vector<TensorId> ins, outs;
        for (const auto& in : dataInputs(n)) ins.push_back(operand(n, in));
        for (const auto& out : n.outputs)
            if (!out.empty()) outs.push_back(output(n, out));
        if (outs.empty()) return;
        Attrs attrs;
        attrs["onnx_op"] = n.type;
        graph_.addOp(uniqueOpName(n.name), OpKind::Opaque, ins, outs, {}, std::move(attrs));
    }

    // A reshape as an equation over "atoms": the coarsest common refinement of both shapes, e.g.
    // [4,2,256] -> [4,16,32] is "sb(hd)->s(bh)d". nullopt when sizes do not nest ([2,3] -> [3,2]).
    static std::optional<std::string> reshapeByAtoms(const Shape& in, const Shape& out)
    {
        static constexpr std::string_view pool = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        std::string lhs, rhs, atomsIn, atomsOut;
        size_t i = 0, o = 0, next = 0;
        std::int64_t restIn = 0, restOut = 0; // what is left of the current dims (0: none open)
        auto term = [](const std::string& atoms) { return atoms.size() == 1 ? atoms : "(" + atoms + ")"; };
        while (true) {
            if (restIn == 0 && i < in.size()) {
                if (in[i] == 1) { lhs += '1'; ++i; continue; }
                restIn = in[i];
                atomsIn.clear();
            }
            if (restOut == 0 && o < out.size()) {
                if (out[o] == 1) { rhs += '1'; ++o; continue; }
                restOut = out[o];
                atomsOut.clear();
            }
            if (restIn == 0 && restOut == 0) break;
            if (restIn <= 0 || restOut <= 0 || next >= pool.size()) return std::nullopt;
            const std::int64_t atom = std::min(restIn, restOut);
            if (std::max(restIn, restOut) % atom != 0) return std::nullopt;
            const char label = pool[next++];
            atomsIn += label;
            atomsOut += label;
            restIn /= atom;
            restOut /= atom;
            if (restIn == 1) { lhs += term(atomsIn); ++i; restIn = 0; }
            if (restOut == 1) { rhs += term(atomsOut); ++o; restOut = 0; }
        }
        return lhs + "->" + rhs;
    }

    static std::string letters(size_t count, std::string_view avoid)
    {
        static constexpr std::string_view pool = "bcdeghijopqrstuvwxyzABCDEFGHIJ";
        std::string out;
        for (char c : pool) {
            if (out.size() == count) break;
            if (avoid.find(c) == std::string_view::npos) out.push_back(c);
        }
        return out;
    }

    // numpy matmul semantics as an equation: batch dims broadcast, rank-1 operands promoted.
    static std::string matmulEquation(const Shape& a, const Shape& b, const Shape& out)
    {
        const bool hasM = a.size() >= 2, hasN = b.size() >= 2;
        const size_t own = (hasM ? 1u : 0u) + (hasN ? 1u : 0u);
        if (out.size() < own || out.size() - own < std::max(a.size(), b.size()) - std::min<size_t>(2, std::max(a.size(), b.size())))
            throw InputError("the output rank does not fit the operands");
        const size_t batchRank = out.size() - own;
        const std::string batch = letters(batchRank, "mkn");
        auto side = [&](const Shape& s, size_t batchDims) {
            std::string eq;
            for (size_t j = 0; j < batchDims; ++j) {
                const size_t o = batchRank - batchDims + j;
                eq += (s[j] == 1 && out[o] != 1) ? '1' : batch[o];
            }
            return eq;
        };
        std::string eq = side(a, hasM ? a.size() - 2 : 0) + (hasM ? "mk" : "k") + ",";
        eq += side(b, hasN ? b.size() - 2 : 0) + (hasN ? "kn" : "k") + "->" + batch;
        if (hasM) eq += 'm';
        if (hasN) eq += 'n';
        return eq;
    }

    // A weight [k, f] read by MatMul directly or through a 2-D transpose: the weight's value and
    // whether it is stored transposed ([f, k], as torch stores nn.Linear weights).
    std::optional<std::pair<std::string, bool>> linearWeight(const std::string& raw) const
    {
        const std::string name = resolve(raw);
        const Value* v = find(name);
        if (!v) return std::nullopt;
        if (v->source == SourceKind::Weight && v->shape && v->shape->size() == 2) return std::pair{name, false};
        if (!v->viewOf.empty()) {
            const Node& view = nodes_[views_.at(name)];
            const Value* src = find(view.inputs[0]);
            const auto perm = attrInts(view.proto, "perm");
            if (view.type == "Transpose" && src && src->source == SourceKind::Weight && src->shape &&
                src->shape->size() == 2 && (!perm || *perm == std::vector<std::int64_t>{1, 0}))
                return std::pair{view.inputs[0], true};
        }
        return std::nullopt;
    }

    // The bias a MatMul's single consumer adds, when it is a weight [f]: fused into the Linear.
    std::optional<std::pair<std::string, size_t>> biasAfter(const std::string& out, std::int64_t f) const
    {
        if (leavesGraph(out)) return std::nullopt;
        std::vector<size_t> users;
        for (size_t i = 0; i < nodes_.size(); ++i)
            if (live_[i])
                for (const auto& in : effective(i).inputs)
                    if (!in.empty() && resolve(in) == out) { users.push_back(i); break; }
        if (users.size() != 1) return std::nullopt;
        const Node& add = nodes_[users[0]];
        if (replacement_.count(users[0]) || add.type != "Add" || add.inputs.size() != 2) return std::nullopt;
        const std::string other = resolve(add.inputs[0]) == out ? add.inputs[1] : add.inputs[0];
        if (!isWeight(other) || shapeOf(resolve(other)) != Shape{f} || shapeOf(add.outputs[0]) != shapeOf(out))
            return std::nullopt;
        return std::pair{resolve(other), users[0]};
    }

    void mapNode(const Node& n)
    {
        const std::string& t = n.type;
        const auto data = dataInputs(n);
        auto outShape = [&](size_t k = 0) { return staticShape(n, n.outputs.at(k)); };
        auto inShape = [&](const std::string& v) { return staticShape(n, resolve(v)); };
        auto single = [&](OpKind kind, Attrs attrs = {}, std::string einsum = {}) {
            if (data.empty()) unsupported(n, "it reads no data");
            const TensorId x = operand(n, data[0]);
            addOp(n, kind, {x}, {output(n, n.outputs.at(0))}, std::move(einsum), std::move(attrs));
        };
        if (n.outputs.empty() || n.outputs[0].empty()) return;

        if (n.synthetic) {
            const auto kind = parseOpKind(t);
            std::vector<TensorId> ins;
            for (const auto& in : n.inputs) ins.push_back(operand(n, in));
            addOp(n, *kind, ins, {output(n, n.outputs[0])});
            return;
        }
        if (t == "MatMul" && n.inputs.size() == 2) {
            const Shape a = inShape(n.inputs[0]), out = outShape();
            if (!isConstant(n.inputs[0]) && !isWeight(n.inputs[0]) && !a.empty()) {
                if (auto w = linearWeight(n.inputs[1])) {
                    const Shape ws = *shapeOf(w->first);
                    const std::int64_t f = w->second ? ws[0] : ws[1];
                    const std::string batch = letters(a.size() - 1, "kf");
                    std::vector<TensorId> ins{operand(n, n.inputs[0]), operand(n, w->first)};
                    std::string eq = batch + "k," + (w->second ? "fk" : "kf");
                    std::string result = n.outputs[0];
                    if (auto bias = biasAfter(n.outputs[0], f)) {
                        ins.push_back(operand(n, bias->first));
                        eq += ",f";
                        result = nodes_[bias->second].outputs[0];
                        live_[bias->second] = false;
                    }
                    eq += "->" + batch + "f";
                    addOp(n, OpKind::Linear, ins, {output(n, result)}, w->second ? eq : std::string{});
                    return;
                }
            }
            const Shape b = inShape(n.inputs[1]);
            if (a.empty() || b.empty()) unsupported(n, "a scalar operand");
            std::string eq;
            try {
                eq = matmulEquation(a, b, outShape());
            } catch (const InputError& e) {
                failNode(n, e.what());
            }
            addOp(n, OpKind::BatchMatMul, {operand(n, n.inputs[0]), operand(n, n.inputs[1])}, {output(n, n.outputs[0])}, eq);
            return;
        }
        if (t == "Gemm" && n.inputs.size() >= 2) {
            const bool transA = attrInt(n.proto, "transA").value_or(0) != 0;
            const bool transB = attrInt(n.proto, "transB").value_or(0) != 0;
            std::string eq = std::string(transA ? "km" : "mk") + "," + (transB ? "nk" : "kn");
            std::vector<TensorId> ins{operand(n, n.inputs[0]), operand(n, n.inputs[1])};
            const bool weightB = isWeight(n.inputs[1]);
            std::optional<std::string> separateBias;
            if (n.inputs.size() > 2 && !n.inputs[2].empty() && !isConstant(n.inputs[2])) {
                const Shape c = inShape(n.inputs[2]);
                const Shape out = outShape();
                if (out.size() != 2 || c.size() > 2) failNode(n, "Gemm needs a rank-2 output and a bias of rank <= 2");
                std::string term;
                for (size_t d = 0; d < c.size(); ++d) {
                    const size_t o = out.size() - c.size() + d;
                    term += c[d] == 1 && out[o] != 1 ? '1' : "mn"[o];
                }
                if (weightB && isWeight(n.inputs[2])) {
                    ins.push_back(operand(n, n.inputs[2]));
                    eq += "," + term;
                } else {
                    separateBias = n.inputs[2];
                }
            }
            eq += "->mn";
            if (!separateBias) {
                addOp(n, weightB ? OpKind::Linear : OpKind::BatchMatMul, ins, {output(n, n.outputs[0])}, eq);
                return;
            }
            const std::string product = n.outputs[0] + "/product";
            Value& pv = value(product);
            pv.shape = outShape();
            pv.elemType = elemType(n.outputs[0]);
            const TensorId mid = output(n, product);
            addOp(n, weightB ? OpKind::Linear : OpKind::BatchMatMul, ins, {mid}, eq);
            addOp(n, OpKind::Add, {mid, operand(n, *separateBias)}, {output(n, n.outputs[0])}, {}, {}, "/bias");
            return;
        }
        if (t == "Conv" && n.inputs.size() >= 2) {
            const Shape x = inShape(n.inputs[0]);
            if (x.size() != 4) return mapOpaqueOrFail(n, "only 2-D convolutions (NCHW input) are modelled");
            if (!isWeight(n.inputs[1])) return mapOpaqueOrFail(n, "the filter is not a weight");
            const std::int64_t group = attrInt(n.proto, "group").value_or(1);
            std::vector<TensorId> ins{operand(n, n.inputs[0]), operand(n, n.inputs[1])};
            const bool bias = n.inputs.size() > 2 && !n.inputs[2].empty() && isWeight(n.inputs[2]);
            if (bias) ins.push_back(operand(n, n.inputs[2]));
            std::string eq;
            if (group > 1) eq = std::string("n(gc)hw,(gp)ckl") + (bias ? ",(gp)" : "") + "->n(gp)hw";
            Attrs attrs;
            for (const char* key : {"strides", "pads", "dilations", "kernel_shape"})
                if (auto v = attrInts(n.proto, key)) attrs[key] = *v;
            if (group > 1) attrs["group"] = group;
            addOp(n, OpKind::Conv2d, ins, {output(n, n.outputs[0])}, eq, attrs);
            return;
        }
        if (t == "BatchNormalization") {
            const Shape x = inShape(n.inputs.at(0));
            std::vector<TensorId> ins{operand(n, n.inputs[0])};
            for (size_t i = 1; i <= 2 && i < n.inputs.size(); ++i)
                if (isWeight(n.inputs[i])) ins.push_back(operand(n, n.inputs[i]));
                else break;
            std::string eq;
            if (x.size() != 4) {
                if (x.size() < 2) return mapOpaqueOrFail(n, "batch norm of a rank-" + std::to_string(x.size()) + " input");
                const std::string rest = letters(x.size() - 2, "nc");
                eq = "nc" + rest;
                for (size_t i = 1; i < ins.size(); ++i) eq += ",c";
                eq += "->nc" + rest;
            }
            addOp(n, OpKind::BatchNorm, ins, {output(n, n.outputs[0])}, eq);
            return;
        }
        if (t == "LayerNormalization") {
            const Shape x = inShape(n.inputs.at(0));
            if (normalAxis(attrInt(n.proto, "axis").value_or(-1), x.size()) != x.size() - 1)
                return mapOpaqueOrFail(n, "layer norm over more than the last dim");
            for (size_t k = 1; k < n.outputs.size(); ++k)
                if (!n.outputs[k].empty() && !consumersOf(n.outputs[k]).empty())
                    return mapOpaqueOrFail(n, "its mean/inverse-deviation outputs are used");
            std::vector<TensorId> ins{operand(n, n.inputs[0])};
            for (size_t i = 1; i < n.inputs.size() && !n.inputs[i].empty(); ++i) ins.push_back(operand(n, n.inputs[i]));
            addOp(n, OpKind::LayerNorm, ins, {output(n, n.outputs[0])});
            return;
        }
        if (t == "Softmax" || t == "LogSoftmax") {
            const Shape x = inShape(n.inputs.at(0));
            const std::int64_t axis = attrInt(n.proto, "axis").value_or(opset_ >= 13 ? -1 : 1);
            if (x.empty() || normalAxis(axis, x.size()) != x.size() - 1)
                return mapOpaqueOrFail(n, "softmax over a dim other than the last");
            single(OpKind::Softmax);
            return;
        }
        static const std::map<std::string, OpKind, std::less<>> unaryKinds = {
            {"Relu", OpKind::ReLU}, {"Sigmoid", OpKind::Sigmoid}, {"Tanh", OpKind::Tanh}, {"Gelu", OpKind::GeLU},
        };
        if (auto it = unaryKinds.find(t); it != unaryKinds.end()) {
            single(it->second);
            return;
        }
        static const std::set<std::string, std::less<>> pointwise = {
            "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Erf", "Exp", "Log", "Neg", "Abs", "Reciprocal", "Where",
            "Expand", "Not", "And", "Or", "Xor", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Min",
            "Max", "Clip", "LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Softplus", "Softsign",
            "Sin", "Cos", "Floor", "Ceil", "Round", "Sign", "IsNaN", "IsInf", "PRelu", "Mod", "BitShift", "Mish",
            "ThresholdedRelu", "Sum", "Mean",
        };
        if (pointwise.count(t)) {
            if (data.empty()) unsupported(n, "it reads no data");
            std::vector<TensorId> ins;
            for (const auto& in : data) ins.push_back(operand(n, in));
            const Shape out = outShape();
            for (size_t i = 0; i < ins.size(); ++i)
                if (graph_.tensor(ins[i]).shape.size() > out.size())
                    return mapOpaqueOrFail(n, "an operand has a higher rank than the output");
            if (ins.size() > 3) return mapOpaqueOrFail(n, "more than three data operands");
            OpKind kind = OpKind::Pointwise;
            if (ins.size() == 2 && (t == "Add" || t == "Sub")) kind = OpKind::Add;
            if (ins.size() == 2 && (t == "Mul" || t == "Div")) kind = OpKind::Mul;
            Attrs attrs;
            attrs["op"] = t;
            addOp(n, kind, ins, {output(n, n.outputs[0])}, {}, attrs);
            return;
        }
        if (t == "Reshape" || t == "Flatten" || t == "Squeeze" || t == "Unsqueeze") {
            single(OpKind::Reshape);
            return;
        }
        if (t == "Einsum") {
            // The equation is our own op description: two operands contract (a Linear when the
            // second is a weight), one operand transposes or sums.
            const auto text = attrString(n.proto, "equation");
            if (!text) failNode(n, "attr 'equation' is missing");
            EinsumTerms e = parseEinsumEquation(*text);
            if (!e.problem.empty()) return mapOpaqueOrFail(n, e.problem);
            if (e.inputs.size() != n.inputs.size()) failNode(n, "equation '" + *text + "' names " + std::to_string(e.inputs.size()) + " operands, the node has " + std::to_string(n.inputs.size()));
            for (size_t i = 0; i < e.inputs.size(); ++i)
                if (e.inputs[i].size() != inShape(n.inputs[i]).size())
                    failNode(n, "equation term '" + e.inputs[i] + "' has " + std::to_string(e.inputs[i].size()) + " letters for an operand of rank " + std::to_string(inShape(n.inputs[i]).size()));
            // ONNX's shape inference may leave the output unshaped: each letter has one size.
            std::map<char, std::int64_t> sizeOf;
            for (size_t i = 0; i < e.inputs.size(); ++i) {
                const Shape s = inShape(n.inputs[i]);
                for (size_t d = 0; d < s.size(); ++d) {
                    auto [it, fresh] = sizeOf.emplace(e.inputs[i][d], s[d]);
                    if (!fresh && it->second != s[d] && s[d] != 1 && it->second != 1)
                        failNode(n, "equation letter '" + std::string(1, e.inputs[i][d]) + "' is " + std::to_string(it->second) + " in one operand and " + std::to_string(s[d]) + " in another");
                    if (it->second == 1) it->second = s[d];
                }
            }
            if (!shapeOf(n.outputs[0])) {
                Value& out = value(n.outputs[0]);
                out.shape = Shape{};
                for (char c : e.output) out.shape->push_back(sizeOf.at(c));
                if (!out.elemType) out.elemType = elemType(n.inputs[0]);
            }
            if (e.inputs.size() == 2) {
                std::vector<std::string> in{n.inputs[0], n.inputs[1]};
                if (isWeight(in[0]) && !isWeight(in[1])) { // the weight goes second, as in a Linear
                    std::swap(in[0], in[1]);
                    std::swap(e.inputs[0], e.inputs[1]);
                }
                const OpKind kind = isWeight(in[1]) ? OpKind::Linear : OpKind::BatchMatMul;
                addOp(n, kind, {operand(n, in[0]), operand(n, in[1])}, {output(n, n.outputs[0])}, e.inputs[0] + "," + e.inputs[1] + "->" + e.output);
                return;
            }
            if (e.inputs.size() == 1) {
                const std::string& x = e.inputs[0];
                if (e.output.size() == x.size()) {
                    std::vector<std::int64_t> perm;
                    for (char c : e.output) perm.push_back(static_cast<std::int64_t>(x.find(c)));
                    Attrs attrs;
                    attrs["perm"] = perm;
                    single(OpKind::Transpose, attrs);
                    return;
                }
                std::string kept;
                std::vector<std::int64_t> axes;
                for (size_t d = 0; d < x.size(); ++d) {
                    if (e.output.find(x[d]) == std::string::npos) axes.push_back(static_cast<std::int64_t>(d));
                    else kept += x[d];
                }
                if (kept != e.output) return mapOpaqueOrFail(n, "an Einsum that sums and transposes at once ('" + *text + "')");
                Attrs attrs;
                attrs["axes"] = axes;
                attrs["keepdims"] = std::int64_t{0};
                attrs["op"] = std::string("ReduceSum");
                single(OpKind::Reduce, attrs);
                return;
            }
            return mapOpaqueOrFail(n, "an Einsum of " + std::to_string(e.inputs.size()) + " operands (one or two are modelled)");
        }
        if (t == "Transpose") {
            const Shape x = inShape(n.inputs.at(0));
            std::vector<std::int64_t> perm = attrInts(n.proto, "perm").value_or(std::vector<std::int64_t>{});
            if (perm.empty())
                for (size_t d = x.size(); d-- > 0;) perm.push_back(static_cast<std::int64_t>(d));
            Attrs attrs;
            attrs["perm"] = perm;
            single(OpKind::Transpose, attrs);
            return;
        }
        if (t == "Concat") {
            std::vector<TensorId> ins;
            for (const auto& in : n.inputs)
                if (!in.empty()) ins.push_back(operand(n, in));
            Attrs attrs;
            attrs["axis"] = attrInt(n.proto, "axis").value_or(0);
            addOp(n, OpKind::Concat, ins, {output(n, n.outputs[0])}, {}, attrs);
            return;
        }
        if (t == "Split") {
            std::vector<TensorId> outs;
            for (const auto& out : n.outputs)
                if (!out.empty()) outs.push_back(output(n, out));
            Attrs attrs;
            attrs["axis"] = attrInt(n.proto, "axis").value_or(0);
            addOp(n, OpKind::Split, {operand(n, n.inputs.at(0))}, outs, {}, attrs);
            return;
        }
        if (t == "Slice") {
            mapSlice(n, inShape(n.inputs.at(0)), outShape(), n.inputs.at(0), n.outputs[0]);
            return;
        }
        if (t == "Gather" && n.inputs.size() == 2) {
            const Shape table = inShape(n.inputs[0]);
            const std::int64_t axis = attrInt(n.proto, "axis").value_or(0);
            if (isWeight(n.inputs[0]) && table.size() == 2 && normalAxis(axis, 2) == 0u) {
                addOp(n, OpKind::Embedding, {operand(n, n.inputs[1]), operand(n, n.inputs[0])}, {output(n, n.outputs[0])});
                return;
            }
            const ConstValue* idx = isConstant(n.inputs[1]) ? constValue(n.inputs[1]) : nullptr;
            const auto ax = normalAxis(axis, table.size());
            if (idx && ax && idx->dims.size() <= 1) {
                // Selecting along an axis with constant indices: a slice (plus dropping the axis
                // when the index is a scalar).
                Shape sliced = table;
                sliced[*ax] = static_cast<std::int64_t>(idx->size());
                if (idx->dims.empty()) {
                    const std::string mid = n.outputs[0] + "/selected";
                    Value& mv = value(mid);
                    mv.shape = sliced;
                    mv.elemType = elemType(n.outputs[0]);
                    mapSlice(n, table, sliced, n.inputs[0], mid);
                    addOp(n, OpKind::Reshape, {operand(n, mid)}, {output(n, n.outputs[0])}, {}, {}, "/squeeze");
                } else {
                    mapSlice(n, table, sliced, n.inputs[0], n.outputs[0]);
                }
                return;
            }
            return mapOpaqueOrFail(n, "a gather that is neither an embedding lookup nor a constant selection");
        }
        if (t == "ReduceMean" || t == "ReduceSum" || t == "ReduceMax" || t == "ReduceMin" || t == "ReduceProd" ||
            t == "ReduceL1" || t == "ReduceL2" || t == "ReduceSumSquare" || t == "ReduceLogSumExp") {
            const Shape x = inShape(n.inputs.at(0));
            std::vector<std::int64_t> axes = attrInts(n.proto, "axes").value_or(std::vector<std::int64_t>{});
            if (axes.empty() && n.inputs.size() > 1 && !n.inputs[1].empty()) {
                const ConstValue* v = constValue(n.inputs[1]);
                if (!v) return mapOpaqueOrFail(n, "its axes are not constant");
                axes = v->integers();
            }
            if (axes.empty()) {
                if (attrInt(n.proto, "noop_with_empty_axes").value_or(0) != 0) { single(OpKind::Reshape); return; }
                for (size_t d = 0; d < x.size(); ++d) axes.push_back(static_cast<std::int64_t>(d));
            }
            for (auto& a : axes) {
                const auto na = normalAxis(a, x.size());
                if (!na) failNode(n, "attr 'axes' entry " + std::to_string(a) + " is out of range for rank " + std::to_string(x.size()));
                a = static_cast<std::int64_t>(*na);
            }
            Attrs attrs;
            attrs["axes"] = axes;
            attrs["keepdims"] = attrInt(n.proto, "keepdims").value_or(1);
            attrs["op"] = t;
            single(OpKind::Reduce, attrs);
            return;
        }
        if (t == "MaxPool" || t == "AveragePool" || t == "GlobalAveragePool" || t == "GlobalMaxPool") {
            if (inShape(n.inputs.at(0)).size() != 4) return mapOpaqueOrFail(n, "only 2-D pooling (NCHW input) is modelled");
            for (size_t k = 1; k < n.outputs.size(); ++k)
                if (!n.outputs[k].empty() && !consumersOf(n.outputs[k]).empty())
                    return mapOpaqueOrFail(n, "its indices output is used");
            Attrs attrs;
            for (const char* key : {"strides", "pads", "kernel_shape"})
                if (auto v = attrInts(n.proto, key)) attrs[key] = *v;
            single(t == "MaxPool" || t == "GlobalMaxPool" ? OpKind::MaxPool : OpKind::AvgPool, attrs);
            return;
        }
        if (t == "Dropout") { // a Dropout whose mask is used
            single(OpKind::Dropout);
            return;
        }
        mapOpaqueOrFail(n, "no op kind of TP Studio corresponds to it");
    }

    // A slice keeps the rank and shortens some dims: one Split (with one part) per shortened dim.
    void mapSlice(const Node& n, const Shape& in, const Shape& out, const std::string& input, const std::string& result)
    {
        if (in.size() != out.size()) return mapOpaqueOrFail(n, "a slice that changes the rank");
        TensorId current = operand(n, input);
        Shape shape = in;
        std::vector<size_t> changed;
        for (size_t d = 0; d < in.size(); ++d)
            if (in[d] != out[d]) changed.push_back(d);
        if (changed.empty()) { // selects everything: the same value
            const std::string from = resolve(input);
            Value& v = value(result);
            v.alias = from;
            return;
        }
        for (size_t k = 0; k < changed.size(); ++k) {
            const size_t d = changed[k];
            shape[d] = out[d];
            TensorId next;
            if (k + 1 == changed.size()) {
                next = output(n, result);
            } else {
                const std::string mid = result + "/slice" + std::to_string(k);
                Value& mv = value(mid);
                mv.shape = shape;
                mv.elemType = elemType(result);
                next = output(n, mid);
            }
            Attrs attrs;
            attrs["axis"] = static_cast<std::int64_t>(d);
            addOp(n, OpKind::Split, {current}, {next}, {}, attrs, changed.size() > 1 ? "/" + std::to_string(k) : "");
            current = next;
        }
    }

    void markOutputs()
    {
        const auto producers = graph_.producers();
        for (const auto& out : model_.graph().output()) {
            const Value* v = find(resolve(out.name()));
            if (v && v->tensor >= 0 && producers[static_cast<size_t>(v->tensor)] >= 0)
                graph_.tensors[static_cast<size_t>(v->tensor)].role = TensorRole::Output;
        }
    }

    std::string origin_;
    OnnxImportOptions options_;
    onnx::ModelProto model_;
    std::int64_t opset_ = 1;
    std::unordered_set<std::string> dynamicInputs_;
    std::unordered_set<std::string> injected_;
    std::unordered_map<std::string, Value> values_;
    std::vector<Node> nodes_;
    std::vector<bool> live_;
    std::unordered_map<std::string, std::vector<size_t>> consumers_;
    std::unordered_map<std::string, size_t> views_;      ///< weight view value -> node index
    std::vector<Node> collapsed_;                        ///< synthetic nodes of recognised patterns
    std::unordered_map<size_t, size_t> replacement_;     ///< node index -> collapsed_ index
    std::unordered_set<std::string> opNames_;
    Graph graph_;
};

} // namespace

Graph importOnnx(const std::string& bytes, const std::string& origin, const OnnxImportOptions& options)
{
    return Importer(origin, options).run(bytes);
}

Graph importOnnxFile(const std::string& path, const OnnxImportOptions& options)
{
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw InputError(path + ": cannot open the file");
    if (size > kMaxFileBytes) throw InputError(path + ": the file is larger than 2 GiB, more than protobuf parses");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path + ": cannot open the file");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    Graph graph = importOnnx(buffer.str(), path, options);
    // Exporters name graphs generically ("torch_jit", "main_graph"); the file says more.
    graph.name = std::filesystem::path(path).stem().string();
    return graph;
}

} // namespace tp
