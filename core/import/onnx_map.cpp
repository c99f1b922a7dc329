// Node mapping (onnx_importer.h): each live ONNX node (or collapsed pattern) becomes ops of the
// graph IR through the table of nodeMappers(); the tensors it reads and writes are created here.
#include <map>

#include "../graph/opkinds.h"
#include "../util/error.h"
#include "onnx_importer.h"

namespace tp::onnx_detail {

// ---------------------------------------------------------------------------------------------
// Tensors and ops

std::string Importer::tensorName(const std::string& value) const
{
    std::string name = value;
    while (!name.empty() && name.front() == '/') name.erase(0, 1);
    return name.empty() ? "unnamed" : name;
}

DType Importer::dtypeFor(const Node& n, const std::string& value) const
{
    const int type = elemType(value);
    const auto dt = dtypeOf(type);
    if (!dt) failNode(n, "value '" + value + "' has element type " + std::to_string(type) + ", which TP Studio does not model");
    return *dt;
}

Shape Importer::staticShape(const Node& n, const std::string& value) const
{
    const auto s = shapeOf(value);
    if (!s)
        failNode(n, "value '" + value +
                        "' has no static shape after shape inference (a dynamic dim the "
                        "options do not set, or a shape ONNX cannot infer)");
    if (s->size() > kMaxRank) failNode(n, "value '" + value + "' has rank " + std::to_string(s->size()) + "; at most 16 dims");
    return *s;
}

// The tensor holding a value that a node reads: created on first use for data inputs,
// weights and constants; produced earlier for activations.
TensorId Importer::operand(const Node& n, const std::string& raw)
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
    if (v.source == SourceKind::Weight)
        role = TensorRole::Weight;
    else if (v.producer >= 0 && !v.constant)
        failNode(n, "input '" + raw + "' is computed by a node that was not imported");
    v.tensor = graph_.addTensor(tensorName(name), shape, dtypeFor(n, name), role);
    return v.tensor;
}

TensorId Importer::output(const Node& n, const std::string& name)
{
    Value& v = value(name);
    if (v.tensor >= 0) failNode(n, "output '" + name + "' is already defined");
    v.tensor = graph_.addTensor(tensorName(name), staticShape(n, name), dtypeFor(n, name), TensorRole::Activation);
    return v.tensor;
}

std::string Importer::uniqueOpName(const std::string& base)
{
    std::string name = base;
    for (int k = 2; !opNames_.insert(name).second; ++k) name = base + "_" + std::to_string(k);
    return name;
}

OpId Importer::addOp(const Node& n, OpKind kind, const std::vector<TensorId>& inputs, const std::vector<TensorId>& outputs,
                     std::string einsum, Attrs attrs, const std::string& nameSuffix)
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

std::vector<std::string> Importer::dataInputs(const Node& n) const
{
    std::vector<std::string> out;
    for (const auto& in : n.inputs)
        if (!in.empty() && !isConstant(in)) out.push_back(in);
    return out;
}

void Importer::unsupported(const Node& n, const std::string& why)
{
    fail("node '" + (n.proto ? n.proto->name() : n.name) + "' (op type " + n.type + ", node " + std::to_string(n.index) +
         ") is not supported: " + why + "; import with the option to keep unsupported ops as opaque ops");
}

void Importer::mapOpaqueOrFail(const Node& n, const std::string& why)
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

// A weight [k, f] read by MatMul directly or through a 2-D transpose: the weight's value and
// whether it is stored transposed ([f, k], as torch stores nn.Linear weights).
std::optional<std::pair<std::string, bool>> Importer::linearWeight(const std::string& raw) const
{
    const std::string name = resolve(raw);
    const Value* v = find(name);
    if (!v) return std::nullopt;
    if (v->source == SourceKind::Weight && v->shape && v->shape->size() == 2) return std::pair{name, false};
    if (!v->viewOf.empty()) {
        const Node& view = nodes_[views_.at(name)];
        const Value* src = find(view.inputs[0]);
        const auto perm = attrInts(view.proto, "perm");
        if (view.type == "Transpose" && src && src->source == SourceKind::Weight && src->shape && src->shape->size() == 2 &&
            (!perm || *perm == std::vector<std::int64_t>{1, 0}))
            return std::pair{view.inputs[0], true};
    }
    return std::nullopt;
}

// The bias a MatMul's single consumer adds, when it is a weight [f]: fused into the Linear.
std::optional<std::pair<std::string, size_t>> Importer::biasAfter(const std::string& out, std::int64_t f) const
{
    if (leavesGraph(out)) return std::nullopt;
    std::vector<size_t> users;
    for (size_t i = 0; i < nodes_.size(); ++i)
        if (live_[i])
            for (const auto& in : effective(i).inputs)
                if (!in.empty() && resolve(in) == out) {
                    users.push_back(i);
                    break;
                }
    if (users.size() != 1) return std::nullopt;
    const Node& add = nodes_[users[0]];
    if (replacement_.count(users[0]) || add.type != "Add" || add.inputs.size() != 2) return std::nullopt;
    const std::string other = resolve(add.inputs[0]) == out ? add.inputs[1] : add.inputs[0];
    if (!isWeight(other) || shapeOf(resolve(other)) != Shape{f} || shapeOf(add.outputs[0]) != shapeOf(out)) return std::nullopt;
    return std::pair{resolve(other), users[0]};
}

// ---------------------------------------------------------------------------------------------
// The mapping table: one row per ONNX op type. A new ONNX op is a new row (and, when no mapper
// fits, a new map* function); a type without a row is refused, or kept opaque on request.

namespace {
constexpr const char* kNoOpKind = "no op kind of TP Studio corresponds to it";
} // namespace

const std::map<std::string, NodeMapper, std::less<>>& Importer::nodeMappers()
{
    static const std::map<std::string, NodeMapper, std::less<>> table = [] {
        auto as = [](OpKind kind) { return [kind](Importer& im, const Node& n) { im.mapSingle(n, kind); }; };
        std::map<std::string, NodeMapper, std::less<>> t = {
            {"MatMul", &Importer::mapMatMul},
            {"Gemm", &Importer::mapGemm},
            {"Conv", &Importer::mapConv},
            {"BatchNormalization", &Importer::mapBatchNorm},
            {"LayerNormalization", &Importer::mapLayerNorm},
            {"Softmax", &Importer::mapSoftmax},
            {"LogSoftmax", &Importer::mapSoftmax},
            {"Relu", as(OpKind::ReLU)},
            {"Sigmoid", as(OpKind::Sigmoid)},
            {"Tanh", as(OpKind::Tanh)},
            {"Gelu", as(OpKind::GeLU)},
            {"Reshape", as(OpKind::Reshape)},
            {"Flatten", as(OpKind::Reshape)},
            {"Squeeze", as(OpKind::Reshape)},
            {"Unsqueeze", as(OpKind::Reshape)},
            {"Einsum", &Importer::mapEinsum},
            {"Transpose", &Importer::mapTranspose},
            {"Concat", &Importer::mapConcat},
            {"Split", &Importer::mapSplit},
            {"Slice", &Importer::mapSliceNode},
            {"Gather", &Importer::mapGather},
            {"Dropout", as(OpKind::Dropout)}, // a Dropout whose mask is used (others are aliases)
        };
        // Elementwise ops: Add/Sub/Mul/Div of two operands get their own kinds, the rest is Pointwise.
        for (const char* type : {"Add",
                                 "Sub",
                                 "Mul",
                                 "Div",
                                 "Pow",
                                 "Sqrt",
                                 "Erf",
                                 "Exp",
                                 "Log",
                                 "Neg",
                                 "Abs",
                                 "Reciprocal",
                                 "Where",
                                 "Expand",
                                 "Not",
                                 "And",
                                 "Or",
                                 "Xor",
                                 "Equal",
                                 "Less",
                                 "Greater",
                                 "LessOrEqual",
                                 "GreaterOrEqual",
                                 "Min",
                                 "Max",
                                 "Clip",
                                 "LeakyRelu",
                                 "Elu",
                                 "Selu",
                                 "Celu",
                                 "HardSigmoid",
                                 "HardSwish",
                                 "Softplus",
                                 "Softsign",
                                 "Sin",
                                 "Cos",
                                 "Floor",
                                 "Ceil",
                                 "Round",
                                 "Sign",
                                 "IsNaN",
                                 "IsInf",
                                 "PRelu",
                                 "Mod",
                                 "BitShift",
                                 "Mish",
                                 "ThresholdedRelu",
                                 "Sum",
                                 "Mean"})
            t.emplace(type, &Importer::mapPointwise);
        for (const char* type : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                                 "ReduceSumSquare", "ReduceLogSumExp"})
            t.emplace(type, &Importer::mapReduce);
        for (const char* type : {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"})
            t.emplace(type, &Importer::mapPool);
        return t;
    }();
    return table;
}

void Importer::mapNode(const Node& n)
{
    if (n.outputs.empty() || n.outputs[0].empty()) return;
    if (n.synthetic) return mapSynthetic(n);
    const auto& table = nodeMappers();
    if (auto it = table.find(n.type); it != table.end()) return it->second(*this, n);
    mapOpaqueOrFail(n, kNoOpKind);
}

// A collapsed pattern: its type is the op kind's name, its inputs are x and the affine weights.
void Importer::mapSynthetic(const Node& n)
{
    const auto kind = parseOpKind(n.type);
    std::vector<TensorId> ins;
    for (const auto& in : n.inputs) ins.push_back(operand(n, in));
    addOp(n, *kind, ins, {output(n, n.outputs[0])});
}

void Importer::mapSingle(const Node& n, OpKind kind, Attrs attrs)
{
    const auto data = dataInputs(n);
    if (data.empty()) unsupported(n, "it reads no data");
    const TensorId x = operand(n, data[0]);
    addOp(n, kind, {x}, {output(n, n.outputs.at(0))}, {}, std::move(attrs));
}

void Importer::declareValue(const std::string& name, const Shape& shape, const std::string& like)
{
    Value& v = value(name);
    v.shape = shape;
    v.elemType = elemType(like);
}

// ---------------------------------------------------------------------------------------------
// Mappers

void Importer::mapMatMul(const Node& n)
{
    if (n.inputs.size() != 2) return mapOpaqueOrFail(n, kNoOpKind);
    if (mapLinearMatMul(n)) return;
    const Shape a = inShape(n, n.inputs[0]);
    const Shape b = inShape(n, n.inputs[1]);
    if (a.empty() || b.empty()) unsupported(n, "a scalar operand");
    std::string eq;
    try {
        eq = matmulEquation(a, b, outShape(n));
    } catch (const InputError& e) {
        failNode(n, e.what());
    }
    addOp(n, OpKind::BatchMatMul, {operand(n, n.inputs[0]), operand(n, n.inputs[1])}, {output(n, n.outputs[0])}, eq);
}

// Activations times a weight [k, f] (or its transpose) is a Linear, with the bias of a
// following Add fused in. False when the MatMul is not of that form.
bool Importer::mapLinearMatMul(const Node& n)
{
    const Shape a = inShape(n, n.inputs[0]), out = outShape(n);
    if (isConstant(n.inputs[0]) || isWeight(n.inputs[0]) || a.empty()) return false;
    const auto w = linearWeight(n.inputs[1]);
    if (!w) return false;
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
    return true;
}

void Importer::mapGemm(const Node& n)
{
    if (n.inputs.size() < 2) return mapOpaqueOrFail(n, kNoOpKind);
    const bool transA = attrInt(n.proto, "transA").value_or(0) != 0;
    const bool transB = attrInt(n.proto, "transB").value_or(0) != 0;
    std::string eq = std::string(transA ? "km" : "mk") + "," + (transB ? "nk" : "kn");
    std::vector<TensorId> ins{operand(n, n.inputs[0]), operand(n, n.inputs[1])};
    const bool weightB = isWeight(n.inputs[1]);
    std::optional<std::string> separateBias;
    if (n.inputs.size() > 2 && !n.inputs[2].empty() && !isConstant(n.inputs[2])) {
        const Shape c = inShape(n, n.inputs[2]);
        const Shape out = outShape(n);
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
    declareValue(product, outShape(n), n.outputs[0]);
    const TensorId mid = output(n, product);
    addOp(n, weightB ? OpKind::Linear : OpKind::BatchMatMul, ins, {mid}, eq);
    addOp(n, OpKind::Add, {mid, operand(n, *separateBias)}, {output(n, n.outputs[0])}, {}, {}, "/bias");
}

void Importer::mapConv(const Node& n)
{
    if (n.inputs.size() < 2) return mapOpaqueOrFail(n, kNoOpKind);
    const Shape x = inShape(n, n.inputs[0]);
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
}

void Importer::mapBatchNorm(const Node& n)
{
    const Shape x = inShape(n, n.inputs.at(0));
    std::vector<TensorId> ins{operand(n, n.inputs[0])};
    for (size_t i = 1; i <= 2 && i < n.inputs.size(); ++i)
        if (isWeight(n.inputs[i]))
            ins.push_back(operand(n, n.inputs[i]));
        else
            break;
    std::string eq;
    if (x.size() != 4) {
        if (x.size() < 2) return mapOpaqueOrFail(n, "batch norm of a rank-" + std::to_string(x.size()) + " input");
        const std::string rest = letters(x.size() - 2, "nc");
        eq = "nc" + rest;
        for (size_t i = 1; i < ins.size(); ++i) eq += ",c";
        eq += "->nc" + rest;
    }
    addOp(n, OpKind::BatchNorm, ins, {output(n, n.outputs[0])}, eq);
}

void Importer::mapLayerNorm(const Node& n)
{
    const Shape x = inShape(n, n.inputs.at(0));
    if (normalAxis(attrInt(n.proto, "axis").value_or(-1), x.size()) != x.size() - 1)
        return mapOpaqueOrFail(n, "layer norm over more than the last dim");
    for (size_t k = 1; k < n.outputs.size(); ++k)
        if (!n.outputs[k].empty() && !consumersOf(n.outputs[k]).empty())
            return mapOpaqueOrFail(n, "its mean/inverse-deviation outputs are used");
    std::vector<TensorId> ins{operand(n, n.inputs[0])};
    for (size_t i = 1; i < n.inputs.size() && !n.inputs[i].empty(); ++i) ins.push_back(operand(n, n.inputs[i]));
    addOp(n, OpKind::LayerNorm, ins, {output(n, n.outputs[0])});
}

void Importer::mapSoftmax(const Node& n)
{
    const Shape x = inShape(n, n.inputs.at(0));
    const std::int64_t axis = attrInt(n.proto, "axis").value_or(opset_ >= 13 ? -1 : 1);
    if (x.empty() || normalAxis(axis, x.size()) != x.size() - 1)
        return mapOpaqueOrFail(n, "softmax over a dim other than the last");
    mapSingle(n, OpKind::Softmax);
}

void Importer::mapPointwise(const Node& n)
{
    const std::string& t = n.type;
    const auto data = dataInputs(n);
    if (data.empty()) unsupported(n, "it reads no data");
    std::vector<TensorId> ins;
    for (const auto& in : data) ins.push_back(operand(n, in));
    const Shape out = outShape(n);
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
}

// The equation is our own op description: two operands contract (a Linear when the second is
// a weight), one operand transposes or sums.
void Importer::mapEinsum(const Node& n)
{
    const auto text = attrString(n.proto, "equation");
    if (!text) failNode(n, "attr 'equation' is missing");
    EinsumTerms e = parseEinsumEquation(*text);
    if (!e.problem.empty()) return mapOpaqueOrFail(n, e.problem);
    if (e.inputs.size() != n.inputs.size())
        failNode(n, "equation '" + *text + "' names " + std::to_string(e.inputs.size()) + " operands, the node has " +
                        std::to_string(n.inputs.size()));
    for (size_t i = 0; i < e.inputs.size(); ++i)
        if (e.inputs[i].size() != inShape(n, n.inputs[i]).size())
            failNode(n, "equation term '" + e.inputs[i] + "' has " + std::to_string(e.inputs[i].size()) +
                            " letters for an operand of rank " + std::to_string(inShape(n, n.inputs[i]).size()));
    // ONNX's shape inference may leave the output unshaped: each letter has one size.
    std::map<char, std::int64_t> sizeOf;
    for (size_t i = 0; i < e.inputs.size(); ++i) {
        const Shape s = inShape(n, n.inputs[i]);
        for (size_t d = 0; d < s.size(); ++d) {
            auto [it, fresh] = sizeOf.emplace(e.inputs[i][d], s[d]);
            if (!fresh && it->second != s[d] && s[d] != 1 && it->second != 1)
                failNode(n, "equation letter '" + std::string(1, e.inputs[i][d]) + "' is " + std::to_string(it->second) +
                                " in one operand and " + std::to_string(s[d]) + " in another");
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
        addOp(n, kind, {operand(n, in[0]), operand(n, in[1])}, {output(n, n.outputs[0])},
              e.inputs[0] + "," + e.inputs[1] + "->" + e.output);
        return;
    }
    if (e.inputs.size() == 1) return mapEinsumOfOne(n, e, *text);
    return mapOpaqueOrFail(n, "an Einsum of " + std::to_string(e.inputs.size()) + " operands (one or two are modelled)");
}

// An Einsum of one operand: a transpose when it keeps every letter, a sum when it drops some.
void Importer::mapEinsumOfOne(const Node& n, const EinsumTerms& e, const std::string& text)
{
    const std::string& x = e.inputs[0];
    if (e.output.size() == x.size()) {
        std::vector<std::int64_t> perm;
        for (char c : e.output) perm.push_back(static_cast<std::int64_t>(x.find(c)));
        Attrs attrs;
        attrs["perm"] = perm;
        mapSingle(n, OpKind::Transpose, attrs);
        return;
    }
    std::string kept;
    std::vector<std::int64_t> axes;
    for (size_t d = 0; d < x.size(); ++d) {
        if (e.output.find(x[d]) == std::string::npos)
            axes.push_back(static_cast<std::int64_t>(d));
        else
            kept += x[d];
    }
    if (kept != e.output) return mapOpaqueOrFail(n, "an Einsum that sums and transposes at once ('" + text + "')");
    Attrs attrs;
    attrs["axes"] = axes;
    attrs["keepdims"] = std::int64_t{0};
    attrs["op"] = std::string("ReduceSum");
    mapSingle(n, OpKind::Reduce, attrs);
}

void Importer::mapTranspose(const Node& n)
{
    const Shape x = inShape(n, n.inputs.at(0));
    std::vector<std::int64_t> perm = attrInts(n.proto, "perm").value_or(std::vector<std::int64_t>{});
    if (perm.empty())
        for (size_t d = x.size(); d-- > 0;) perm.push_back(static_cast<std::int64_t>(d));
    Attrs attrs;
    attrs["perm"] = perm;
    mapSingle(n, OpKind::Transpose, attrs);
}

void Importer::mapConcat(const Node& n)
{
    std::vector<TensorId> ins;
    for (const auto& in : n.inputs)
        if (!in.empty()) ins.push_back(operand(n, in));
    Attrs attrs;
    attrs["axis"] = attrInt(n.proto, "axis").value_or(0);
    addOp(n, OpKind::Concat, ins, {output(n, n.outputs[0])}, {}, attrs);
}

void Importer::mapSplit(const Node& n)
{
    std::vector<TensorId> outs;
    for (const auto& out : n.outputs)
        if (!out.empty()) outs.push_back(output(n, out));
    Attrs attrs;
    attrs["axis"] = attrInt(n.proto, "axis").value_or(0);
    addOp(n, OpKind::Split, {operand(n, n.inputs.at(0))}, outs, {}, attrs);
}

void Importer::mapSliceNode(const Node& n) { mapSlice(n, inShape(n, n.inputs.at(0)), outShape(n), n.inputs.at(0), n.outputs[0]); }

// An embedding lookup (a weight table [v, h] read at integer ids), or a selection with
// constant indices, which is a slice (plus dropping the axis when the index is a scalar).
void Importer::mapGather(const Node& n)
{
    if (n.inputs.size() != 2) return mapOpaqueOrFail(n, kNoOpKind);
    const Shape table = inShape(n, n.inputs[0]);
    const std::int64_t axis = attrInt(n.proto, "axis").value_or(0);
    if (isWeight(n.inputs[0]) && table.size() == 2 && normalAxis(axis, 2) == 0u) {
        addOp(n, OpKind::Embedding, {operand(n, n.inputs[1]), operand(n, n.inputs[0])}, {output(n, n.outputs[0])});
        return;
    }
    const ConstValue* idx = isConstant(n.inputs[1]) ? constValue(n.inputs[1]) : nullptr;
    const auto ax = normalAxis(axis, table.size());
    if (!idx || !ax || idx->dims.size() > 1)
        return mapOpaqueOrFail(n, "a gather that is neither an embedding lookup nor a constant selection");
    Shape sliced = table;
    sliced[*ax] = static_cast<std::int64_t>(idx->size());
    if (!idx->dims.empty()) return mapSlice(n, table, sliced, n.inputs[0], n.outputs[0]);
    const std::string mid = n.outputs[0] + "/selected";
    declareValue(mid, sliced, n.outputs[0]);
    mapSlice(n, table, sliced, n.inputs[0], mid);
    addOp(n, OpKind::Reshape, {operand(n, mid)}, {output(n, n.outputs[0])}, {}, {}, "/squeeze");
}

void Importer::mapReduce(const Node& n)
{
    const Shape x = inShape(n, n.inputs.at(0));
    std::vector<std::int64_t> axes = attrInts(n.proto, "axes").value_or(std::vector<std::int64_t>{});
    if (axes.empty() && n.inputs.size() > 1 && !n.inputs[1].empty()) {
        const ConstValue* v = constValue(n.inputs[1]);
        if (!v) return mapOpaqueOrFail(n, "its axes are not constant");
        axes = v->integers();
    }
    if (axes.empty()) {
        if (attrInt(n.proto, "noop_with_empty_axes").value_or(0) != 0) return mapSingle(n, OpKind::Reshape);
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
    attrs["op"] = n.type;
    mapSingle(n, OpKind::Reduce, attrs);
}

void Importer::mapPool(const Node& n)
{
    if (inShape(n, n.inputs.at(0)).size() != 4) return mapOpaqueOrFail(n, "only 2-D pooling (NCHW input) is modelled");
    for (size_t k = 1; k < n.outputs.size(); ++k)
        if (!n.outputs[k].empty() && !consumersOf(n.outputs[k]).empty()) return mapOpaqueOrFail(n, "its indices output is used");
    Attrs attrs;
    for (const char* key : {"strides", "pads", "kernel_shape"})
        if (auto v = attrInts(n.proto, key)) attrs[key] = *v;
    mapSingle(n, n.type == "MaxPool" || n.type == "GlobalMaxPool" ? OpKind::MaxPool : OpKind::AvgPool, attrs);
}

// A slice keeps the rank and shortens some dims: one Split (with one part) per shortened dim.
void Importer::mapSlice(const Node& n, const Shape& in, const Shape& out, const std::string& input, const std::string& result)
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

void Importer::markOutputs()
{
    const auto producers = graph_.producers();
    for (const auto& out : model_.graph().output()) {
        const Value* v = find(resolve(out.name()));
        if (v && v->tensor >= 0 && producers[static_cast<size_t>(v->tensor)] >= 0)
            graph_.tensors[static_cast<size_t>(v->tensor)].role = TensorRole::Output;
    }
}

} // namespace tp::onnx_detail
