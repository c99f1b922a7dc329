// Constant folding (onnx_importer.h): the shape-only subgraphs exporters emit (Shape, Gather on
// shapes, Constant, ConstantOfShape, Unsqueeze/Concat/Cast of shape values, ...) are evaluated,
// so that the mapped graph holds only the ops that compute on activations and weights.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "onnx_importer.h"

namespace tp::onnx_detail {

bool Importer::isConstant(const std::string& name) const
{
    if (name.empty()) return true;
    const Value* v = find(name);
    return v && v->constant;
}

const ConstValue* Importer::constValue(const std::string& name) const
{
    const Value* v = find(name);
    return v && v->value ? &*v->value : nullptr;
}

// Every node whose inputs are all constant (Shape and Size: whatever their input) is folded and
// leaves the live set; its outputs become constants, with their numbers when small enough.
void Importer::foldConstants()
{
    live_.assign(nodes_.size(), true);
    for (size_t i = 0; i < nodes_.size(); ++i) {
        Node& n = nodes_[i];
        if (n.type == "Identity(parameter)") {
            live_[i] = false;
            continue;
        }
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

// ---------------------------------------------------------------------------------------------
// The folding table: one row per ONNX op type the importer evaluates on constants

namespace {

using UnaryFold = std::function<double(double)>;
using BinaryFold = std::function<double(double, double)>;

const std::map<std::string, UnaryFold, std::less<>>& unaryFolds()
{
    static const std::map<std::string, UnaryFold, std::less<>> table = {
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
    return table;
}

const std::map<std::string, BinaryFold, std::less<>>& binaryFolds()
{
    static const std::map<std::string, BinaryFold, std::less<>> table = {
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
    return table;
}

} // namespace

const std::map<std::string, ConstFolder, std::less<>>& Importer::constFolders()
{
    static const std::map<std::string, ConstFolder, std::less<>> table = [] {
        std::map<std::string, ConstFolder, std::less<>> t = {
            {"Constant", &Importer::foldConstant},
            {"Shape", &Importer::foldShape},
            {"Size", &Importer::foldShape},
            {"Identity", &Importer::foldReshapeLike},
            {"Cast", &Importer::foldReshapeLike},
            {"Reshape", &Importer::foldReshapeLike},
            {"Unsqueeze", &Importer::foldReshapeLike},
            {"Squeeze", &Importer::foldReshapeLike},
            {"Flatten", &Importer::foldReshapeLike},
            {"ConstantOfShape", &Importer::foldConstantOfShape},
            {"Range", &Importer::foldRange},
            {"Gather", &Importer::foldGather},
            {"Concat", &Importer::foldConcat},
            {"Slice", &Importer::foldSlice},
            {"Expand", &Importer::foldExpand},
            {"Trilu", &Importer::foldTrilu},
            {"Where", &Importer::foldElementwise},
        };
        for (const auto& [type, f] : unaryFolds()) t.emplace(type, &Importer::foldUnary);
        for (const auto& [type, f] : binaryFolds()) t.emplace(type, &Importer::foldElementwise);
        return t;
    }();
    return table;
}

std::optional<ConstValue> Importer::evaluate(const Node& n) const
{
    const auto& table = constFolders();
    auto it = table.find(n.type);
    if (it == table.end()) return std::nullopt;
    return (this->*(it->second))(n);
}

const ConstValue* Importer::constInput(const Node& n, size_t i) const
{
    return i < n.inputs.size() ? constValue(n.inputs[i]) : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Folds, one per op type (or family)

std::optional<ConstValue> Importer::foldConstant(const Node& n) const
{
    const auto* p = n.proto;
    if (const auto* a = findAttr(p, "value")) return readTensor(a->t());
    if (const auto* a = findAttr(p, "value_int")) {
        auto v = ConstValue::make({}, false);
        v.ints[0] = a->i();
        return v;
    }
    if (const auto* a = findAttr(p, "value_float")) {
        auto v = ConstValue::make({}, true);
        v.reals[0] = a->f();
        return v;
    }
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

// Shape and Size depend on the input's shape only, never on its values.
std::optional<ConstValue> Importer::foldShape(const Node& n) const
{
    const auto* p = n.proto;
    const auto s = n.inputs.empty() ? std::nullopt : shapeOf(n.inputs[0]);
    if (!s) return std::nullopt;
    if (n.type == "Size") {
        auto v = ConstValue::make({}, false);
        v.ints[0] = elementCount(*s).value_or(0);
        return v;
    }
    const auto rank = static_cast<std::int64_t>(s->size());
    auto clampAxis = [&](std::int64_t a) {
        if (a < 0) a += rank;
        return std::clamp<std::int64_t>(a, 0, rank);
    };
    const auto start = clampAxis(attrInt(p, "start").value_or(0));
    const auto end = clampAxis(attrInt(p, "end").value_or(rank));
    auto v = ConstValue::make({std::max<std::int64_t>(end - start, 0)}, false);
    for (std::int64_t i = start; i < end; ++i) v.ints[static_cast<size_t>(i - start)] = (*s)[static_cast<size_t>(i)];
    return v;
}

// Identity, Cast, Reshape, Unsqueeze, Squeeze, Flatten: the same numbers, other dims or type.
std::optional<ConstValue> Importer::foldReshapeLike(const Node& n) const
{
    const std::string& t = n.type;
    const ConstValue* x = constInput(n, 0);
    const auto out = shapeOf(n.outputs.at(0));
    if (!x) return std::nullopt;
    if (t == "Cast") return foldCast(n);
    if (t == "Identity") return *x;
    if (t == "Unsqueeze" || t == "Squeeze") return foldSqueeze(n);
    if (t == "Reshape" && !out) return foldReshape(n);
    if (!out || elementCount(*out) != static_cast<std::int64_t>(x->size())) return std::nullopt;
    ConstValue v = *x;
    v.dims = *out;
    return v;
}

std::optional<ConstValue> Importer::foldCast(const Node& n) const
{
    const ConstValue* x = constInput(n, 0);
    const auto to = attrInt(n.proto, "to").value_or(0);
    const bool toFloat = isFloatType(static_cast<int>(to));
    ConstValue c = ConstValue::make(x->dims, toFloat);
    for (size_t i = 0; i < x->size(); ++i) {
        if (to == onnx::TensorProto_DataType_BOOL)
            c.setInt(i, x->real(i) != 0.0);
        else if (toFloat)
            c.set(i, x->real(i));
        else
            c.setInt(i, x->integer(i));
    }
    return c;
}

std::optional<ConstValue> Importer::foldSqueeze(const Node& n) const
{
    const ConstValue* x = constInput(n, 0);
    std::vector<std::int64_t> axes = attrInts(n.proto, "axes").value_or(std::vector<std::int64_t>{});
    if (opset_ >= 13 && n.inputs.size() > 1 && !n.inputs[1].empty()) {
        if (!constInput(n, 1)) return std::nullopt;
        axes = constInput(n, 1)->integers();
    }
    Shape dims;
    if (n.type == "Unsqueeze") {
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
    ConstValue v = *x;
    v.dims = dims;
    return v;
}

// A Reshape whose output shape inference left unknown: the target's 0 and -1 resolved here.
std::optional<ConstValue> Importer::foldReshape(const Node& n) const
{
    const ConstValue* x = constInput(n, 0);
    const ConstValue* target = constInput(n, 1);
    if (!target) return std::nullopt;
    Shape dims = target->integers();
    std::int64_t known = 1;
    int unknown = -1;
    for (size_t d = 0; d < dims.size(); ++d) {
        if (dims[d] == 0 && d < x->dims.size() && attrInt(n.proto, "allowzero").value_or(0) == 0) dims[d] = x->dims[d];
        if (dims[d] == -1)
            unknown = static_cast<int>(d);
        else if (dims[d] <= 0)
            return std::nullopt;
        else
            known *= dims[d];
    }
    if (unknown >= 0) {
        if (known == 0 || static_cast<std::int64_t>(x->size()) % known) return std::nullopt;
        dims[static_cast<size_t>(unknown)] = static_cast<std::int64_t>(x->size()) / known;
    }
    if (elementCount(dims) != static_cast<std::int64_t>(x->size())) return std::nullopt;
    ConstValue v = *x;
    v.dims = dims;
    return v;
}

std::optional<ConstValue> Importer::foldConstantOfShape(const Node& n) const
{
    const ConstValue* s = constInput(n, 0);
    if (!s) return std::nullopt;
    Shape dims = s->integers();
    if (!smallEnough(dims)) return std::nullopt;
    std::optional<ConstValue> fill;
    if (const auto* a = findAttr(n.proto, "value")) fill = readTensor(a->t());
    const bool isFloat = fill ? fill->isFloat : true;
    auto v = ConstValue::make(dims, isFloat);
    if (fill && fill->size() > 0)
        for (size_t i = 0; i < v.size(); ++i) v.set(i, fill->real(0));
    return v;
}

std::optional<ConstValue> Importer::foldRange(const Node& n) const
{
    const ConstValue *a = constInput(n, 0), *b = constInput(n, 1), *c = constInput(n, 2);
    if (!a || !b || !c || !a->size() || !b->size() || !c->size()) return std::nullopt;
    const double start = a->real(0), limit = b->real(0), delta = c->real(0);
    if (delta == 0 || std::isnan(start) || std::isnan(limit) || std::isnan(delta)) return std::nullopt;
    const double count = std::max(std::ceil((limit - start) / delta), 0.0);
    if (count > static_cast<double>(kMaxConstElements)) return std::nullopt;
    auto v = ConstValue::make({static_cast<std::int64_t>(count)}, a->isFloat);
    for (size_t i = 0; i < v.size(); ++i) v.set(i, start + static_cast<double>(i) * delta);
    return v;
}

std::optional<ConstValue> Importer::foldGather(const Node& n) const
{
    const ConstValue *data = constInput(n, 0), *idx = constInput(n, 1);
    if (!data || !idx || data->dims.empty()) return std::nullopt;
    const auto axis = normalAxis(attrInt(n.proto, "axis").value_or(0), data->dims.size());
    if (!axis) return std::nullopt;
    Shape dims(data->dims.begin(), data->dims.begin() + static_cast<std::ptrdiff_t>(*axis));
    dims.insert(dims.end(), idx->dims.begin(), idx->dims.end());
    dims.insert(dims.end(), data->dims.begin() + static_cast<std::ptrdiff_t>(*axis) + 1, data->dims.end());
    if (!smallEnough(dims)) return std::nullopt;
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
            for (std::int64_t b = 0; b < inner; ++b) v.set(o++, data->real(static_cast<size_t>((a * axisSize + j) * inner + b)));
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

std::optional<ConstValue> Importer::foldConcat(const Node& n) const
{
    std::vector<const ConstValue*> parts;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
        const ConstValue* x = constInput(n, i);
        if (!x) return std::nullopt;
        parts.push_back(x);
    }
    if (parts.empty() || parts[0]->dims.empty()) return std::nullopt;
    const auto axis = normalAxis(attrInt(n.proto, "axis").value_or(0), parts[0]->dims.size());
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
    if (!smallEnough(dims)) return std::nullopt;
    std::int64_t outer = 1;
    for (size_t d = 0; d < *axis; ++d) outer *= dims[d];
    auto v = ConstValue::make(dims, isFloat);
    size_t o = 0;
    for (std::int64_t a = 0; a < outer; ++a)
        for (auto* x : parts) {
            const std::int64_t chunk = static_cast<std::int64_t>(x->size()) / std::max<std::int64_t>(outer, 1);
            for (std::int64_t k = 0; k < chunk; ++k) {
                const auto src = static_cast<size_t>(a * chunk + k);
                if (x->isFloat)
                    v.set(o++, x->reals[src]);
                else
                    v.setInt(o++, x->ints[src]);
            }
        }
    return v;
}

std::optional<ConstValue> Importer::foldSlice(const Node& n) const
{
    const auto* p = n.proto;
    const ConstValue* data = constInput(n, 0);
    if (!data) return std::nullopt;
    std::vector<std::int64_t> starts, ends, axes, steps;
    if (opset_ < 10) {
        starts = attrInts(p, "starts").value_or(std::vector<std::int64_t>{});
        ends = attrInts(p, "ends").value_or(std::vector<std::int64_t>{});
        axes = attrInts(p, "axes").value_or(std::vector<std::int64_t>{});
    } else {
        if (!constInput(n, 1) || !constInput(n, 2)) return std::nullopt;
        starts = constInput(n, 1)->integers();
        ends = constInput(n, 2)->integers();
        if (n.inputs.size() > 3 && !n.inputs[3].empty()) {
            if (!constInput(n, 3)) return std::nullopt;
            axes = constInput(n, 3)->integers();
        }
        if (n.inputs.size() > 4 && !n.inputs[4].empty()) {
            if (!constInput(n, 4)) return std::nullopt;
            steps = constInput(n, 4)->integers();
        }
    }
    const size_t rank = data->dims.size();
    if (axes.empty())
        for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
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
        const std::int64_t count =
            forward ? (e > s ? (e - s + steps[k] - 1) / steps[k] : 0) : (s > e ? (s - e + (-steps[k]) - 1) / (-steps[k]) : 0);
        first[*axis] = s;
        step[*axis] = steps[k];
        dims[*axis] = count;
    }
    auto v = ConstValue::make(dims, data->isFloat);
    std::vector<std::int64_t> counter(rank, 0);
    for (size_t o = 0; o < v.size(); ++o) {
        std::int64_t src = 0;
        for (size_t d = 0; d < rank; ++d) src = src * data->dims[d] + first[d] + counter[d] * step[d];
        if (data->isFloat)
            v.reals[o] = data->reals[static_cast<size_t>(src)];
        else
            v.ints[o] = data->ints[static_cast<size_t>(src)];
        for (size_t d = rank; d-- > 0;) {
            if (++counter[d] < dims[d]) break;
            counter[d] = 0;
        }
    }
    return v;
}

std::optional<ConstValue> Importer::foldExpand(const Node& n) const
{
    const ConstValue *x = constInput(n, 0), *s = constInput(n, 1);
    if (!x || !s) return std::nullopt;
    const Shape target = s->integers();
    const auto dims = broadcastShapes({&x->dims, &target});
    if (!dims || !smallEnough(*dims)) return std::nullopt;
    const auto map = broadcastIndex(x->dims, *dims);
    auto v = ConstValue::make(*dims, x->isFloat);
    for (size_t i = 0; i < map.size(); ++i) {
        if (x->isFloat)
            v.reals[i] = x->reals[map[i]];
        else
            v.ints[i] = x->ints[map[i]];
    }
    return v;
}

std::optional<ConstValue> Importer::foldTrilu(const Node& n) const
{
    const ConstValue* x = constInput(n, 0);
    if (!x || x->dims.size() < 2) return std::nullopt;
    const std::int64_t k = constInput(n, 1) && constInput(n, 1)->size() ? constInput(n, 1)->integer(0) : 0;
    const bool upper = attrInt(n.proto, "upper").value_or(1) != 0;
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

std::optional<ConstValue> Importer::foldUnary(const Node& n) const
{
    const auto& f = unaryFolds().find(n.type)->second;
    const ConstValue* x = constInput(n, 0);
    if (!x) return std::nullopt;
    ConstValue v = *x;
    for (size_t i = 0; i < v.size(); ++i) v.set(i, f(x->real(i)));
    return v;
}

// The binary ops of binaryFolds() and Where, with numpy broadcasting; integer arithmetic stays
// exact (and divides like ONNX), comparisons give booleans.
std::optional<ConstValue> Importer::foldElementwise(const Node& n) const
{
    const std::string& t = n.type;
    const bool isWhere = t == "Where";
    auto bit = binaryFolds().find(t);
    if (bit == binaryFolds().end() && !isWhere) return std::nullopt;
    std::vector<const ConstValue*> args;
    for (size_t i = 0; i < (isWhere ? 3u : 2u); ++i) {
        const ConstValue* x = constInput(n, i);
        if (!x) return std::nullopt;
        args.push_back(x);
    }
    std::vector<const Shape*> shapes;
    for (auto* a : args) shapes.push_back(&a->dims);
    const auto dims = broadcastShapes(shapes);
    if (!dims || !smallEnough(*dims)) return std::nullopt;
    std::vector<std::vector<size_t>> maps;
    for (auto* a : args) maps.push_back(broadcastIndex(a->dims, *dims));
    const bool comparison = t == "Equal" || t == "Less" || t == "Greater" || t == "And" || t == "Or";
    const bool isFloat =
        !comparison && (isWhere ? (args[1]->isFloat || args[2]->isFloat) : (args[0]->isFloat || args[1]->isFloat));
    auto v = ConstValue::make(*dims, isFloat);
    for (size_t i = 0; i < v.size(); ++i) {
        if (isWhere) {
            const auto* pick = args[0]->real(maps[0][i]) != 0.0 ? args[1] : args[2];
            const size_t src = maps[pick == args[1] ? 1 : 2][i];
            if (pick->isFloat || isFloat)
                v.set(i, pick->real(src));
            else
                v.setInt(i, pick->ints[src]);
        } else if (!isFloat && !comparison) { // exact integer arithmetic (floor division like ONNX)
            const std::int64_t a = args[0]->ints[maps[0][i]], b = args[1]->ints[maps[1][i]];
            if (t == "Add")
                v.ints[i] = static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
            else if (t == "Sub")
                v.ints[i] = static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
            else if (t == "Mul")
                v.ints[i] = static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
            else if (t == "Div") {
                if (b == 0 || (a == std::numeric_limits<std::int64_t>::min() && b == -1)) return std::nullopt;
                v.ints[i] = a / b;
            } else
                v.set(i, bit->second(static_cast<double>(a), static_cast<double>(b)));
        } else {
            v.set(i, bit->second(args[0]->real(maps[0][i]), args[1]->real(maps[1][i])));
        }
    }
    return v;
}

// ---------------------------------------------------------------------------------------------
// A second round of shape inference

// Folded values that live nodes read become initializers, and the nodes computing them go,
// so that a second round of shape inference sees them (a Reshape whose target was computed
// from Shape/Gather/Concat then gets a static output shape). Returns whether it did anything
// that could help: some live node still lacks an output shape.
bool Importer::injectFoldedConstants()
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
            addInitializer(out, *constValue(out));
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

// A folded value as an initializer of the model, in the element type the value had.
void Importer::addInitializer(const std::string& name, const ConstValue& v)
{
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    for (auto d : v.dims) t->add_dims(d);
    const int type =
        elemType(name) ? elemType(name) : (v.isFloat ? onnx::TensorProto_DataType_FLOAT : onnx::TensorProto_DataType_INT64);
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
}

} // namespace tp::onnx_detail
