// The ONNX importer (onnx_importer.h lists its stages and files): reading the model, ONNX shape
// inference, and the analysis every later stage reads: values, their producers and consumers,
// which inputs are data, weights or constants, and which values are aliases or weight views.
#include "onnx_import.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <onnx/shape_inference/implementation.h>

#include "../graph/validate.h"
#include "../util/error.h"
#include "onnx_importer.h"

namespace tp {

namespace onnx_detail {

Graph Importer::run(const std::string& bytes)
{
    if (!model_.ParseFromString(bytes)) fail("not an ONNX model (the protobuf message does not parse)");
    if (!model_.has_graph()) fail("the ONNX model has no graph");
    for (const auto& op : model_.opset_import())
        if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
    if (model_.graph().node_size() > static_cast<int>(kMaxNodes))
        fail("the graph has " + std::to_string(model_.graph().node_size()) + " nodes; at most " + std::to_string(kMaxNodes) +
             " are supported");
    setInputDims();
    if (resizedInput_.empty()) return build();
    // A fixed-shape export resized: constants it holds (Reshape targets, masks) may still carry
    // the exported batch or sequence, which then fails somewhere inside. Say what happened.
    try {
        return build();
    } catch (const InputError& e) {
        std::string reason = e.what();
        if (reason.rfind(origin_ + ": ", 0) == 0) reason = reason.substr(origin_.size() + 2);
        fail("its shapes are fixed at " + exportedDims_ + " (exported without dynamic axes) and do not follow --batch/--seq to " +
             askedDims_ + " (" + reason + "); plan it with " + exportedFlags_ +
             ", or export it again with torch.onnx.export(..., dynamic_axes={\"" + resizedInput_ +
             "\": {0: \"batch\", 1: \"sequence\"}})");
    }
}

Graph Importer::build()
{
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

void Importer::fail(const std::string& reason) const { throw InputError(origin_ + ": " + reason); }

void Importer::failNode(const Node& n, const std::string& reason) const
{
    fail("node '" + (n.proto ? n.proto->name() : n.name) + "' (op type " + n.type + ", node " + std::to_string(n.index) +
         "): " + reason);
}

// ---- preparation ----------------------------------------------------------------------------

std::unordered_set<std::string> Importer::initializerNames() const
{
    std::unordered_set<std::string> names;
    for (const auto& t : model_.graph().initializer()) names.insert(t.name());
    return names;
}

// Dynamic dims of the data inputs take their values from the options; the shapes recorded
// for intermediate values are dropped so that inference recomputes them for these sizes.
void Importer::setInputDims()
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
        const bool data = isDataLike(input.name());
        // "batch 2 x sequence 32" (tokens, embeddings) or "batch 1" (images), before and after.
        auto describe = [&]() {
            const bool sequence = dims->size() == 2 || dims->size() == 3;
            auto at = [&](int d) { return dims->Get(d).has_dim_value() ? std::to_string(dims->Get(d).dim_value()) : "?"; };
            return dims->empty() ? std::string() : "batch " + at(0) + (sequence ? " x sequence " + at(1) : "");
        };
        const std::string exported = data ? describe() : std::string();
        const std::string exportedFlags =
            !data || dims->empty() || !dims->Get(0).has_dim_value()
                ? std::string()
                : "--batch " + std::to_string(dims->Get(0).dim_value()) +
                      ((dims->size() == 2 || dims->size() == 3) && dims->Get(1).has_dim_value()
                           ? " --seq " + std::to_string(dims->Get(1).dim_value())
                           : "");
        for (int d = 0; d < dims->size(); ++d) {
            auto* dim = dims->Mutable(d);
            if (dim->has_dim_value() && dim->dim_value() > 0) {
                // The data input's fixed batch (and, for tokens [b, s] or embeddings [b, s, h],
                // its fixed sequence) follow the options: resized, as far as the graph allows.
                const bool batchDim = d == 0 && options_.batch > 0 && dims->size() > 1;
                const bool seqDim = d == 1 && options_.seq > 0 && (dims->size() == 2 || dims->size() == 3);
                if (data && (batchDim || seqDim)) {
                    const std::int64_t wanted = batchDim ? batch : seq;
                    if (dim->dim_value() != wanted) resizedInput_ = input.name();
                    dim->set_dim_value(wanted);
                }
                continue;
            }
            std::string label = dim->has_dim_param() ? dim->dim_param() : "";
            std::transform(label.begin(), label.end(), label.begin(), [](unsigned char c) { return std::tolower(c); });
            const bool batchLike = label.find("batch") != std::string::npos ||
                                   (d == 0 && label.find("seq") == std::string::npos && label.find("len") == std::string::npos);
            dim->set_dim_value(batchLike ? batch : seq);
            dynamicInputs_.insert(input.name());
        }
        if (resizedInput_ == input.name()) {
            exportedDims_ = exported;
            exportedFlags_ = exportedFlags;
            askedDims_ = describe();
        }
    }
    g->clear_value_info();
    for (auto& output : *g->mutable_output())
        if (output.type().has_tensor_type()) output.mutable_type()->mutable_tensor_type()->clear_shape();
}

// Only the first graph input that is not an initializer counts as data for sure; the
// batch override applies to it and to other inputs whose leading dim is dynamic.
bool Importer::isDataLike(const std::string& name) const
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
void Importer::checkInputsDefined() const
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
                failNode(n, "input '" + in +
                                "' is produced by no earlier node, initializer or graph input "
                                "(nodes must be in topological order)");
            if (!typed.count(in))
                failNode(n, "input '" + in +
                                "' has no type: the operator producing it is unknown to ONNX "
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

const onnx::OpSchema* Importer::schemaOf(const onnx::NodeProto& node) const
{
    const bool standard = node.domain().empty() || node.domain() == "ai.onnx";
    std::int64_t version = standard ? opset_ : -1;
    for (const auto& op : model_.opset_import())
        if (!standard && op.domain() == node.domain()) version = op.version();
    if (version < 0 || version > std::numeric_limits<int>::max()) return nullptr;
    return onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(version), standard ? "" : node.domain());
}

void Importer::inferShapes()
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

// ---- analysis: values, constants, weights ---------------------------------------------------

void Importer::recordType(const onnx::ValueInfoProto& info)
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

void Importer::analyse()
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
                failNode(n, "input '" + in +
                                "' is produced by no earlier node, initializer or graph input "
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

void Importer::buildConsumers()
{
    consumers_.clear();
    for (size_t i = 0; i < nodes_.size(); ++i)
        for (const auto& in : nodes_[i].inputs)
            if (!in.empty()) {
                auto& list = consumers_[in];
                if (list.empty() || list.back() != i) list.push_back(i);
            }
}

const std::vector<size_t>& Importer::consumersOf(const std::string& value) const
{
    static const std::vector<size_t> none;
    auto it = consumers_.find(value);
    return it == consumers_.end() ? none : it->second;
}

const Value* Importer::find(const std::string& name) const
{
    auto it = values_.find(name);
    return it == values_.end() ? nullptr : &it->second;
}

int Importer::elemType(const std::string& name) const
{
    const Value* v = find(name);
    return v ? v->elemType : 0;
}

std::optional<Shape> Importer::shapeOf(const std::string& name) const
{
    const Value* v = find(name);
    return v ? v->shape : std::nullopt;
}

// What a consumer does with its input `i`: the evidence for telling weights from data.
Slot Importer::slotOf(const Node& n, size_t i) const
{
    const std::string& t = n.type;
    if (t == "MatMul") {
        const auto s = shapeOf(n.inputs[i]);
        if (i == 1 && s && s->size() <= 2) return Slot::Weight;
        return i == 0 ? Slot::Data : Slot::Either;
    }
    if (t == "Gemm" || t == "Conv" || t == "ConvTranspose" || t == "LayerNormalization" || t == "InstanceNormalization" ||
        t == "PRelu")
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

// Iterative: a long chain of reshapes must not exhaust the stack.
void Importer::collectSlots(const std::string& start, SlotEvidence& ev) const
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
                case Slot::Weight:
                    ev.weight = true;
                    break;
                case Slot::Buffer:
                    ev.buffer = true;
                    break;
                case Slot::Data:
                    ev.data = true;
                    break;
                case Slot::Either:
                    ev.either = true;
                    break;
                case Slot::Through:
                    for (const auto& out : n.outputs)
                        if (!out.empty() && seen.insert(out).second) pending.push_back(out);
                    break;
                case Slot::Ignored:
                    break;
                }
            }
        }
    }
}

// Initializers and graph inputs are data, weights or constants. Files exported with
// export_params=False carry the weights as graph inputs, so the decision rests on how each
// is used: as the weight operand of MatMul/Gemm/Conv/embedding/norms it is a weight; BatchNorm
// running statistics are constants (buffers); the first graph input is the model's data.
void Importer::classifySources()
{
    const auto& g = model_.graph();
    std::string firstData;
    for (const auto& input : g.input())
        if (!values_[input.name()].initializer) {
            firstData = input.name();
            break;
        }
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

void Importer::findAliasesAndViews()
{
    for (size_t i = 0; i < nodes_.size(); ++i) {
        if (!live_[i]) continue;
        Node& n = nodes_[i];
        const std::string& t = n.type;
        if (n.inputs.empty() || n.outputs.empty() || n.outputs[0].empty()) continue;
        const Value* in = find(n.inputs[0]);
        if (!in) continue;
        const bool fromWeight = in->source == SourceKind::Weight || !in->viewOf.empty();
        if (fromWeight && (t == "Transpose" || t == "Reshape" || t == "Unsqueeze" || t == "Squeeze" || t == "Flatten")) {
            values_[n.outputs[0]].viewOf = in->viewOf.empty() ? n.inputs[0] : in->viewOf;
            live_[i] = false;
            views_[n.outputs[0]] = i;
            continue;
        }
        if (t == "Identity" || t == "Cast" ||
            (t == "Dropout" && (n.outputs.size() < 2 || n.outputs[1].empty() || consumersOf(n.outputs[1]).empty()))) {
            values_[n.outputs[0]].alias = resolve(n.inputs[0]);
            live_[i] = false;
        }
    }
}

std::string Importer::resolve(const std::string& name) const
{
    std::string current = name;
    for (int guard = 0; guard < 1'000'000; ++guard) {
        const Value* v = find(current);
        if (!v || v->alias.empty()) return current;
        current = v->alias;
    }
    return current;
}

bool Importer::isWeight(const std::string& name) const
{
    const Value* v = find(resolve(name));
    return v && v->source == SourceKind::Weight;
}

} // namespace onnx_detail

Graph importOnnx(const std::string& bytes, const std::string& origin, const OnnxImportOptions& options)
{
    return onnx_detail::Importer(origin, options).run(bytes);
}

Graph importOnnxFile(const std::string& path, const OnnxImportOptions& options)
{
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw InputError(path + ": cannot open the file");
    if (size > onnx_detail::kMaxFileBytes) throw InputError(path + ": the file is larger than 2 GiB, more than protobuf parses");
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
